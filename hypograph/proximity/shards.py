"""Where the row blocks of one similarity graph are computed: this machine's cores, or shards.

A shard is a range of positions (see ``similarity.py``) that any process or machine can compute
from the plan alone; ``graph.assemble_graph`` merges the shards' blocks into the same graph
whatever the split.

* ``shard_ranges(plan, count)`` -> ``[(start, stop), ...]``: about ``count`` ranges of equal work.
* ``range_edges(plan, start, stop, workers)`` -> ``(Block, info)``: the edges found from one range,
  in ``workers`` forked processes when it pays; dense rows above ``knn.EXACT_MAX`` through a faiss
  index (built by each shard from the same seeded sample); ``info`` says how, for metadata.
"""

from __future__ import annotations

import math

import numpy as np

from hypograph.proximity import similarity as sim_
from hypograph.proximity.forks import fork_map, freed_memory_kept

PARALLEL_MIN_ROWS = 4_000  # below this, worker processes cost more than they save
KNN_STEP = 4096  # rows per faiss search


def shard_ranges(plan: sim_.Plan, count: int) -> list[tuple[int, int]]:
    """About ``count`` position ranges of equal work covering [0, n) (fewer when rows are few)."""
    if plan.n == 0:
        return [(0, 0)]
    if count <= 1:
        return [(0, plan.n)]
    if uses_knn(plan):  # every row costs the same search
        bounds = np.unique(np.linspace(0, plan.n, count + 1).round().astype(int)).tolist()
        return list(zip(bounds[:-1], bounds[1:], strict=True))
    budget = math.ceil(float(sim_.position_costs(plan).sum()) / count)
    return sim_.row_blocks(plan, budget)


def range_edges(plan: sim_.Plan, start: int, stop: int, workers: int = 1) -> tuple[sim_.Block, dict]:
    """The edges found from positions [start, stop) as one block, and how they were found."""
    with freed_memory_kept():
        return _range_edges(plan, start, stop, max(1, workers))


def _range_edges(plan: sim_.Plan, start: int, stop: int, workers: int) -> tuple[sim_.Block, dict]:
    if uses_knn(plan):
        from hypograph.proximity import knn

        index = knn.build_index(plan, workers)
        blocks = [knn.knn_block(plan, index, a, min(stop, a + KNN_STEP)) for a in range(start, stop, KNN_STEP)]
        return sim_.join_blocks(blocks, start, stop), {**plan.describe(), **knn.describe(index)}
    ranges = [(max(a, start), min(b, stop)) for a, b in sim_.row_blocks(plan) if a < stop and b > start]
    if workers > 1 and stop - start >= PARALLEL_MIN_ROWS and len(ranges) > 1:
        blocks = _in_processes(plan, ranges, workers)
    else:
        from hypograph.progress import stage

        with stage("graph blocks", total=len(ranges), unit="blocks") as s:
            blocks = []
            for a, b in ranges:
                blocks.append(sim_.block_edges(plan, a, b))
                s.advance()
    return sim_.join_blocks(blocks, start, stop), plan.describe()


def uses_knn(plan: sim_.Plan) -> bool:
    """Dense rows above ``knn.EXACT_MAX``: an approximate index rather than the exact product (when
    faiss, from the ``semantic`` extra, is installed; else the exact product, slower)."""
    from hypograph.proximity import knn

    if plan.sparse or plan.every_pair or plan.n <= knn.EXACT_MAX:
        return False
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def _blocks_of(task: tuple[sim_.Plan, list[tuple[int, int]]]) -> list[sim_.Block]:
    """The blocks of one worker's ranges (its plan and ranges come as the argument)."""
    plan, ranges = task
    return [sim_.block_edges(plan, a, b) for a, b in ranges]


def _in_processes(plan: sim_.Plan, ranges: list[tuple[int, int]], workers: int) -> list[sim_.Block]:
    """The blocks of ``ranges`` over ``workers`` processes: one task per worker (ranges dealt in
    turn, each of about equal work), so the plan is sent to each worker once."""
    dealt = [ranges[w::workers] for w in range(workers)]
    blocks = [b for part in fork_map(_blocks_of, [(plan, d) for d in dealt if d], workers) for b in part]
    return sorted(blocks, key=lambda b: b.start)
