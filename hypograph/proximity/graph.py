"""The cosine similarity graph: pairs of hypotheses with similarity >= threshold.

An edge joins i and j when cos(i, j) >= threshold, compared unrounded in float64 like the seed's
``cosine_similarity`` (a pair at exactly the threshold is an edge). With a cap K
(``max_neighbours``) each node keeps at most K of its strongest edges; an edge stays when either
endpoint keeps it, and pairs at or above the dupe threshold (0.80) stay whatever K is, so
duplicate pairs are exact. K = 0 keeps every edge (the seed's graph: ``prox graph``'s default;
the Dagster assets cap at ``DEFAULT_MAX_NEIGHBOURS``). Similarities are stored rounded to 6
decimals, as the seed writes them.

The work is split into row blocks (``similarity.py``) run in parallel worker processes, or in
shards on other processes or machines (``shards.py``); dense rows above ``knn.EXACT_MAX`` use an
approximate faiss index (``knn.py``). Never an N x N matrix: a request whose graph would not fit
in memory is refused before any work, with the size it needs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hypograph import environment
from hypograph.errors import HypographError
from hypograph.proximity.defaults import DEFAULT_DUPE_THRESHOLD, DEFAULT_MAX_NEIGHBOURS, DEFAULT_THRESHOLD

if TYPE_CHECKING:
    from hypograph.proximity import similarity as sim_

# The building blocks (shards, similarity: scipy) are imported by the functions that build a graph,
# so the commands that only read one (clusters, dupes) start without them.

DIGITS = 6  # similarities are written rounded to 6 decimals, as the seed writes them
EPS = 1e-6  # float32 rows' error (sentence embeddings), for the checks that compare stored values
# Bytes held per directed neighbour entry while a graph is built and written (arrays + JSON text).
BYTES_PER_ENTRY = 120


@dataclass
class SimilarityGraph:
    """Undirected weighted graph on ``ids``; edge k joins ``src[k] < dst[k]`` with ``sim[k]``.

    ``info``: how the edges were found (method, max_neighbours, capped_rows, exact_above).
    """

    ids: list[str]
    threshold: float
    src: np.ndarray
    dst: np.ndarray
    sim: np.ndarray
    embedding: dict = field(default_factory=dict)  # {"backend", "model"} the rows came from
    info: dict = field(default_factory=dict)

    @property
    def num_edges(self) -> int:
        return int(self.src.size)

    def edges(self):
        """Yield (id_a, id_b, similarity) with a before b in row order."""
        ids = self.ids
        for i, j, s in zip(self.src.tolist(), self.dst.tolist(), self.sim.tolist(), strict=True):
            yield ids[i], ids[j], s

    @property
    def exact_above(self) -> float:
        """Every pair at or above this similarity is an edge (the threshold, unless the cap dropped some)."""
        return float(self.info.get("exact_above", self.threshold))


def check_threshold(threshold: float, what: str = "graph") -> float:
    if not isinstance(threshold, (int, float)) or not math.isfinite(threshold) or not -1.0 <= threshold <= 1.0:
        raise HypographError(f"{what} threshold must be in [-1, 1] (cosine similarity), got {threshold}")
    return float(threshold)


def similarity_graph(
    ids: list[str],
    matrix,
    threshold: float = DEFAULT_THRESHOLD,
    max_neighbours: int = DEFAULT_MAX_NEIGHBOURS,
    keep_above: float = DEFAULT_DUPE_THRESHOLD,
    *,
    workers: int | None = None,
) -> SimilarityGraph:
    """Build the graph of ``matrix``'s rows (any scale: rows are L2-normalised here, as the seed does).
    The caller sets ``graph.embedding`` (what the rows came from) when it records one.

    ``max_neighbours``: K, 0 for no cap (the seed's graph). ``keep_above``: pairs kept whatever K (the dupe threshold).
    ``workers``: processes for the row blocks (default: the CPUs available). Raises HypographError
    when the threshold is out of range or the graph would not fit in memory.
    """
    from hypograph.proximity import shards
    from hypograph.proximity.forks import available_cpus

    if len(ids) != matrix.shape[0]:
        raise HypographError(f"{len(ids)} ids for {matrix.shape[0]} rows")
    plan = plan_graph(matrix, threshold, max_neighbours, keep_above)
    block, info = shards.range_edges(plan, 0, plan.n, workers or available_cpus())
    return assemble_graph(ids, plan, [block], None, info, keep_above)


def plan_graph(
    matrix,
    threshold: float = DEFAULT_THRESHOLD,
    max_neighbours: int = DEFAULT_MAX_NEIGHBOURS,
    keep_above: float = DEFAULT_DUPE_THRESHOLD,
) -> sim_.Plan:
    """The plan every row block of the graph of ``matrix`` shares (deterministic: each shard of a
    sharded run builds the same one). Raises HypographError when the threshold or K is out of range
    or the graph would not fit in memory."""
    from hypograph.proximity import similarity as sim_

    threshold = check_threshold(threshold)
    if max_neighbours < 0:
        raise HypographError(f"max neighbours must be 0 (no cap) or more, got {max_neighbours}")
    # A pair the seed would write as >= keep_above (6 decimals) must not be capped away.
    plan = sim_.plan_similarity(matrix, threshold, max_neighbours, keep_above - 0.5 * 10**-DIGITS)
    plan.upper = fit_plan(plan)
    return plan


def assemble_graph(
    ids: list[str],
    plan: sim_.Plan,
    blocks: list[sim_.Block],
    embedding: dict | None = None,
    info: dict | None = None,
    keep_above: float = DEFAULT_DUPE_THRESHOLD,
) -> SimilarityGraph:
    """The graph from the row blocks of ``plan`` (computed anywhere, in any order): merged, capped,
    rounded to 6 decimals, with how it was built in ``info``."""
    from hypograph.proximity import similarity as sim_

    src, dst, sims, capped = sim_.merge_blocks(plan, blocks)
    info = {
        **(info or plan.describe()),
        "max_neighbours": plan.cap,
        "capped_rows": capped,
        "exact_above": max(plan.threshold, keep_above) if capped else plan.threshold,
    }
    return SimilarityGraph(list(ids), plan.threshold, src, dst, round_similarities(sims), dict(embedding or {}), info)


def round_similarities(sims: np.ndarray) -> np.ndarray:
    """``round(s, 6)`` for each value, exactly as Python rounds (numpy's rounding, then Python's
    own for the rare values that lie within float error of a half-way point)."""
    sims = np.asarray(sims, dtype=np.float64)
    scaled = sims * 10**DIGITS
    out = np.rint(scaled) / 10**DIGITS
    near_half = np.flatnonzero(np.abs(np.abs(scaled - np.trunc(scaled)) - 0.5) < 1e-6)
    for k in near_half.tolist():
        out[k] = round(float(sims[k]), DIGITS)
    return out


# -- memory --------------------------------------------------------------------------------------


def fit_plan(plan: sim_.Plan) -> bool:
    """Whether blocks may leave the cap to the merge (the uncapped graph fits in memory: half the
    work); else blocks cap their rows themselves. Refuses, in one line, a graph that fits neither way."""
    from hypograph.proximity import shards

    available = available_memory() or float("inf")
    uncapped = estimated_entries(plan)
    if shards.uses_knn(plan):
        return False
    if uncapped * BYTES_PER_ENTRY <= available / 2:
        return True
    capped = min(uncapped, float(plan.n) * plan.cap) if plan.cap else uncapped
    if plan.cap and capped * BYTES_PER_ENTRY <= available / 2:
        return False
    raise HypographError(
        f"a graph of {plan.n:,} nodes at threshold {plan.threshold:g}"
        f"{f' with at most {plan.cap} neighbours each' if plan.cap else ''} would hold about "
        f"{capped / 2:,.0f} edges and need ~{_gib(capped * BYTES_PER_ENTRY)} of memory (estimated from sampled "
        f"rows), more than half the {_gib(available)} available: raise the threshold or cap each node's "
        f"neighbours with --max-neighbours K"
    )


def estimated_entries(plan: sim_.Plan, sample_rows: int = 256) -> float:
    """Directed neighbour entries of the uncapped graph: exact for threshold <= 0, else extrapolated
    from the exact neighbours of a few sampled row ranges."""
    from hypograph.proximity import shards
    from hypograph.proximity import similarity as sim_

    n = plan.n
    if n < 2:
        return 0.0
    if plan.every_pair:
        return float(n) * (n - 1)
    if shards.uses_knn(plan):
        return float(n) * (plan.cap or n - 1)
    probe = dataclasses.replace(plan, cap=0, upper=False)
    per = max(1, sample_rows // 8)
    starts = np.unique(np.linspace(0, max(0, n - per), num=min(8, max(1, n // per)), dtype=np.int64))
    seen = rows = 0
    for a in starts.tolist():
        b = min(n, a + per)
        seen += sim_.block_edges(probe, a, b).rows.size
        rows += b - a
    return seen / max(rows, 1) * n


def available_memory() -> int:
    """Bytes a graph may use (0 if unknown): ``HYPOGRAPH_MEMORY_LIMIT`` (e.g. ``512M``, ``4G``) when
    set, else the smaller of the kernel's MemAvailable and the container's (cgroup v2) headroom."""
    limit = environment.current().memory_limit  # parsed and bounded there
    if limit:
        return limit
    found = [v for v in (_meminfo_available(), _cgroup_headroom()) if v]
    return min(found) if found else 0


def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _cgroup_headroom() -> int:
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
    except (OSError, ValueError):
        return 0
    return max(0, int(limit) - used) if limit.isdigit() else 0


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.0f} MiB"
