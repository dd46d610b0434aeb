"""Near-duplicate pairs: pairs at or above the dupe threshold (default 0.80).

Read off the graph's edges (similarities as written, 6 decimals, compared as the seed compares
them) when the graph holds every pair at that level: at or above its threshold if no node was
capped, at or above the dupe threshold it was built with otherwise. Below that, the pairs are
computed from the embeddings instead (``pairs_from_embeddings``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hypograph.errors import HypographError
from hypograph.ids import id_sort_key
from hypograph.proximity.defaults import DEFAULT_DUPE_THRESHOLD
from hypograph.proximity.graph import SimilarityGraph, check_threshold, similarity_graph


@dataclass(frozen=True)
class DuplicatePair:
    """One candidate duplicate; ``a`` sorts before ``b`` in id order; ``similarity`` in [0, 1].

    A dataclass, not a pydantic model, so ``prox dupes`` starts without pydantic (0.1 s of its
    0.3 s); ``store.read_dupes`` validates a dupes.json through pydantic all the same."""

    a: str
    b: str
    similarity: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.similarity <= 1.0:
            raise ValueError(f"similarity {self.similarity} of {self.a}/{self.b} is not in [0, 1]")


def covers(graph: SimilarityGraph, threshold: float) -> bool:
    """Whether every pair at or above ``threshold`` is an edge of ``graph``."""
    return threshold >= graph.exact_above


def duplicate_pairs(graph: SimilarityGraph, threshold: float = DEFAULT_DUPE_THRESHOLD) -> list[DuplicatePair]:
    """Pairs with similarity >= threshold, each once, sorted by descending similarity then ids.

    Raises HypographError when the graph does not hold every such pair (use
    ``pairs_from_embeddings``)."""
    threshold = check_dupe_threshold(threshold)
    if not covers(graph, threshold):
        raise HypographError(
            f"dupe threshold {threshold} is below {graph.exact_above}, the level above which the graph holds "
            f"every pair: compute the pairs from the embeddings, "
            f"or rebuild the graph with --threshold {threshold} or lower"
        )
    keep = np.flatnonzero(graph.sim >= threshold)
    return pairs_of(graph.ids, graph.src[keep], graph.dst[keep], graph.sim[keep])


def pairs_from_embeddings(ids: list[str], matrix, threshold: float) -> list[DuplicatePair]:
    """Every pair at or above ``threshold``, computed from the rows (no neighbour cap)."""
    threshold = check_dupe_threshold(threshold)
    graph = similarity_graph(ids, matrix, threshold, max_neighbours=0)
    return pairs_of(graph.ids, graph.src, graph.dst, graph.sim)


def check_dupe_threshold(threshold: float) -> float:
    threshold = check_threshold(threshold, "dupe")
    if threshold < 0:
        raise HypographError(f"dupe threshold must be in [0, 1], got {threshold}")
    return threshold


def pairs_of(ids: list[str], src, dst, sims) -> list[DuplicatePair]:
    """DuplicatePair records, a before b in id order, by descending similarity then ids."""
    rows = []
    for i, j, s in zip(src.tolist(), dst.tolist(), sims.tolist(), strict=True):
        a, b = ids[i], ids[j]
        if id_sort_key(b) < id_sort_key(a):
            a, b = b, a
        rows.append((-s, id_sort_key(a), id_sort_key(b), a, b, s))
    rows.sort()
    return [DuplicatePair(a, b, min(max(s, 0.0), 1.0)) for _, _, _, a, b, s in rows]


def pairs_at(graph: SimilarityGraph, embeddings, threshold: float) -> list[DuplicatePair]:
    """The duplicate pairs at ``threshold``: from the graph when it holds every such pair, else from
    the embeddings (a threshold below the graph's, or pairs the neighbour cap dropped).
    ``embeddings()`` returns them, called only then. Raises HypographError when they list other
    hypotheses than the graph."""
    if covers(graph, threshold):
        return duplicate_pairs(graph, threshold)
    emb = embeddings()
    if emb.ids != graph.ids:
        raise HypographError(
            "proximity/: the embeddings and graph.json list different hypotheses — run prox graph again"
        )
    return pairs_from_embeddings(emb.ids, emb.rows, threshold)
