"""The cosine similarity graph: every pair of hypotheses with similarity >= threshold.

Never materialises the N x N matrix. Rows are processed in chunks: for chunk rows [a, b) we multiply
against rows [a, n) only (the upper triangle), keep entries >= threshold and drop the rest before
the next chunk. Chunk boundaries are chosen so each sparse product stays under a fixed number of
candidate entries (estimated from term document frequencies), which bounds peak memory whatever
the corpus looks like.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from hypograph.errors import HypographError

DEFAULT_THRESHOLD = 0.30
# Float error: a pair whose true cosine equals the threshold may compute as t - 1e-7 in float32.
EPS = 1e-6
# Upper bound on candidate entries held by one chunk's product (~12 bytes each).
CHUNK_BUDGET = 20_000_000


@dataclass
class SimilarityGraph:
    """Undirected weighted graph on ``ids``; edge k joins ``src[k] < dst[k]`` with ``sim[k]``."""

    ids: list[str]
    threshold: float
    src: np.ndarray
    dst: np.ndarray
    sim: np.ndarray
    embedding: dict = field(default_factory=dict)  # {"backend", "model"} the rows came from

    @property
    def num_edges(self) -> int:
        return int(self.src.size)

    def edges(self):
        """Yield (id_a, id_b, similarity) with a before b in row order."""
        ids = self.ids
        for i, j, s in zip(self.src.tolist(), self.dst.tolist(), self.sim.tolist()):
            yield ids[i], ids[j], s


def similarity_graph(ids: list[str], matrix, threshold: float = DEFAULT_THRESHOLD, embedding: dict | None = None) -> SimilarityGraph:
    """Build the graph of pairs with cosine >= threshold from L2-normalised rows.

    Sparse input: O(sum over chunks of the product's nonzeros); dense input: O(N^2 d) flops in
    row blocks of bounded size. Memory is bounded by CHUNK_BUDGET plus the kept edges.
    """
    if not 0.0 < threshold <= 1.0:
        # At 0 every pair is an edge: that is the dense N x N matrix this module exists to avoid.
        raise HypographError(f"graph threshold must be in (0, 1], got {threshold}")
    src, dst, sim = similar_pairs(matrix, threshold)
    return SimilarityGraph(list(ids), float(threshold), src, dst, sim, dict(embedding or {}))


def similar_pairs(matrix, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All (i, j, cosine) with i < j and cosine >= threshold - EPS, sorted by (i, j)."""
    n = matrix.shape[0]
    out_src, out_dst, out_sim = [], [], []
    for a, b in _chunks(matrix):
        block = matrix[a:b] @ matrix[a:].T  # rows a..b-1 against columns a..n-1
        if sp.issparse(block):
            block = block.tocsr()
            counts = np.diff(block.indptr)
            rows = np.repeat(np.arange(a, b, dtype=np.int32), counts)
            cols = block.indices.astype(np.int32) + a
            vals = block.data
        else:
            r, c = np.nonzero(np.asarray(block) >= threshold - EPS)
            rows, cols = (r + a).astype(np.int32), (c + a).astype(np.int32)
            vals = np.asarray(block)[r, c]
        keep = (cols > rows) & (vals >= threshold - EPS)
        out_src.append(rows[keep])
        out_dst.append(cols[keep])
        out_sim.append(np.minimum(vals[keep], 1.0).astype(np.float32))
    if not out_src or n == 0:
        empty = np.empty(0, dtype=np.int32)
        return empty, empty.copy(), np.empty(0, dtype=np.float32)
    src, dst, sim = np.concatenate(out_src), np.concatenate(out_dst), np.concatenate(out_sim)
    order = np.lexsort((dst, src))
    return src[order], dst[order], sim[order]


def _chunks(matrix):
    """Row ranges [a, b) whose upper-triangle products each hold about CHUNK_BUDGET candidates."""
    n = matrix.shape[0]
    if n == 0:
        return
    if not sp.issparse(matrix):
        step = max(1, CHUNK_BUDGET // max(n, 1) // 4)
        for a in range(0, n, step):
            yield a, min(n, a + step)
        return
    csr = matrix.tocsr()
    df = np.bincount(csr.indices, minlength=csr.shape[1]).astype(np.float64)
    # A row's product has at most sum over its terms of df(term) nonzeros (the upper triangle halves it).
    pattern = sp.csr_matrix((np.ones_like(csr.data), csr.indices, csr.indptr), shape=csr.shape)
    cost = (pattern @ df) * (1.0 - np.arange(n) / n) + 1
    bounds = np.searchsorted(np.cumsum(cost), np.arange(CHUNK_BUDGET, cost.sum() + CHUNK_BUDGET, CHUNK_BUDGET))
    a = 0
    for b in np.unique(np.minimum(bounds + 1, n)):
        if b > a:
            yield a, int(b)
            a = int(b)
    if a < n:
        yield a, n


def nearest_neighbours(matrix, k: int) -> list[tuple[int, int, float]]:
    """Each row's ``k`` most similar other rows, as (i, j, cosine) with i < j, each pair once.

    Row blocks of bounded size, so memory stays O(block * N) even for dense embeddings.
    """
    n = matrix.shape[0]
    if n < 2 or k < 1:
        return []
    k = min(k, n - 1)
    pairs: dict[tuple[int, int], float] = {}
    step = max(1, CHUNK_BUDGET // n // 4)
    for a in range(0, n, step):
        block = matrix[a:a + step] @ matrix.T
        block = block.toarray() if sp.issparse(block) else np.asarray(block)
        for r in range(block.shape[0]):
            block[r, a + r] = -np.inf  # never one's own neighbour
        top = np.argpartition(-block, k - 1, axis=1)[:, :k]
        for r, cols in enumerate(top):
            i = a + r
            for j in cols.tolist():
                if block[r, j] > 0:
                    pairs[(min(i, j), max(i, j))] = float(min(block[r, j], 1.0))
    return sorted(((i, j, s) for (i, j), s in pairs.items()), key=lambda t: (-t[2], t[0], t[1]))
