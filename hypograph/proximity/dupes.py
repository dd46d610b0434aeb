"""Near-duplicate pairs: graph edges at or above the dupe threshold (default 0.80)."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hypograph.errors import HypographError
from hypograph.hypotheses import id_sort_key
from hypograph.proximity.graph import EPS, SimilarityGraph

DEFAULT_DUPE_THRESHOLD = 0.80
AUTO_MERGE_THRESHOLD = 0.92


class DuplicatePair(BaseModel):
    """One candidate duplicate; ``a`` sorts before ``b`` in id order."""

    model_config = ConfigDict(frozen=True)

    a: str
    b: str
    similarity: float = Field(ge=0.0, le=1.0)


def duplicate_pairs(graph: SimilarityGraph, threshold: float = DEFAULT_DUPE_THRESHOLD) -> list[DuplicatePair]:
    """Pairs with similarity >= threshold, each once, sorted by descending similarity then ids.

    Read off the graph's edges, so ``threshold`` must not be below the graph's own threshold.
    """
    if threshold + EPS < graph.threshold:
        raise HypographError(
            f"dupe threshold {threshold} is below the graph threshold {graph.threshold}: "
            f"rebuild the graph with --threshold {threshold} or lower"
        )
    keep = np.flatnonzero(graph.sim >= threshold - EPS)
    pairs = []
    for k in keep.tolist():
        a, b = graph.ids[graph.src[k]], graph.ids[graph.dst[k]]
        if id_sort_key(b) < id_sort_key(a):
            a, b = b, a
        pairs.append(DuplicatePair(a=a, b=b, similarity=round(float(graph.sim[k]), 4)))
    pairs.sort(key=lambda p: (-p.similarity, id_sort_key(p.a), id_sort_key(p.b)))
    return pairs
