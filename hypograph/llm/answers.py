"""The check every numbered model answer shares: items were shown numbered 1..N, and the answer
must give exactly one entry per number (none missing, none twice, none outside 1..N)."""

from __future__ import annotations

from collections.abc import Iterable


def require_one_each(numbers: Iterable[int], count: int, what: str, got: str = "got") -> None:
    """Raise ``ValueError`` (the model is asked again, told why) unless ``numbers`` are 1..``count``
    each exactly once. ``what`` names one entry and its item ("decision for each pair"); the
    message reads ``expected exactly one <what> 1..<count>, <got> [the numbers, sorted]``."""
    numbers = sorted(numbers)
    if numbers != list(range(1, count + 1)):
        raise ValueError(f"expected exactly one {what} 1..{count}, {got} {numbers}")
