"""Library round settings as run config (the Launchpad form of one round); declared once, in
``hypograph/library/settings.py``."""

from hypograph.library.settings import LibrarySettings
from resources.settings import settings_resource

LibraryResource = settings_resource(
    LibrarySettings,
    "What a new round is asked to do. Leave topic empty to follow the previous round's settings (what the "
    "sensor does); a round that already generated always keeps its own.",
)
