"""Exact candidate pairs of sparse (TF-IDF) rows at a cosine threshold, without the dense product.

Every pair of TF-IDF rows shares some common word, so the plain sparse product is nearly dense.
The vocabulary is split into the k most frequent terms F and the rest R:

    cos(x, y) = x_R.y_R + x_F.y_F,   0 <= x_F.y_F <= |x_F| |y_F|   (non-negative rows, Cauchy-Schwarz)

* Rows are put in order of descending |x_F|. A block of rows [a, b) meets only the rows after a
  (each pair once), all with |x_F| <= |x_a|, so a pair can only reach t if x_R.y_R >= t - |x_a|^2:
  one scalar test prunes most of the R product before any per-pair work.
* Survivors of the per-pair bound x_R.y_R + |x_F||y_F| >= t get x_F.y_F from the block's dense F
  rows, so their cosine is exact (up to the order of float additions).
* A pair sharing no rare term has cos = x_F.y_F: only "heavy" rows (|x_F| |x_0| >= t, a prefix of
  the order) can form one, and they are matched by a dense product over the F columns.

k is chosen per corpus to minimise the estimated work. Used by ``similarity.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

# Slack for the bound tests, which add terms in another order than an exact sum.
BOUND_SLACK = 1e-9
# Relative cost of one heavy pair's k-term dense dot, against one sparse product entry.
HEAVY_PAIR_COST = 1 / 8


@dataclass
class SparseSplit:
    """Rows in the order of descending |x_F| (``order[p]`` is the row at position p)."""

    order: np.ndarray
    rare: sp.csr_matrix  # R parts, in position order
    frequent: sp.csr_matrix  # F parts, columns renumbered 0..k-1, in position order
    fnorm: np.ndarray  # |x_F| by position (descending)
    heavy: int  # positions [0, heavy) may pair through F alone
    heavy_dense: np.ndarray  # their F parts, dense
    terms: int  # k
    rare_t: sp.csr_matrix | None = None  # R parts transposed (full-row blocks only)


def split_rows(x: sp.csr_matrix, t: float) -> SparseSplit:
    """The split of normalised rows ``x`` for threshold ``t`` (> 0)."""
    n, v = x.shape
    t = t - BOUND_SLACK
    k = choose_frequent_terms(x, t)
    df = np.bincount(x.indices, minlength=v)
    frequent = np.zeros(v, dtype=bool)
    frequent[np.argsort(-df, kind="stable")[:k]] = True
    mask = frequent[x.indices]
    row_of = np.repeat(np.arange(n), np.diff(x.indptr))
    fnorm = np.sqrt(np.bincount(row_of[mask], weights=x.data[mask] ** 2, minlength=n))
    order = np.argsort(-fnorm, kind="stable")
    compact = np.cumsum(frequent) - 1  # column -> its place among the frequent columns
    indptr_f = np.concatenate([[0], np.cumsum(np.bincount(row_of[mask], minlength=n))])
    f = sp.csr_matrix((x.data[mask], compact[x.indices[mask]], indptr_f), shape=(n, max(k, 1)))[order]
    # Copies of x's index arrays: eliminate_zeros rewrites them in place, and x's rows are read
    # again (a knife-edge pair is recomputed from them).
    r = sp.csr_matrix((np.where(mask, 0.0, x.data), x.indices.copy(), x.indptr.copy()), shape=x.shape)
    r.eliminate_zeros()
    fs = fnorm[order]
    heavy = int(np.count_nonzero(fs * fs[:1].max(initial=0.0) >= t))
    return SparseSplit(order, r[order], f, fs, heavy, f[:heavy].toarray(), k)


def choose_frequent_terms(x: sp.csr_matrix, t: float) -> int:
    """The number k of most frequent terms to bound rather than multiply, minimising the estimated
    work: R product entries (sum of df^2 over rare terms) plus the heavy pairs' dense dots.
    k is tried at 0, 8, 16, 32, ... up to the vocabulary size."""
    n, v = x.shape
    if x.nnz == 0:
        return 0
    df = np.bincount(x.indices, minlength=v)
    order = np.argsort(-df, kind="stable")
    rank = np.empty(v, dtype=np.int64)
    rank[order] = np.arange(v)
    ks = [0] + [min(2**p, v) for p in range(3, int(np.ceil(np.log2(max(v, 8)))) + 1)]
    ks = sorted(set(ks))
    # Squares of each row's entries by the first candidate k that counts them as frequent.
    bucket = np.searchsorted(np.asarray(ks), rank[x.indices], side="right")
    row_of = np.repeat(np.arange(n), np.diff(x.indptr))
    per_bucket = np.bincount(
        row_of * (len(ks) + 1) + bucket, weights=x.data * x.data, minlength=n * (len(ks) + 1)
    ).reshape(n, len(ks) + 1)
    fsquares = np.cumsum(per_bucket, axis=1)  # column b: squares of terms with rank < ks[b]
    df2 = np.cumsum((df[order].astype(np.float64) ** 2)[::-1])[::-1]  # df2[k]: sum over ranks >= k
    best = (np.inf, 0)
    for b, k in enumerate(ks):
        product = (df2[k] if k < v else 0.0) / 2
        fnorm = np.sqrt(fsquares[:, b])
        heavy = np.sort(fnorm[fnorm * fnorm.max() >= t])
        pairs = (
            float((heavy.size - np.searchsorted(heavy, t / np.maximum(heavy, 1e-12))).sum()) / 2 if heavy.size else 0.0
        )
        best = min(best, (product + pairs * max(k, 1) * HEAVY_PAIR_COST, k))
    return best[1]


def row_costs(split: SparseSplit, upper: bool) -> np.ndarray:
    """Estimated product entries of each position's row (for sizing blocks)."""
    x = split.rare
    n = x.shape[0]
    df = np.bincount(x.indices, minlength=x.shape[1]).astype(np.float64)
    pattern = sp.csr_matrix((np.ones_like(x.data), x.indices, x.indptr), shape=x.shape)
    cost = np.minimum(pattern @ df, n) + 1
    return cost * (n - np.arange(n)) / n + 1 if upper else cost


def candidates(split: SparseSplit, t: float, start: int, stop: int, upper: bool):
    """(positions i, positions j, cos) for i in [start, stop) and every j (j > i when ``upper``)
    that may reach ``t``; cosines exact up to float order."""
    fs, n = split.fnorm, split.fnorm.size
    first = start if upper else 0
    if upper:
        right = split.rare[first:].T
        floor = t - fs[start] ** 2  # every pair here has |x_F| |y_F| <= |x_start|^2
    else:
        if split.rare_t is None:
            split.rare_t = split.rare.T.tocsr()
        right = split.rare_t
        floor = t - fs[start] * fs[0]
    product = (split.rare[start:stop] @ right).tocsr()
    keep = np.flatnonzero(product.data >= floor - BOUND_SLACK)
    rows = (np.searchsorted(product.indptr, keep, side="right") - 1 + start).astype(np.int64)
    cols = product.indices[keep].astype(np.int64) + first
    partial = product.data[keep]
    ok = ((cols > rows) if upper else (cols != rows)) & (partial + fs[rows] * fs[cols] >= t - BOUND_SLACK)
    rows, cols = rows[ok], cols[ok]
    sims = partial[ok] + _frequent_dots(split, start, stop, rows, cols)
    h_rows, h_cols, h_sims = _heavy_pairs(split, t, start, stop, upper)
    if h_rows.size:
        # A heavy pair sharing a rare term is in both lists: keep the product's value.
        rows, cols, sims = (
            np.concatenate([rows, h_rows]),
            np.concatenate([cols, h_cols]),
            np.concatenate([sims, h_sims]),
        )
        _, first_seen = np.unique(rows * n + cols, return_index=True)
        rows, cols, sims = rows[first_seen], cols[first_seen], sims[first_seen]
    return rows, cols, sims


def _frequent_dots(
    split: SparseSplit, start: int, stop: int, rows: np.ndarray, cols: np.ndarray, chunk: int = 500_000
) -> np.ndarray:
    """x_F[rows[k]] . x_F[cols[k]]: row ``cols[k]``'s F entries looked up in the block's dense F rows."""
    f = split.frequent
    dense = f[start:stop].toarray()
    out = np.zeros(rows.size)
    for a in range(0, rows.size, chunk):
        partners = f[cols[a : a + chunk]]  # their F rows, gathered in C
        owner = np.repeat(np.arange(partners.shape[0]), np.diff(partners.indptr))
        products = dense[rows[a : a + chunk][owner] - start, partners.indices] * partners.data
        out[a : a + chunk] = np.bincount(owner, weights=products, minlength=partners.shape[0])
    return out


def _heavy_pairs(split: SparseSplit, t: float, start: int, stop: int, upper: bool, budget: int = 4_000_000):
    """(i, j, x_F.y_F) for heavy positions i in [start, stop) and heavy j with x_F.y_F >= t."""
    empty = np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
    fs, heavy = split.fnorm, split.heavy
    stop = min(stop, heavy)
    if stop <= start or heavy < 2:
        return empty
    # Row i's partners need |x_F,j| >= t / |x_F,i|: positions [0, reach_i), fewer for lighter rows.
    reach = np.searchsorted(-fs[:heavy], -(t - BOUND_SLACK) / np.maximum(fs[start:stop], 1e-12), side="right")
    out = []
    a = start
    while a < stop:
        width = int(reach[a - start])
        b = min(stop, a + max(1, budget // max(width, 1)))
        first = a if upper else 0  # upper: partners after a only
        if width > first:
            dots = split.heavy_dense[a:b] @ split.heavy_dense[first:width].T
            r, c = np.nonzero(dots >= t - BOUND_SLACK)
            i, j = (r + a).astype(np.int64), (c + first).astype(np.int64)
            keep = (j > i) if upper else (j != i)
            out.append((i[keep], j[keep], dots[r[keep], c[keep]]))
        a = b
    return tuple(np.concatenate([o[k] for o in out]) for k in range(3)) if out else empty


def seed_cosine(x: sp.csr_matrix, i: int, j: int) -> float:
    """cos(i, j) with the shared terms' products added in column order from 0.0, as the seed's sparse
    product adds them: for values the fast path leaves within float error of a boundary."""
    a = slice(x.indptr[i], x.indptr[i + 1])
    b = slice(x.indptr[j], x.indptr[j + 1])
    other = dict(zip(x.indices[b].tolist(), x.data[b].tolist(), strict=True))
    total = 0.0
    for col, value in zip(x.indices[a].tolist(), x.data[a].tolist(), strict=True):
        if col in other:
            total += value * other[col]
    return total
