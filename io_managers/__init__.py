"""IO managers that persist asset values in the seed formats."""

from io_managers.proximity import ProximityIOManager

__all__ = ["ProximityIOManager"]
