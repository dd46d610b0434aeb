"""Approximate neighbours of dense rows (sentence embeddings) through a faiss IVF index.

Exact dense similarity costs O(N^2 d): 4e12 flops at 100k rows of 384 dimensions. Above
``EXACT_MAX`` rows the graph's neighbours come from an inverted-file index instead: the rows are
split into ~4 sqrt(N) cells by k-means, and each row is compared only with the rows of its
``NPROBE`` nearest cells. Each row keeps its ``cap`` best neighbours at or above the threshold
(a range search at the threshold when there is no cap) and, whatever the cap, every row within
``keep_above`` found in those cells. Recall against exact search is measured by
``benchmarks/proximity.py --recall`` and reported in the graph's metadata as the method used.

Like ``similarity.py``, a row block is a pure function of the (shared) index and the block.
"""

from __future__ import annotations

import numpy as np

from hypograph.proximity.similarity import Block, Plan, select

EXACT_MAX = 20_000  # up to this many dense rows, the exact BLAS product is fast enough
NPROBE = 16
TRAIN_PER_CELL = 40  # k-means on 40 sampled rows per cell (faiss warns below 39)
TRAIN_ITERATIONS = 10
SEED = 1234


def build_index(plan: Plan, threads: int | None = None):
    """An IVF-Flat inner-product index over the plan's (normalised, dense) rows."""
    import faiss

    if threads:
        faiss.omp_set_num_threads(threads)
    x = np.ascontiguousarray(plan.rows, dtype=np.float32)
    n, d = x.shape
    nlist = int(max(1, min(n // 39, 4 * np.sqrt(n))))
    quantizer = faiss.IndexFlatIP(d)
    index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
    sample = np.random.default_rng(SEED).choice(n, size=min(n, TRAIN_PER_CELL * nlist), replace=False)
    index.cp.seed = SEED
    index.cp.niter = TRAIN_ITERATIONS
    index.train(x[np.sort(sample)])
    index.add(x)
    index.nprobe = min(NPROBE, nlist)
    return index


def describe(index) -> dict:
    return {"method": f"faiss IVF-Flat (approximate: {index.nlist} cells, {index.nprobe} probed per row)"}


def knn_block(plan: Plan, index, start: int, stop: int) -> Block:
    """Neighbours of rows [start, stop) found through ``index``; same selection as exact blocks."""
    x = np.ascontiguousarray(plan.rows[start:stop], dtype=np.float32)
    parts = []
    if plan.cap:
        sims, cols = index.search(x, plan.cap + 1)
        rows = np.repeat(np.arange(start, stop), cols.shape[1])
        parts.append((rows, cols.ravel(), sims.ravel()))
    radius = plan.keep_above if plan.cap else plan.threshold
    lims, sims, cols = index.range_search(x, float(radius - plan.tolerance))
    parts.append((np.repeat(np.arange(start, stop), np.diff(lims.astype(np.int64))), cols, sims))
    rows = np.concatenate([p[0] for p in parts]).astype(np.int64)
    cols = np.concatenate([p[1] for p in parts]).astype(np.int64)
    sims = np.concatenate([p[2] for p in parts]).astype(np.float64)
    keep = (cols >= 0) & (cols != rows)
    rows, cols, sims = rows[keep], cols[keep], sims[keep]
    key, first = np.unique(rows * plan.n + cols, return_index=True)
    return select(plan, start, stop, rows[first], cols[first], sims[first])
