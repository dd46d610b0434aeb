"""CSR rows are scipy's ``csr_matrix``; this module keeps the one constructor the keyword labels use.

``Csr(data, indices, indptr, shape)`` is ``scipy.sparse.csr_matrix((data, indices, indptr),
shape=shape)``: embeddings.npz is written and read with ``scipy.sparse.save_npz`` /
``load_npz`` (``store.py``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def Csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """Row i has the values ``data[indptr[i]:indptr[i + 1]]`` in the columns ``indices[...]``."""
    return sp.csr_matrix((data, indices, indptr), shape=shape)
