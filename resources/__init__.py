"""Dagster resources: where the input lives and how proximity is configured."""

from resources.input import HypographInput
from resources.proximity import ProximitySettings

__all__ = ["HypographInput", "ProximitySettings"]
