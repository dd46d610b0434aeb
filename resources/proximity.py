"""Proximity settings as run config (the Launchpad form of a proximity run); declared once, in
``hypograph/proximity/settings.py``."""

from hypograph.proximity.settings import ProximitySettings
from resources.settings import settings_resource

ProximityResource = settings_resource(
    ProximitySettings, "Embedding backend and the seed's thresholds (graph 0.30, dupes 0.80, auto-merge 0.92)."
)
