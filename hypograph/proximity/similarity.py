"""Cosine similarity edges, computed by independent row blocks and merged.

The API is four pure functions, so the rows of one graph can be split across processes or machines
and the result is the same however they are split:

* ``plan_similarity(matrix, threshold, cap, keep_above)`` -> ``Plan``: everything a block needs
  (normalised rows, the sparse split). Deterministic, O(nnz): every shard builds the same plan.
* ``row_blocks(plan)`` -> ``[(start, stop), ...]``: block bounds of about equal work. Bounds are
  positions in ``plan.order`` (TF-IDF rows are visited in a work-saving order), not row numbers.
* ``block_edges(plan, start, stop)`` -> ``Block``: the edges found from positions [start, stop),
  as (row, col, cosine) in row numbers. With ``plan.upper`` each pair is found once, by the block
  of its earlier position, and the cap is left to the merge; otherwise a block finds every
  neighbour of its rows and caps them itself (memory bounded by the cap).
* ``merge_blocks(plan, blocks)`` -> ``(src, dst, sim, capped)``: undirected edges src < dst, sorted;
  each node keeps at most ``cap`` strongest (at 1e-6; ties: lower row), an edge stays when either endpoint
  keeps it, and pairs at or above ``keep_above`` stay whatever the cap. Blocks may come in any
  order but must cover [0, n) exactly once.

Sparse (TF-IDF) rows: exact, see ``sparse_pairs.py``; values within float error of the threshold or
of a 6-decimal rounding boundary are recomputed in the seed's order, so they fall on the seed's side.
Dense rows: exact BLAS row blocks (``knn.py`` is the approximate index ``graph.py`` uses for large
inputs). Thresholds <= 0 mean every pair (the seed's complete graph), also pairs sharing no term.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hypograph.proximity import sparse_pairs

# Float error of float32 rows: a pair whose true cosine equals the threshold may compute as t - 1e-7.
# Candidates this close to the threshold are recomputed in float64 and compared exactly, as the
# seed's float64 ``cosine_similarity`` compares them; float64 rows (TF-IDF) are compared exactly.
FLOAT32_TOLERANCE = 1e-6
# Upper bound on candidate entries held by one row block's product.
BLOCK_BUDGET = 4_000_000


@dataclass
class Plan:
    """The shared input of every row block of one graph."""

    n: int
    threshold: float
    cap: int  # at most this many strongest neighbours per node; 0: no cap
    keep_above: float  # neighbours at or above are kept whatever the cap
    tolerance: float
    rows: sp.csr_matrix | np.ndarray  # L2-normalised: float64 (sparse) or float32/float64 (dense)
    upper: bool = True
    split: sparse_pairs.SparseSplit | None = None

    @property
    def sparse(self) -> bool:
        return sp.issparse(self.rows)

    @property
    def every_pair(self) -> bool:
        return self.threshold <= 0

    @property
    def order(self) -> np.ndarray:
        """Row number at each position."""
        return self.split.order if self.split is not None else np.arange(self.n)

    def describe(self) -> dict:
        """How the edges were found, for metadata."""
        method = (
            "every pair (dense blocks)"
            if self.every_pair
            else f"exact sparse product ({self.split.terms} frequent terms bounded)"
            if self.split is not None
            else "exact dense product (BLAS)"
        )
        return {"method": method}


@dataclass
class Block:
    """Edges found from positions [start, stop): ``rows[k]`` - ``cols[k]`` at ``sims[k]`` (row numbers).
    ``capped``: rows that had more neighbours than the cap (full-row blocks only)."""

    start: int
    stop: int
    rows: np.ndarray
    cols: np.ndarray
    sims: np.ndarray
    capped: int = 0


def normalise_rows(matrix) -> tuple[sp.csr_matrix | np.ndarray, int]:
    """L2-normalised copy of ``matrix`` (zero rows stay zero) and how many rows were not unit length.

    Sparse rows: float64 CSR, each row's squares added in stored order and its entries divided by
    the root, as scikit-learn's ``normalize`` (and so the seed's ``cosine_similarity``) does, then
    sorted. Dense rows keep float32 (sentence embeddings) or become float64.
    """
    if sp.issparse(matrix):
        m = sp.csr_matrix(matrix, dtype=np.float64, copy=True)
        norms = np.sqrt(_squares_in_stored_order(m))
        off = int(np.count_nonzero((norms > 0) & (np.abs(norms - 1.0) > 1e-6)))
        scale = np.repeat(np.where(norms > 0, norms, 1.0), np.diff(m.indptr))
        m.data /= scale
        m.sum_duplicates()  # also sorts the indices
        return m, off
    dense = np.asarray(matrix)
    dense = dense.astype(np.float32 if dense.dtype == np.float32 else np.float64, copy=True)
    norms = np.linalg.norm(dense, axis=1)
    off = int(np.count_nonzero((norms > 0) & (np.abs(norms - 1.0) > 1e-5)))
    dense /= np.where(norms > 0, norms, 1.0)[:, None]
    return dense, off


def _squares_in_stored_order(m: sp.csr_matrix) -> np.ndarray:
    """Each row's sum of squared entries, added one entry at a time from 0.0 in stored order (as
    scikit-learn's ``inplace_csr_row_normalize_l2`` adds them, so the quotients are its bits; numpy's
    own sums add pairwise). Rows go longest first, so step k adds the k-th entry of a shrinking
    prefix: O(nnz) in all, and ``prox graph`` need not import scikit-learn, which costs it more."""
    lengths = np.diff(m.indptr)
    order = np.argsort(-lengths, kind="stable")
    starts, lengths = m.indptr[:-1][order], lengths[order]
    squares = m.data * m.data
    sums = np.zeros(lengths.size)
    longer = np.searchsorted(-lengths, -np.arange(lengths[0] if lengths.size else 0), side="left")
    for k, count in enumerate(longer.tolist()):  # the first ``count`` rows have a k-th entry
        sums[:count] += squares[starts[:count] + k]
    out = np.empty_like(sums)
    out[order] = sums
    return out


def plan_similarity(
    matrix, threshold: float, cap: int = 0, keep_above: float = 1.0, normalised: bool = False, upper: bool = True
) -> Plan:
    """The plan for the graph of ``matrix``'s rows at ``threshold`` (see the module docstring).

    ``normalised``: the rows are already L2-normalised (as ``normalise_rows`` returns them).
    ``upper``: each pair computed once and the cap applied when merging (the uncapped edges must
    fit in memory); False: blocks compute full rows and cap them.
    """
    rows = matrix if normalised else normalise_rows(matrix)[0]
    tolerance = FLOAT32_TOLERANCE if rows.dtype == np.float32 else 0.0
    plan = Plan(int(rows.shape[0]), float(threshold), int(cap), float(keep_above), tolerance, rows, upper or not cap)
    if plan.sparse and not plan.every_pair and plan.n:
        plan.split = sparse_pairs.split_rows(rows, plan.threshold)
    return plan


def row_blocks(plan: Plan, budget: int | None = None) -> list[tuple[int, int]]:
    """Position ranges [a, b) whose products each hold about ``budget`` (default ``BLOCK_BUDGET``)
    candidate entries."""
    n = plan.n
    budget = budget or BLOCK_BUDGET
    if n == 0:
        return []
    cost = position_costs(plan)
    bounds = np.searchsorted(np.cumsum(cost), np.arange(budget, cost.sum() + budget, budget)) + 1
    out, a = [], 0
    for b in np.unique(np.minimum(bounds, n)).tolist():
        if b > a:
            out.append((a, b))
            a = b
    if a < n:
        out.append((a, n))
    return out


def position_costs(plan: Plan) -> np.ndarray:
    """The candidate entries the product computes for each position (its share of the work)."""
    n = plan.n
    if plan.split is not None:
        return sparse_pairs.row_costs(plan.split, plan.upper)
    return np.full(n, float(n)) * ((n - np.arange(n)) / n if plan.upper else 1.0) + 1


def join_blocks(blocks: list[Block], start: int, stop: int) -> Block:
    """One block for positions [start, stop) from blocks that cover them."""
    if not blocks:
        empty = np.empty(0, np.int32)
        return Block(start, stop, empty, empty, np.empty(0, np.float64))
    return Block(
        start,
        stop,
        np.concatenate([b.rows for b in blocks]),
        np.concatenate([b.cols for b in blocks]),
        np.concatenate([b.sims for b in blocks]),
        sum(b.capped for b in blocks),
    )


def block_edges(plan: Plan, start: int, stop: int) -> Block:
    """The edges found from positions [start, stop) (see the module docstring). Pure."""
    if plan.split is not None:
        rows, cols, sims = sparse_pairs.candidates(plan.split, plan.threshold, start, stop, plan.upper)
        order = plan.split.order
        rows, cols = order[rows], order[cols]
    else:
        rows, cols, sims = _dense_candidates(plan, start, stop)
    return select(plan, start, stop, rows, cols, sims)


def _dense_candidates(plan: Plan, start: int, stop: int):
    x = plan.rows
    first = start if plan.upper else 0  # upper: columns from ``start`` on
    block = x[start:stop] @ x[first:].T
    block = block.toarray() if sp.issparse(block) else np.asarray(block)
    r, c = np.nonzero(block >= plan.threshold - plan.tolerance)
    rows, cols = (r + start).astype(np.int64), (c + first).astype(np.int64)
    keep = cols > rows if plan.upper else cols != rows  # never one's own neighbour
    return rows[keep], cols[keep], block[r[keep], c[keep]].astype(np.float64)


def select(plan: Plan, start: int, stop: int, rows, cols, sims) -> Block:
    """Threshold the candidates, an edge when cos >= threshold in float64 (knife-edge sparse values
    recomputed in the seed's order, float32 ones in float64); full-row blocks also apply the cap."""
    if plan.split is not None and sims.size:
        scaled = sims * 1e6
        edge = (np.abs(sims - plan.threshold) <= 1e-12) | (np.abs(np.abs(scaled - np.trunc(scaled)) - 0.5) < 1e-7)
        for k in np.flatnonzero(edge).tolist():
            sims[k] = sparse_pairs.seed_cosine(plan.rows, int(rows[k]), int(cols[k]))
    elif plan.tolerance and sims.size:
        near = np.flatnonzero(np.abs(sims - plan.threshold) <= plan.tolerance)
        sims[near] = float64_cosines(plan.rows, rows[near], cols[near])
    keep = sims >= plan.threshold
    rows, cols, sims = rows[keep], cols[keep], sims[keep]
    capped = 0
    if plan.cap and not plan.upper and rows.size:
        keep, capped = _cap(_rule(plan), rows, cols, sims)
        rows, cols, sims = rows[keep], cols[keep], sims[keep]
    return Block(start, stop, rows.astype(np.int32), cols.astype(np.int32), sims.astype(np.float64), capped)


def float64_cosines(x: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """cos(x[rows[k]], x[cols[k]]) computed in float64 from the stored (float32) rows."""
    a, b = x[rows].astype(np.float64), x[cols].astype(np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.einsum("ij,ij->i", a, b) / np.where(norms > 0, norms, 1.0)


@dataclass(frozen=True)
class CapRule:
    """What the cap needs of a plan: ``n`` rows, ``cap`` neighbours each, every entry at or above
    ``keep_above`` kept, ``tolerance`` the rows' float error."""

    n: int
    cap: int
    keep_above: float
    tolerance: float


def _rule(plan: Plan) -> CapRule:
    return CapRule(plan.n, plan.cap, plan.keep_above, plan.tolerance)


def _cap(rule: CapRule, rows, cols, sims) -> tuple[np.ndarray, int]:
    """Which directed entries (row, col, sim) survive the cap: each row's ``cap`` strongest (at the
    6 decimals a similarity is written with; ties: lower column; no (row, col) twice) and any at
    or above ``keep_above``; and how many rows had more than ``cap``."""
    counts = np.bincount(rows, minlength=rule.n)
    over = counts[rows] > rule.cap
    keep = np.ones(rows.size, dtype=bool)
    if over.any():  # rank only the entries of rows that have too many
        idx = np.flatnonzero(over)
        r, c, s = rows[idx], cols[idx], sims[idx]
        key = ranking_key(r, c, s, rule.n)
        if key is not None:
            # Keys are distinct and row-major: a row's ``cap`` strongest are its keys up to its
            # cap-th smallest, read from one sort of the values (no permutation to build).
            ordered = np.sort(key)
            per_row = np.bincount(r, minlength=rule.n)
            last = np.cumsum(per_row) - per_row + rule.cap - 1
            bound = ordered[np.minimum(last, ordered.size - 1)]
            strong = key <= bound[r]
        else:
            order = strongest_first(r, c, s, rule.n)
            sorted_rows = r[order]
            starts = np.flatnonzero(np.concatenate([[True], sorted_rows[1:] != sorted_rows[:-1]]))
            rank = np.empty(idx.size, dtype=np.int64)
            rank[order] = np.arange(idx.size) - np.repeat(starts, np.diff(np.append(starts, idx.size)))
            strong = rank < rule.cap
        keep[idx] = strong | (s >= rule.keep_above - rule.tolerance)
    return keep, int(np.count_nonzero(counts > rule.cap))


def ranking_key(rows, tiebreak, sims, n: int) -> np.ndarray | None:
    """One int64 per entry ordering them by row, then similarity descending at 1e-6 (the resolution
    a similarity is written with), then ``tiebreak`` (ints below ``n``); None above 2M rows, where
    the three fields do not fit in 63 bits."""
    weakness = np.rint((1.0 - np.asarray(sims)) * 1e6).astype(np.int64)  # 0 .. 2e6 for cosines: 21 bits
    bits = max(1, (n - 1).bit_length())
    if 2 * bits + 21 > 63:
        return None
    return (np.asarray(rows, dtype=np.int64) << (bits + 21)) | (weakness << bits) | np.asarray(tiebreak, dtype=np.int64)


def strongest_first(rows, tiebreak, sims, n: int) -> np.ndarray:
    """The order of entries by ``ranking_key``: one stable sort of the packed key (4x faster than a
    three-key lexsort at 10M entries), the lexsort above 2M rows."""
    key = ranking_key(rows, tiebreak, sims, n)
    if key is None:
        weakness = np.rint((1.0 - np.asarray(sims)) * 1e6).astype(np.int64)
        return np.lexsort((tiebreak, weakness, rows))
    return np.argsort(key, kind="stable")


def merge_blocks(plan: Plan, blocks: list[Block]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Undirected edges (src < dst, sorted) with their cosines, and how many nodes the cap trimmed."""
    covered = sorted((b.start, b.stop) for b in blocks)
    if [a for a, _ in covered] != [0, *[b for _, b in covered[:-1]]] or (covered and covered[-1][1] != plan.n):
        raise ValueError(f"row blocks {covered} do not cover positions 0..{plan.n} exactly once")
    if not blocks:
        return np.empty(0, np.int32), np.empty(0, np.int32), np.empty(0, np.float64), 0
    blocks = sorted(blocks, key=lambda b: b.start)
    rows = np.concatenate([b.rows for b in blocks]).astype(np.int64)
    cols = np.concatenate([b.cols for b in blocks]).astype(np.int64)
    sims = np.concatenate([b.sims for b in blocks])
    capped = sum(b.capped for b in blocks)
    lo, hi = np.minimum(rows, cols), np.maximum(rows, cols)
    if plan.upper:
        if plan.cap and rows.size:  # each edge seen from both endpoints, kept if either keeps it
            keep, capped = _cap(
                _rule(plan), np.concatenate([lo, hi]), np.concatenate([hi, lo]), np.concatenate([sims, sims])
            )
            keep = keep[: lo.size] | keep[lo.size :]
            lo, hi, sims = lo[keep], hi[keep], sims[keep]
        order = np.lexsort((hi, lo))
        return lo[order].astype(np.int32), hi[order].astype(np.int32), sims[order], capped
    # Full rows: a pair may come from both endpoints' blocks; keep the lower row's value.
    key = lo * max(plan.n, 1) + hi
    order = np.lexsort((rows != lo, key))
    key = key[order]
    first = order[np.concatenate([[True], key[1:] != key[:-1]])]
    return lo[first].astype(np.int32), hi[first].astype(np.int32), sims[first], capped
