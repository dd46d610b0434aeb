"""Communities of the similarity graph, labelled C-01, C-02, ... deterministically.

``louvain``: igraph's multilevel modularity optimisation (C, seeded), weighted by similarity.
``components``: connected components, the fallback the seed names.
Either way every node lands in exactly one cluster (isolated nodes are singletons) and a cluster
never spans two connected components: Louvain's communities are split along components.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from hypograph.errors import HypographError
from hypograph.ids import id_sort_key
from hypograph.proximity.graph import SimilarityGraph

if TYPE_CHECKING:
    from hypograph.proximity.embed import Embeddings

ALGORITHMS = ("louvain", "components")
SEED = 42


@dataclass
class Clusters:
    """``clusters`` maps label (C-01, ...) to member ids in id order; labels by size, then first id."""

    clusters: dict[str, list[str]]
    algorithm: str
    keywords: dict[str, str] = field(default_factory=dict)

    @property
    def num_clusters(self) -> int:
        return len(self.clusters)

    def membership(self) -> dict[str, str]:
        """id -> cluster label."""
        return {m: label for label, members in self.clusters.items() for m in members}


def find_communities(graph: SimilarityGraph, algorithm: str = "louvain", seed: int = SEED) -> Clusters:
    """Partition the graph's nodes. Louvain is O(E) per pass; components O(N + E)."""
    igraph = _igraph()
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}: choose one of {', '.join(ALGORITHMS)}")
    n = len(graph.ids)
    if n == 0:
        return Clusters({}, algorithm)
    # an iterator, not a list of tuples: igraph reads it as it goes, which is faster
    g = igraph.Graph(n=n, edges=zip(graph.src.tolist(), graph.dst.tolist(), strict=True))
    component = np.asarray(g.connected_components().membership)
    if algorithm == "louvain" and graph.num_edges:
        # igraph draws from Python's random module API; a private seeded generator makes runs repeatable.
        igraph.set_random_number_generator(random.Random(seed))
        try:
            community = np.asarray(g.community_multilevel(weights=graph.sim.tolist()).membership)
        finally:
            igraph.set_random_number_generator(random)
    else:
        community = component
    return Clusters(label_groups(graph.ids, _groups(community, component)), algorithm)


def _igraph():
    """The igraph module. Its drawing layer imports ``matplotlib.pyplot`` when it can, which triples
    the import's cost; communities never draw, so a process that has not loaded matplotlib imports
    igraph with matplotlib hidden (igraph then keeps a stand-in that only its plotting uses)."""
    if "igraph" in sys.modules or "matplotlib" in sys.modules:
        import igraph

        return igraph
    sys.modules["matplotlib"] = None  # ``import matplotlib`` raises ImportError while this is set
    try:
        import igraph
    finally:
        del sys.modules["matplotlib"]
    return igraph


def _groups(community: np.ndarray, component: np.ndarray) -> list[np.ndarray]:
    """Node index groups sharing both community and component."""
    if component.size == 0:
        return []
    key = community.astype(np.int64) * (component.max() + 1) + component
    order = np.argsort(key, kind="stable")
    cuts = np.flatnonzero(np.diff(key[order])) + 1
    return np.split(order, cuts)


def label_groups(ids: list[str], groups: list) -> dict[str, list[str]]:
    """Label groups C-01.. by size descending, then smallest member id; members in id order."""
    rank = np.empty(len(ids), dtype=np.int64)  # each node's place in id order, sorted once
    rank[sorted(range(len(ids)), key=lambda i: id_sort_key(ids[i]))] = np.arange(len(ids))
    ordered = [
        np.asarray(g, dtype=np.int64)[np.argsort(rank[np.asarray(g, dtype=np.int64)], kind="stable")] for g in groups
    ]
    ordered.sort(key=lambda g: (-len(g), rank[g[0]]))
    members = [[ids[i] for i in g.tolist()] for g in ordered]
    width = max(2, len(str(len(members))))
    return {f"C-{k:0{width}d}": m for k, m in enumerate(members, start=1)}


def labelled_clusters(
    graph: SimilarityGraph,
    texts: dict[str, str],
    algorithm: str = "louvain",
    seed: int = SEED,
    terms: Embeddings | None = None,
) -> Clusters:
    """Communities of ``graph`` with a keyword label each; ``texts`` maps every node id to its text.

    ``terms``: the TF-IDF embeddings of the same ids, reused for the keywords when given (so the
    texts are not tokenized twice); otherwise the texts are embedded with TF-IDF here.
    """
    missing = [i for i in graph.ids if i not in texts]
    if missing:
        raise HypographError(
            f"the graph has {len(missing)} node(s) not among the current hypotheses (e.g. {missing[0]}): "
            "re-run embed and graph"
        )
    clusters = find_communities(graph, algorithm, seed)
    clusters.keywords = keyword_labels(graph, clusters, terms, texts)
    return clusters


def keyword_labels(
    graph: SimilarityGraph, clusters: Clusters, terms: Embeddings | None = None, texts: dict[str, str] | None = None
) -> dict[str, str]:
    """Each cluster's distinctive terms, from ``terms`` when they are TF-IDF rows of exactly the
    graph's ids with their vocabulary, else from ``texts`` (embedded here); {} when neither fits."""
    from hypograph.proximity.embed import embed
    from hypograph.proximity.keywords import cluster_keywords

    if not clusters.clusters:
        return {}
    if terms is None or terms.vocabulary is None or terms.ids != graph.ids or terms.notes:
        if texts is None or any(i not in texts for i in graph.ids):
            return {}
        terms = embed(graph.ids, [texts[i] for i in graph.ids], "tfidf")
    return cluster_keywords(terms.ids, terms.rows, terms.vocabulary, clusters.clusters)


def report_lines(clusters: Clusters, labels: dict[str, str] | None = None, max_members: int = 12) -> list[str]:
    """``C-01: label (H-0001, H-0002, …)``, one line per cluster, best label available first."""
    labels = {**clusters.keywords, **(labels or {})}
    lines = []
    for label, members in clusters.clusters.items():
        shown = ", ".join(members[:max_members]) + (", …" if len(members) > max_members else "")
        lines.append(f"{label}: {labels.get(label) or '(no label)'} ({shown})")
    return lines
