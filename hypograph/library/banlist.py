"""The banlist a generation prompt carries: what the library already holds, within a token budget.

The library rounds spec pastes every existing statement into each generation prompt, so the prompt grows with the
library without bound. Here the whole list is pasted while it fits ``budget`` tokens; past it, the
library is clustered with the proximity engine (embed -> similarity graph -> Louvain clusters with
c-TF-IDF labels) and the prompt carries one representative per cluster (its medoid) plus the
cluster's label, largest clusters first, then labels only, until the budget is spent. What the
banlist no longer shows verbatim, the two dedup layers catch.

Tokens are estimated as ceil(characters / 4), the usual rule of thumb for English with GPT-style
tokenizers (no tokenizer is a dependency); the same estimate is used everywhere, so comparisons hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hypograph.library.embedder import backend_of, make_embedder
from hypograph.library.rounds import BanlistStats
from hypograph.proximity.communities import labelled_clusters
from hypograph.proximity.defaults import DEFAULT_THRESHOLD
from hypograph.proximity.embed import DEFAULT_SBERT_MODEL, Embeddings, embed
from hypograph.proximity.graph import similarity_graph

CLUSTER_THRESHOLD = DEFAULT_THRESHOLD  # the proximity graph's default edge threshold (TF-IDF)
SBERT_CLUSTER_THRESHOLD = 0.55  # sentence embeddings are dense: a higher edge cosine keeps themes apart


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


@dataclass
class Banlist:
    text: str
    stats: BanlistStats


def item_line(item_id: str, text: str) -> str:
    return f"- {item_id}: {' '.join(text.split())}"


def build_banlist(
    items: list[tuple[str, str]], budget: int, backend: str = "tfidf", store: Path | None = None
) -> Banlist:
    """The banlist of ``items`` (id, text): every line if they fit ``budget`` tokens, else clustered."""
    if not items:
        return Banlist(
            "(the library is empty: nothing is banned yet)", BanlistStats(mode="empty", items=0, shown=0, tokens=0)
        )
    lines = [item_line(i, t) for i, t in items]
    text = "\n".join(lines)
    tokens = estimate_tokens(text)
    if tokens <= budget:
        return Banlist(text, BanlistStats(mode="full", items=len(items), shown=len(items), tokens=tokens))
    return clustered_banlist(items, budget, backend, store)


def clustered_banlist(
    items: list[tuple[str, str]], budget: int, backend: str = "tfidf", store: Path | None = None
) -> Banlist:
    """One representative per proximity cluster plus labels, largest clusters first, within ``budget``."""
    ids = [i for i, _ in items]
    texts = dict(items)
    emb = _embeddings(ids, [texts[i] for i in ids], backend, store)
    threshold = SBERT_CLUSTER_THRESHOLD if emb.backend == "sbert" else CLUSTER_THRESHOLD
    graph = similarity_graph(ids, emb.rows, threshold, workers=1)
    clusters = labelled_clusters(graph, texts, terms=emb if emb.vocabulary is not None else None)
    row = {i: k for k, i in enumerate(ids)}
    header = (
        f"The library holds {len(items)} items in {clusters.num_clusters} clusters of similar items. "
        "Each line names a cluster, its theme and one representative; do not propose anything that "
        "falls in a listed theme unless it is clearly distinct from every member."
    )
    out, used, shown = [header], estimate_tokens(header), 0
    leftover = 0
    for label, members in clusters.clusters.items():
        theme = clusters.keywords.get(label) or "(no label)"
        rep = _medoid(emb.rows, [row[m] for m in members])
        line = f"- {label} ({len(members)} items; theme: {theme}): {item_line(ids[rep], texts[ids[rep]])[2:]}"
        short = f"- {label} ({len(members)} items; theme: {theme})"
        for candidate, counts in ((line, 1), (short, 0)):
            cost = estimate_tokens(candidate) + 1
            if used + cost <= budget:
                out.append(candidate)
                used += cost
                shown += counts
                break
        else:
            leftover += 1
    if leftover:
        out.append(f"- … {leftover} smaller clusters not shown")
    text = "\n".join(out)
    return Banlist(
        text,
        BanlistStats(
            mode="clustered",
            items=len(items),
            shown=shown,
            clusters=clusters.num_clusters,
            tokens=estimate_tokens(text),
        ),
    )


def _embeddings(ids: list[str], texts: list[str], backend: str, store: Path | None = None) -> Embeddings:
    """The items' rows: sentence embeddings from the library's shared model (loaded once per
    process; TF-IDF when the ``semantic`` extra is absent), or TF-IDF rows with their vocabulary."""
    if backend == "sbert":
        embedder = make_embedder("sbert", store=store)
        if backend_of(embedder).startswith("sbert"):
            return Embeddings(list(ids), embedder(texts), "sbert", DEFAULT_SBERT_MODEL)
    return embed(ids, texts, "tfidf")


def _medoid(matrix, rows: list[int]) -> int:
    """The member closest to the cluster's centroid (rows are L2-normalised)."""
    if len(rows) == 1:
        return rows[0]
    sub = matrix[rows]
    centroid = np.asarray(sub.mean(axis=0)).ravel()
    scores = np.asarray(sub @ centroid).ravel()
    return rows[int(np.argmax(scores))]
