"""4a's candidate pairs: proximity's duplicate pairs, plus each hypothesis's nearest neighbours in
the embeddings proximity produced (whatever their backend).

Real duplicates are paraphrases across papers and rarely reach the lexical duplicate cutoff, so
the neighbours widen what a model is asked to judge. The neighbours come from the rows of the
embeddings given (as the proximity assets computed them); a hypothesis with no row there (added
since, or never embedded) is embedded into the same space here: with the same sentence-transformer
model, or, for TF-IDF, against the same vocabulary (term frequencies only: the corpus's idf
weights are not kept with the embeddings).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from hypograph.errors import HypographError
from hypograph.hypotheses import strip_wikilinks
from hypograph.ids import id_sort_key
from hypograph.proximity.adjudicate import Decision
from hypograph.proximity.embed import Embeddings, embed_sbert
from hypograph.proximity.graph import nearest_neighbours
from hypograph.structure.dispositions.ledger import pair_key
from hypograph.vault.nodes import Node

NEIGHBOURS = 3


@dataclass
class Candidate:
    a: str
    b: str
    similarity: float
    auto_merge: bool = False  # proximity said MERGE without a model (similarity above the cutoff)
    human: str | None = None  # MERGE / KEEP recorded by a person


def candidate_pairs(hypotheses: list[Node], verdicts: list[Decision], embeddings: Embeddings | None,
                    k: int = NEIGHBOURS) -> list[Candidate]:
    """Proximity's verdict pairs among ``hypotheses`` plus each one's ``k`` nearest neighbours among
    them in ``embeddings`` (none when ``k`` is 0). Sorted by similarity, then ids."""
    ids = [h.id for h in hypotheses]
    out: dict[str, Candidate] = {}
    for v in verdicts:
        a, b = v.pair
        if a in ids and b in ids:
            out[pair_key(a, b)] = Candidate(*sorted((a, b), key=id_sort_key), v.similarity,
                                            auto_merge=v.decided_by == "auto" and v.verdict == "MERGE",
                                            human=v.verdict if v.decided_by == "human" else None)
    if len(ids) >= 2 and k:
        if embeddings is None:
            raise HypographError("4a needs the hypotheses' embeddings to find nearest neighbours: run proximity first")
        for i, j, s in nearest_neighbours(rows(embeddings, hypotheses), k):
            key = pair_key(ids[i], ids[j])
            if key not in out:
                out[key] = Candidate(*sorted((ids[i], ids[j]), key=id_sort_key), round(s, 4))
    return sorted(out.values(), key=lambda c: (-c.similarity, id_sort_key(c.a), id_sort_key(c.b)))


def rows(embeddings: Embeddings, nodes: list[Node]):
    """The embedding row of each node, in order: taken from ``embeddings`` when it has the id, else
    embedded into the same space (see the module docstring)."""
    index = {node_id: r for r, node_id in enumerate(embeddings.ids)}
    present = [n for n in nodes if n.id in index]
    missing = [n for n in nodes if n.id not in index]
    taken = embeddings.matrix[[index[n.id] for n in present]]
    if not missing:
        return taken
    extra = embed_like(embeddings, [node_text(n) for n in missing])
    stacked = sp.vstack([taken, extra], format="csr") if sp.issparse(taken) else np.vstack([taken, extra])
    position = {n.id: k for k, n in enumerate(present + missing)}
    return stacked[[position[n.id] for n in nodes]]


def embed_like(embeddings: Embeddings, texts: list[str]):
    """``texts`` embedded into the space of ``embeddings``: same backend, model or vocabulary."""
    if embeddings.backend == "sbert":
        return embed_sbert(texts, embeddings.model)
    if embeddings.backend == "tfidf":
        # heavy import, only when a hypothesis is missing from the embeddings
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.preprocessing import normalize

        if not embeddings.vocabulary:
            return sp.csr_matrix((len(texts), embeddings.dim), dtype=np.float32)
        vec = TfidfVectorizer(stop_words="english", sublinear_tf=True, use_idf=False, dtype=np.float32,
                              vocabulary=embeddings.vocabulary)
        return normalize(vec.fit_transform(texts), norm="l2", copy=False).tocsr()
    raise HypographError(f"embeddings of backend {embeddings.backend!r}: 4a cannot embed missing hypotheses like them")


def node_text(node: Node) -> str:
    """Title and statement, wiki-links stripped: what 4a compares."""
    return strip_wikilinks(f"{node.title} {node.meta.get('statement') or ''}").strip()
