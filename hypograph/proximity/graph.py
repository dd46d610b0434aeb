"""The cosine similarity graph: every pair of hypotheses with similarity >= threshold.

Never materialises the N x N matrix. Rows are processed in chunks: rows [a, b) are multiplied
against rows [a, n) only (the upper triangle), entries below the threshold are dropped before the
next chunk, and chunk sizes keep each product under CHUNK_BUDGET candidates. For sparse (TF-IDF)
rows, the most frequent terms are first pruned with an exact norm bound (see ``_sparse_pairs``):
without it nearly every pair shares some common word and the product is almost dense.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from hypograph.errors import HypographError

DEFAULT_THRESHOLD = 0.30
# Float error: a pair whose true cosine equals the threshold may compute as t - 1e-7 in float32.
EPS = 1e-6
# Upper bound on candidate entries held by one chunk's product.
CHUNK_BUDGET = 4_000_000


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
    if matrix.shape[0] < 2:
        empty = np.empty(0, dtype=np.int32)
        return empty, empty.copy(), np.empty(0, dtype=np.float32)
    if sp.issparse(matrix):
        parts = _sparse_pairs(matrix.tocsr(), threshold)
    else:
        parts = [_dense_block(np.asarray(matrix, dtype=np.float32), threshold, a, b) for a, b in _dense_chunks(matrix.shape[0])]
    src, dst, sim = (np.concatenate([p[k] for p in parts]) for k in range(3))
    key = src.astype(np.int64) * matrix.shape[0] + dst
    _, first = np.unique(key, return_index=True)  # sorted by (i, j); a pair found twice kept once
    return src[first], dst[first], sim[first]


def _dense_chunks(n: int):
    step = max(1, CHUNK_BUDGET // n // 4)
    for a in range(0, n, step):
        yield a, min(n, a + step)


def _dense_block(x: np.ndarray, t: float, a: int, b: int):
    block = x[a:b] @ x[a:].T  # rows a..b-1 against columns a..n-1: the upper triangle only
    r, c = np.nonzero(block >= t - EPS)
    rows, cols = (r + a).astype(np.int32), (c + a).astype(np.int32)
    keep = cols > rows
    return rows[keep], cols[keep], np.minimum(block[r, c][keep], 1.0).astype(np.float32)


# -- sparse: exact pruning on frequent terms --------------------------------------------------------
#
# Split the vocabulary into the k most frequent terms F and the rest R. Then
# cos(x, y) = x_R . y_R + x_F . y_F, and x_F . y_F <= |x_F| |y_F| (Cauchy-Schwarz). So
#   * candidates come from the chunked product of the R parts alone — rare terms are shared by few
#     rows, so this product is small where the full one would be nearly dense;
#   * a candidate survives only if x_R . y_R + |x_F| |y_F| >= t, and then gets its exact cosine;
#   * a pair sharing no rare term has cosine <= |x_F| |y_F|, so it can reach t only if both rows
#     are in S = {rows with |x_F| * max|F| >= t}; one exact product among S covers those.
# The result is exact for any k; k is chosen to minimise the estimated work.

def _sparse_pairs(x: sp.csr_matrix, t: float) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    n = x.shape[0]
    frequent = _frequent_terms(x, _choose_k(x, t))
    mask = frequent[x.indices]
    xf = _masked(x, mask)
    xr = _masked(x, ~mask)
    fnorm = np.sqrt(np.asarray(xf.multiply(xf).sum(axis=1)).ravel()).astype(np.float32)
    parts = []
    for a, b in _chunks(xr):
        product = (xr[a:b] @ xr[a:].T).tocsr()
        rows = np.repeat(np.arange(a, b, dtype=np.int32), np.diff(product.indptr))
        cols = product.indices.astype(np.int32) + a
        keep = (cols > rows) & (product.data + fnorm[rows] * fnorm[cols] >= t - EPS)
        rows, cols = rows[keep], cols[keep]
        sim = product.data[keep] + np.asarray(xf[rows].multiply(xf[cols]).sum(axis=1)).ravel()
        keep = sim >= t - EPS
        parts.append((rows[keep], cols[keep], np.minimum(sim[keep], 1.0).astype(np.float32)))
    s_rows = np.flatnonzero(fnorm * fnorm.max(initial=0.0) >= t - EPS).astype(np.int32)
    if s_rows.size > 1:
        product = sp.triu(x[s_rows] @ x[s_rows].T, k=1).tocoo()
        keep = product.data >= t - EPS
        parts.append((s_rows[product.row[keep]], s_rows[product.col[keep]],
                      np.minimum(product.data[keep], 1.0).astype(np.float32)))
    return parts or [(np.empty(0, np.int32), np.empty(0, np.int32), np.empty(0, np.float32))]


def _masked(x: sp.csr_matrix, mask: np.ndarray) -> sp.csr_matrix:
    # Copies: eliminate_zeros works in place and must not touch x's own index arrays.
    m = sp.csr_matrix((np.where(mask, x.data, 0), x.indices.copy(), x.indptr.copy()), shape=x.shape)
    m.eliminate_zeros()
    return m


def _frequent_terms(x: sp.csr_matrix, k: int) -> np.ndarray:
    df = np.bincount(x.indices, minlength=x.shape[1])
    frequent = np.zeros(x.shape[1], dtype=bool)
    frequent[np.argsort(df, kind="stable")[::-1][:k]] = True
    return frequent


def _choose_k(x: sp.csr_matrix, t: float) -> int:
    """The frequent-term count minimising (rare-part candidates + |S|^2 / 2), over k = 0, 8, 16, 32…"""
    n, v = x.shape
    if x.nnz == 0:
        return 0
    df = np.bincount(x.indices, minlength=v)
    rank = np.empty(v, dtype=np.int64)
    rank[np.argsort(df, kind="stable")[::-1]] = np.arange(v)
    term_rank = rank[x.indices]
    row_of = np.repeat(np.arange(n), np.diff(x.indptr))
    squares = x.data.astype(np.float64) ** 2
    best = (np.inf, 0)
    for k in [0] + [2 ** p for p in range(3, int(np.log2(max(v, 8))) + 1)]:
        rare = term_rank >= k
        candidates = (df[x.indices] * rare).sum() / 2
        fnorm = np.sqrt(np.bincount(row_of, weights=np.where(rare, 0.0, squares), minlength=n))
        s = np.count_nonzero(fnorm * fnorm.max() >= t - EPS)
        best = min(best, (candidates + s * s / 2, k))
    return best[1]


def _chunks(x: sp.csr_matrix):
    """Row ranges [a, b) whose upper-triangle products each hold about CHUNK_BUDGET candidates."""
    n = x.shape[0]
    df = np.bincount(x.indices, minlength=x.shape[1]).astype(np.float64)
    pattern = sp.csr_matrix((np.ones_like(x.data), x.indices, x.indptr), shape=x.shape)
    # A row's product has at most sum over its terms of df(term) entries, and at most n - i.
    cost = np.minimum(pattern @ df, n - np.arange(n)) + 1
    total = np.cumsum(cost)
    bounds = np.unique(np.searchsorted(total, np.arange(CHUNK_BUDGET, total[-1] + CHUNK_BUDGET, CHUNK_BUDGET)) + 1)
    a = 0
    for b in np.minimum(bounds, n):
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
