"""4a's candidate pairs: proximity's duplicate pairs, plus each hypothesis's nearest neighbours."""

from __future__ import annotations

from dataclasses import dataclass

from hypograph.hypotheses import strip_wikilinks
from hypograph.ids import id_sort_key
from hypograph.proximity.embed import embed
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


def candidate_pairs(hypotheses: list[Node], verdicts: list, k: int = NEIGHBOURS, semantic: bool = False) -> list[Candidate]:
    """Proximity's duplicate pairs among ``hypotheses`` plus each one's ``k`` nearest neighbours."""
    ids = [h.id for h in hypotheses]
    by_id = {h.id: h for h in hypotheses}
    out: dict[str, Candidate] = {}
    for v in verdicts:
        a, b = v.pair
        if a in ids and b in ids:
            out[pair_key(a, b)] = Candidate(*sorted((a, b), key=id_sort_key), v.similarity,
                                            auto_merge=v.decided_by == "auto" and v.verdict == "MERGE",
                                            human=v.verdict if v.decided_by == "human" else None)
    if len(ids) >= 2 and k:
        texts = [node_text(by_id[i]) for i in ids]
        backend = "sbert" if semantic and _has_sbert() else "tfidf"
        emb = embed(ids, texts, backend)
        for i, j, s in nearest_neighbours(emb.matrix, k):
            key = pair_key(ids[i], ids[j])
            if key not in out:
                out[key] = Candidate(*sorted((ids[i], ids[j]), key=id_sort_key), round(s, 4))
    return sorted(out.values(), key=lambda c: (-c.similarity, id_sort_key(c.a), id_sort_key(c.b)))


def _has_sbert() -> bool:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


def node_text(node: Node) -> str:
    """Title and statement, wiki-links stripped: what 4a compares."""
    return strip_wikilinks(f"{node.title} {node.meta.get('statement') or ''}").strip()
