"""Proximity settings as run config (the Launchpad form of a proximity run); declared once, in
``hypograph/proximity/settings.py``."""

from hypograph.proximity.settings import ProximitySettings
from resources.settings import settings_resource

ProximityResource = settings_resource(ProximitySettings, ProximitySettings.__doc__)
