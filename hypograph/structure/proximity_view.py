"""The proximity files of a vault after structuring: the same chain as the proximity assets, run on
the structured vault, so ``proximity/`` describes the vault as step 4 left it.

Without it, the next run would rewrite ``proximity/`` (merged nodes gone) although nothing changed.
Verdicts and labels come from the LLM cache or the human review file: refreshing costs no call
unless structuring created pairs never judged before.
"""

from __future__ import annotations

from pathlib import Path

from hypograph.hypotheses import load_corpus
from hypograph.llm import LLMClient
from hypograph.proximity import store
from hypograph.proximity.adjudicate import adjudicate, read_reviews
from hypograph.proximity.cluster_names import name_clusters
from hypograph.proximity.communities import labelled_clusters
from hypograph.proximity.dupes import pairs_at
from hypograph.proximity.embed import embed, pair_similarity
from hypograph.proximity.graph import DEFAULT_MAX_NEIGHBOURS, similarity_graph


def refresh_proximity(root: Path, backend: str, model: str | None, graph_threshold: float, dupe_threshold: float,
                      auto_merge: float, algorithm: str, verdicts: LLMClient, labels: LLMClient,
                      max_neighbours: int = DEFAULT_MAX_NEIGHBOURS) -> dict[str, int]:
    """Embed, graph, cluster, pair, adjudicate and label ``root`` as it is now; write ``proximity/``.

    Returns counts (hypotheses, edges, clusters, pairs, files changed).
    """
    corpus = load_corpus(root)
    hypotheses = {h.id: h for h in corpus.hypotheses}
    emb = embed(corpus.ids, corpus.texts, backend, model)
    graph = similarity_graph(emb.ids, emb.matrix, graph_threshold, {"backend": emb.backend, "model": emb.model},
                             max_neighbours=max_neighbours, keep_above=dupe_threshold)
    clusters = labelled_clusters(graph, dict(zip(corpus.ids, corpus.texts, strict=True)), algorithm, terms=emb)
    pairs = pairs_at(graph, lambda: emb, dupe_threshold)
    decisions = adjudicate(pairs, hypotheses, read_reviews(root), verdicts, auto_merge,
                           similarity=pair_similarity(emb))
    names = name_clusters(clusters, hypotheses, labels)
    written = [*store.write_embeddings(root, emb), store.write_graph(root, graph),
               *store.write_clusters(root, clusters), store.write_dupes(root, pairs),
               store.write_verdicts(root, decisions), store.write_cluster_names(root, names)]
    return {"hypotheses": len(corpus.ids), "edges": graph.num_edges, "clusters": clusters.num_clusters,
            "pairs": len(pairs), "files": len(written)}
