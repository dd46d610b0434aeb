"""Where each hypothesis sits on the cluster map: a 2-D layout of the embeddings.

In: the rows, the graph's edges and each node's cluster. Out: the drawn points (all of them up to
``MAP_MAX``, else a seeded sample taken cluster by cluster so every cluster keeps its share and at
least one point) and their (x, y) in [-1, 1].

The layout is a force-directed graph layout (igraph's Fruchterman-Reingold, weighted by
similarity) started from the rows' two main directions (a truncated SVD), so linked hypotheses
gather and points without edges keep the place their words give them; with no edges, the SVD
alone. Seeded: the same input draws the same map.
"""

from __future__ import annotations

import random

import numpy as np

MAP_MAX = 3000
SEED = 0
# The start and the weights of the force-directed layout, rounded: the layout iterates a chaotic
# map, so a difference in the last bit of the SVD (the BLAS kernels a processor gets, the threads
# it runs) would move points across the whole map; rounded, every machine starts from the same
# numbers and, igraph's layout being plain C arithmetic, draws the same map.
START_DECIMALS = 6
WEIGHT_DECIMALS = 6
STEPS = 150_000  # points x iterations of the force-directed layout: about 0.7 s whatever the size


def iterations(n: int) -> int:
    """Fruchterman-Reingold iterations for ``n`` points: 300 up to 500 points, then fewer so the
    work stays ``STEPS`` (50 at 3,000: started from the SVD, the clusters have gathered by then)."""
    return max(50, min(300, STEPS // max(n, 1)))


def sample_points(ids: list[str], membership: dict[str, str], limit: int = MAP_MAX, seed: int = SEED) -> np.ndarray:
    """Row indices to draw, ascending: every row up to ``limit``, else about ``limit`` of them,
    each cluster's share of its members (at least one), drawn with a seeded generator."""
    n = len(ids)
    if n <= limit:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    groups: dict[str, list[int]] = {}
    for i, node in enumerate(ids):
        groups.setdefault(membership.get(node, ""), []).append(i)
    picked = []
    for key in sorted(groups):
        rows = np.asarray(groups[key])
        take = max(1, round(rows.size * limit / n))
        picked.append(rows if take >= rows.size else rng.choice(rows, size=take, replace=False))
    return np.sort(np.concatenate(picked))


def initial_positions(rows) -> np.ndarray:
    """The rows' coordinates on their two main directions (a truncated SVD, seeded), scaled to [-1, 1]
    and rounded to ``START_DECIMALS`` (see there)."""
    n = rows.shape[0]
    if n < 3 or min(rows.shape) < 3:
        xy = _scaled(np.column_stack([np.cos(np.arange(n) * 2.4), np.sin(np.arange(n) * 2.4)]))
    else:
        xy = _scaled(_spread(_two_directions(rows)))
    return np.round(xy, START_DECIMALS) + 0.0  # + 0.0: no -0.0


def _two_directions(rows) -> np.ndarray:
    """U·Σ of the rows' two leading singular directions (no centring, as ``TruncatedSVD``), by
    scipy's ARPACK with a seeded start (scipy is loaded already; scikit-learn would cost 1.4 s to
    import); the sign of each direction fixed so its largest entry is positive."""
    from scipy.sparse.linalg import svds

    u, s, _ = svds(rows.astype(np.float64), k=2, random_state=SEED, solver="arpack")
    u = (u * s)[:, ::-1]  # ARPACK returns the singular values in ascending order
    sign = np.sign(u[np.argmax(np.abs(u), axis=0), np.arange(2)])
    return u * np.where(sign == 0, 1.0, sign)


def _spread(xy: np.ndarray) -> np.ndarray:
    """Identical rows sit on one spot: nudge each point by a small seeded offset so all are seen."""
    rng = np.random.default_rng(SEED)
    scale = max(float(np.ptp(xy)) if xy.size else 0.0, 1e-9) * 0.01
    return xy + rng.normal(0.0, scale, size=xy.shape)


def _scaled(xy: np.ndarray) -> np.ndarray:
    if xy.size == 0:
        return xy.reshape(0, 2)
    centred = xy - xy.mean(axis=0)
    span = float(np.abs(centred).max())
    return centred / span if span > 0 else centred


def layout(rows, src: np.ndarray, dst: np.ndarray, sim: np.ndarray) -> np.ndarray:
    """(x, y) of each of ``rows`` (the drawn points' embedding rows); ``src``/``dst`` index into
    them, one edge each, with similarity ``sim``."""
    import igraph

    start = initial_positions(rows)
    n = start.shape[0]
    if src.size == 0 or n < 3:
        return start
    g = igraph.Graph(n=n, edges=zip(src.tolist(), dst.tolist(), strict=True))
    # igraph draws from Python's random module API; a private seeded generator makes the map repeatable.
    igraph.set_random_number_generator(random.Random(SEED))
    try:
        coords = g.layout_fruchterman_reingold(
            weights=np.round(sim, WEIGHT_DECIMALS).tolist(), seed=start.tolist(), niter=iterations(n), grid="auto"
        )
    finally:
        igraph.set_random_number_generator(random)
    return _scaled(np.asarray(coords.coords, dtype=np.float64))


def induced_edges(picked: np.ndarray, n: int, src: np.ndarray, dst: np.ndarray, sim: np.ndarray):
    """The edges among the ``picked`` rows (of ``n``), re-indexed into ``picked``."""
    where = np.full(n, -1, dtype=np.int64)
    where[picked] = np.arange(picked.size)
    a, b = where[src], where[dst]
    keep = (a >= 0) & (b >= 0)
    return a[keep], b[keep], sim[keep]
