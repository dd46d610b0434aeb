"""IO managers that persist asset values in the seed formats."""

from io_managers.hypograph import HypographIOManager

__all__ = ["HypographIOManager"]
