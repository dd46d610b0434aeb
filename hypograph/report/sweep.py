"""How the similarities are spread, and what each threshold would give: the numbers behind the
similarity histogram and the threshold sweep.

In: the embeddings' rows and the similarity graph proximity built. Out: a ``Sweep``: for each
threshold t of ``THRESHOLDS`` (0.10 to 0.90 by 0.05) the graph's edges at t, its clusters of two or
more hypotheses and the hypotheses left alone, and the pairs at or above t (the duplicate pairs a
dupe threshold of t would list); and a histogram of every pair's similarity.

Where the numbers come from (never an N x N matrix):

* t at or above the graph's threshold: the graph's own edges with similarity >= t. With a
  neighbour cap K this is exactly the graph a build at t would give (a node's K strongest at t are
  its K strongest overall that reach t).
* t below it, up to ``EXACT_MAX`` hypotheses: the graph rebuilt once at the lowest threshold by the
  same row-block machinery and cap (``similarity_graph``), then filtered the same way.
* The histogram and the pair counts: every pair, in row blocks, up to ``EXACT_MAX``; above, the
  similarities of ``SAMPLE_ROWS`` seeded sample rows to every row, scaled to all pairs (estimated,
  and said so); the pair counts at or above the graph's exact level still come from its edges.
  Below the graph's threshold above ``EXACT_MAX``, edges and clusters are not computed (None).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from hypograph.errors import HypographError
from hypograph.proximity.communities import SEED
from hypograph.proximity.defaults import DEFAULT_DUPE_THRESHOLD
from hypograph.proximity.graph import DIGITS, SimilarityGraph

THRESHOLDS = tuple(round(0.10 + 0.05 * k, 2) for k in range(17))
EXACT_MAX = 2000  # all pairs (2M similarities) in row blocks at most; sampled above (the report stays seconds)
SAMPLE_ROWS = 200
BLOCK = 256  # rows per block of similarities
BINS = np.round(np.linspace(-1.0, 1.0, 201), 2)  # histogram bins 0.01 wide


@dataclass
class Sweep:
    """Per threshold (``thresholds[k]``): ``edges[k]``, ``clusters[k]`` (2 or more members),
    ``alone[k]`` (hypotheses in no edge) — None where not computed — and ``pairs[k]`` (pairs >= t;
    estimated when ``exact`` is False). ``counts[b]``: pairs with similarity in [BINS[b], BINS[b+1]).
    ``best``: the most similar pair (a, b, similarity), None with fewer than two hypotheses."""

    thresholds: list[float]
    edges: list[int | None]
    clusters: list[int | None]
    alone: list[int | None]
    pairs: list[float]
    counts: np.ndarray
    exact: bool
    total_pairs: int
    best: tuple[str, str, float] | None
    notes: list[str] = field(default_factory=list)
    at_threshold: int = 0  # the graph's edges, at its own threshold

    def rows(self) -> list[dict]:
        """One dict per threshold (for tables and JSON); ``all_clusters``: those of 2 or more and
        those of one hypothesis (alone), as ``clusters.json`` and the command count them."""
        return [
            {
                "threshold": t,
                "edges": e,
                "all_clusters": None if c is None else c + a,
                "clusters": c,
                "alone": a,
                "pairs": round(p, 1) if not self.exact else int(p),
            }
            for t, e, c, a, p in zip(self.thresholds, self.edges, self.clusters, self.alone, self.pairs, strict=True)
        ]


def threshold_sweep(
    graph: SimilarityGraph,
    matrix,
    algorithm: str = "louvain",
    dupe_threshold: float = DEFAULT_DUPE_THRESHOLD,
    found=None,
) -> Sweep:
    """The sweep of ``graph`` (built from the rows of ``matrix``, L2-normalised, in ``graph.ids``
    order); ``algorithm`` clusters as proximity does; ``dupe_threshold``: the level the graph keeps
    every pair at whatever its cap (the rebuild below the threshold keeps the same). ``found``:
    proximity's own (``clusters.json``), counted at the graph's threshold instead of clustering
    again, so that row is the clustering the command reported."""
    n = len(graph.ids)
    if matrix.shape[0] != n:
        raise HypographError(f"{matrix.shape[0]} embedding rows for the graph's {n} nodes")
    exact = n <= EXACT_MAX
    counts, at_least, best = _all_pairs(matrix) if exact else _sampled_pairs(matrix)
    total = n * (n - 1) // 2
    pairs = [float(x) for x in at_least]
    for k, t in enumerate(THRESHOLDS):  # the graph holds every pair from its exact level up: count them there
        if t >= graph.exact_above:
            pairs[k] = float(np.count_nonzero(graph.sim >= t))
    low, notes = _low_graph(graph, matrix, dupe_threshold) if exact else (None, [])
    if not exact:
        notes.append(
            f"{n} hypotheses: the histogram and the pairs below {graph.exact_above:g} are estimated from "
            f"{SAMPLE_ROWS} sample rows; edges and clusters below the graph's threshold {graph.threshold:g} "
            "not computed"
        )
    edges, clusters, alone = _levels(graph, low, algorithm, found)
    if best is None and graph.num_edges:
        k = int(np.argmax(graph.sim))
        best = (int(graph.src[k]), int(graph.dst[k]), float(graph.sim[k]))
    named = (graph.ids[best[0]], graph.ids[best[1]], best[2]) if best else None
    return Sweep(list(THRESHOLDS), edges, clusters, alone, pairs, counts, exact, total, named, notes, graph.num_edges)


def _levels(graph: SimilarityGraph, low, algorithm: str, found) -> tuple[list, list, list]:
    """Edges, clusters (of two or more) and singletons at each of ``THRESHOLDS``: from ``graph`` at
    and above its threshold, from ``low`` below it (None: not computed); at the graph's own
    threshold, ``found`` (proximity's clusters) when given, so that row is what the command said."""
    edges, clusters, alone = [], [], []
    built: dict[int, object] = {}  # each graph handed to igraph once, cut at every threshold
    for t in THRESHOLDS:
        source = graph if t >= graph.threshold else low
        e, c, a = _graph_at(source, t, algorithm, built) if source is not None else (None, None, None)
        if found is not None and abs(t - graph.threshold) < 1e-9:
            sizes = [len(m) for m in found.clusters.values()]
            c, a = sum(s >= 2 for s in sizes), sum(s == 1 for s in sizes)
        edges.append(e)
        clusters.append(c)
        alone.append(a)
    return edges, clusters, alone


def _graph_at(graph: SimilarityGraph, t: float, algorithm: str, built: dict | None = None) -> tuple[int, int, int]:
    """Edges, clusters of 2 or more, and nodes in no edge, of ``graph`` cut at ``t``: the clusters
    proximity would find (``find_communities``'s algorithm and seed, split along components),
    counted without labelling them. ``built``: igraph graphs already made (by ``id(graph)``), so each
    is converted once and cut (its edges kept in order) at every threshold."""
    import igraph

    keep = np.flatnonzero(graph.sim >= t)
    n = len(graph.ids)
    if keep.size == 0:
        return 0, 0, n
    built = {} if built is None else built
    whole = built.get(id(graph))
    if whole is None:
        whole = built[id(graph)] = igraph.Graph(n=n, edges=np.column_stack([graph.src, graph.dst]).tolist())
        whole.es["weight"] = graph.sim.tolist()  # carried into every cut: converted once
    g = whole if keep.size == graph.num_edges else whole.subgraph_edges(keep.tolist(), delete_vertices=False)
    component = np.asarray(g.connected_components().membership, dtype=np.int64)
    community = component
    if algorithm == "louvain":
        igraph.set_random_number_generator(random.Random(SEED))
        try:
            community = np.asarray(g.community_multilevel(weights="weight").membership, np.int64)
        finally:
            igraph.set_random_number_generator(random)
    _, sizes = np.unique(community * (component.max() + 1) + component, return_counts=True)
    return int(keep.size), int(np.count_nonzero(sizes >= 2)), int(np.count_nonzero(sizes == 1))


def _low_graph(graph: SimilarityGraph, matrix, dupe_threshold: float) -> tuple[SimilarityGraph | None, list[str]]:
    """The graph rebuilt at the lowest threshold with the same cap (None when it is not needed or
    would not fit: a note says which)."""
    from hypograph.proximity.graph import similarity_graph

    if graph.threshold <= THRESHOLDS[0] or len(graph.ids) < 2:
        return None, []
    cap = int(graph.info.get("max_neighbours", 0) or 0)
    try:
        return similarity_graph(graph.ids, matrix, THRESHOLDS[0], cap, dupe_threshold), []
    except HypographError as e:
        return None, [f"edges below the threshold not computed: {e}"]


def _bin_counts(values: np.ndarray) -> np.ndarray:
    """How many of ``values`` fall in each histogram bin (1.0 in the last)."""
    k = np.clip(np.floor((values + 1.0) * 100.0 + 1e-9).astype(np.int64), 0, BINS.size - 2)
    return np.bincount(k, minlength=BINS.size - 1)


def _at_least(values: np.ndarray) -> np.ndarray:
    """For each threshold, how many of ``values`` (rounded as graph.json writes them) reach it."""
    idx = np.searchsorted(np.asarray(THRESHOLDS), np.round(values, DIGITS), side="right")
    return np.cumsum(np.bincount(idx, minlength=len(THRESHOLDS) + 1)[::-1])[::-1][1:]


def _block_sims(matrix, rows: np.ndarray) -> np.ndarray:
    """Similarities of ``rows`` to every row, dense (rows x N)."""
    part = matrix[rows] @ matrix.T
    return np.asarray(part.toarray() if hasattr(part, "toarray") else part, dtype=np.float64)


def _all_pairs(matrix):
    """Histogram counts, pairs >= each threshold, and the best pair (i, j, s), over every pair i < j."""
    n = matrix.shape[0]
    counts = np.zeros(BINS.size - 1, dtype=np.int64)
    at_least = np.zeros(len(THRESHOLDS), dtype=np.int64)
    best = None
    for start in range(0, n, BLOCK):
        rows = np.arange(start, min(n, start + BLOCK))
        sims = _block_sims(matrix, rows)
        upper = np.arange(n)[None, :] > rows[:, None]
        values = sims[upper]
        if values.size == 0:
            continue
        counts += _bin_counts(values)
        at_least += _at_least(values)
        k = int(np.argmax(np.where(upper, sims, -np.inf)))
        i, j = divmod(k, n)
        if best is None or sims[i, j] > best[2]:
            best = (int(rows[i]), j, float(np.round(sims[i, j], DIGITS)))
    return counts, at_least, best


def _sampled_pairs(matrix, seed: int = 0):
    """As ``_all_pairs``, estimated from ``SAMPLE_ROWS`` seeded rows' similarities to every other row."""
    n = matrix.shape[0]
    sample = np.sort(np.random.default_rng(seed).choice(n, size=min(SAMPLE_ROWS, n), replace=False))
    counts = np.zeros(BINS.size - 1, dtype=np.int64)
    at_least = np.zeros(len(THRESHOLDS), dtype=np.int64)
    for start in range(0, sample.size, 50):
        rows = sample[start : start + 50]
        sims = _block_sims(matrix, rows)
        sims[np.arange(rows.size), rows] = np.nan  # a row's similarity to itself is no pair
        values = sims[~np.isnan(sims)]
        counts += _bin_counts(values)
        at_least += _at_least(values)
    scale = n / (2.0 * sample.size)  # each unordered pair is seen from either end
    return np.round(counts * scale).astype(np.int64), at_least * scale, None
