"""TF-IDF rows as the three arrays of a CSR matrix, built, written and read with numpy alone.

``prox embed`` builds and writes TF-IDF rows and ``prox clusters`` sums them into keyword labels;
neither multiplies rows, and importing ``scipy.sparse`` would cost each of them 0.15-0.2 s (a
quarter of ``prox clusters`` at 20k hypotheses). ``Csr.matrix()`` is the scipy matrix, for the
similarity product. The file is the one ``scipy.sparse.save_npz(..., compressed=False)`` writes,
byte for byte, so the seed's reader loads it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

from hypograph.errors import HypographError


@dataclass(frozen=True)
class Csr:
    """Row i has the values ``data[indptr[i]:indptr[i + 1]]`` in the columns ``indices[...]``."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]

    @classmethod
    def of(cls, matrix) -> Csr:
        """The arrays of a scipy sparse matrix, as CSR."""
        m = matrix.tocsr()
        return cls(m.data, m.indices, m.indptr, (int(m.shape[0]), int(m.shape[1])))

    def matrix(self):
        """The scipy ``csr_matrix`` on these arrays."""
        import scipy.sparse as sp

        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)


def npz_bytes(rows: Csr) -> bytes:
    """The bytes of ``scipy.sparse.save_npz(file, rows, compressed=False)`` for a ``csr_matrix``."""
    buf = io.BytesIO()
    np.savez(buf, indices=rows.indices, indptr=rows.indptr, format=b"csr", shape=rows.shape, data=rows.data)
    return buf.getvalue()


def from_npz(z, raw: bytes, name: str) -> Csr:
    """The rows of a ``save_npz`` file: ``z`` opened by ``np.load`` from its bytes ``raw``. Formats
    other than CSR (another tool's) go through scipy. Raises HypographError naming ``name`` when
    the arrays do not form a matrix."""
    fmt = z["format"].item()
    if (fmt.decode("ascii", "replace") if isinstance(fmt, bytes) else str(fmt)) != "csr":
        import scipy.sparse as sp

        return Csr.of(sp.load_npz(io.BytesIO(raw)))
    data, indices, indptr, shape = z["data"], z["indices"], z["indptr"], tuple(int(k) for k in z["shape"])
    if not (
        len(shape) == 2
        and data.ndim == indices.ndim == indptr.ndim == 1
        and data.size == indices.size
        and np.issubdtype(data.dtype, np.number)
        and np.issubdtype(indices.dtype, np.integer)
        and np.issubdtype(indptr.dtype, np.integer)
        and indptr.size == shape[0] + 1
        and indptr[0] == 0
        and indptr[-1] == data.size
        and not np.any(np.diff(indptr) < 0)
        and (indices.size == 0 or (indices.min() >= 0 and indices.max() < shape[1]))
    ):
        raise HypographError(f"{name}: its CSR arrays (data, indices, indptr, shape) do not form a matrix")
    return Csr(data, indices, indptr, (shape[0], shape[1]))


def sequential_row_sums(values: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """Each row's values added left to right from 0.0 (the order a C loop adds them, which numpy's
    pairwise reductions do not keep), vectorised over rows one position at a time."""
    lengths = np.diff(indptr)
    out = np.zeros(lengths.size)
    by_length = np.argsort(-lengths, kind="stable")
    alive = lengths.size - np.cumsum(np.bincount(lengths, minlength=1))  # rows longer than each position
    for pos in range(int(lengths.max(initial=0))):
        rows = by_length[: alive[pos]]
        out[rows] += values[indptr[rows] + pos]
    return out
