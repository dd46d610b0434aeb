"""The nearest-neighbour choice library dedup and vault structuring (``dispositions.candidates``)
share: a row of similarities in, the indices of its ``k`` largest out, most similar first, ties by
the lower index — the same answer for the same row whatever the numeric library's partition does."""

from __future__ import annotations

import numpy as np


def nearest(row: np.ndarray, k: int) -> list[int]:
    """The indices of the ``k`` largest values of the 1-D ``row`` (all of them when ``k`` >= its
    length), largest first; equal values in index order, so a tie at the ``k``-th place keeps the
    lower indices (as a stable sort of ``-row`` would, in O(len) time)."""
    n = row.shape[0]
    k = min(k, n)
    if k <= 0:
        return []
    if k < n:
        cut = np.partition(row, n - k)[n - k]  # the k-th largest value
        above = np.flatnonzero(row > cut)
        chosen = np.concatenate([above, np.flatnonzero(row == cut)[: k - len(above)]])
    else:
        chosen = np.arange(n)
    return sorted(chosen.tolist(), key=lambda j: (-row[j], j))
