"""4a's candidate pairs: proximity's duplicate pairs, plus a net of near pairs in the embeddings
proximity produced (whatever their backend).

Real duplicates are paraphrases across papers and rarely reach the lexical duplicate cutoff, so
the net widens what a model is asked to judge (``Net``; the default ``NET`` chosen by measurement,
``benchmarks/structure.py``):

* each hypothesis's ``k`` nearest neighbours (across ``question`` hints);
* its ``hint_k`` nearest among the hypotheses posed against the same ``question`` hint;
* mutual neighbours within ``mutual``: A among B's ``mutual`` nearest and B among A's;
* transitive pairs: A~C when A~B and B~C are both among the neighbour pairs above, each of A
  and C among B's ``transitive`` nearest (so a chain of MERGE answers is checked directly).
 The neighbours come from the rows of the
embeddings given (as the proximity assets computed them); a hypothesis with no row there (added
since, or never embedded) is embedded into the same space here: with the same sentence-transformer
model, or, for TF-IDF, against the same vocabulary (term frequencies only: the corpus's idf
weights are not kept with the embeddings).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import scipy.sparse as sp

from hypograph.errors import HypographError
from hypograph.hypotheses import strip_wikilinks
from hypograph.ids import id_sort_key
from hypograph.proximity.adjudicate import Decision
from hypograph.proximity.embed import TFIDF_MODELS, Embeddings, embed_sbert
from hypograph.proximity.nearest import nearest
from hypograph.structure.dispositions.ledger import pair_key
from hypograph.vault.node_view import NodeView
from hypograph.vault.nodes import Node

NEIGHBOURS = 3


@dataclass(frozen=True)
class Net:
    """How wide 4a casts its net of candidate pairs (see the module docstring); 0 turns a part off."""

    k: int = NEIGHBOURS
    hint_k: int = 0
    mutual: int = 0
    transitive: int = 0


# Measured (benchmarks/structure.py, TF-IDF): 5 neighbours with transitive pairs among each one's 4
# nearest recover 73 / 89 / 92% of the duplicate pairs at 32 / 100 / 500 hypotheses, against 55 /
# 83 / 91% for the 3 neighbours asked before; neighbours within a hint and mutual neighbours added
# candidates but recovered no more, so they are off by default.
NET = Net(k=5, transitive=4)


@dataclass
class Candidate:
    a: str
    b: str
    similarity: float
    auto_merge: bool = False  # proximity said MERGE without a model (similarity above the cutoff)
    human: str | None = None  # MERGE / KEEP recorded by a person


def candidate_pairs(
    hypotheses: list[Node], verdicts: list[Decision], embeddings: Embeddings | None, net: Net = NET
) -> list[Candidate]:
    """Proximity's verdict pairs among ``hypotheses`` plus the pairs of ``net`` among them in
    ``embeddings`` (none when ``net.k`` is 0). Sorted by similarity, then ids."""
    ids = [h.id for h in hypotheses]
    members = set(ids)
    out: dict[str, Candidate] = {}
    for v in verdicts:
        a, b = v.pair
        if a in members and b in members:
            out[pair_key(a, b)] = Candidate(
                *sorted((a, b), key=id_sort_key),
                v.similarity,
                auto_merge=v.decided_by == "auto" and v.verdict == "MERGE",
                human=v.verdict if v.decided_by == "human" else None,
            )
    if len(ids) >= 2 and net.k:
        if embeddings is None:
            raise HypographError(
                "4a needs the hypotheses' embeddings to find nearest neighbours: run `hypograph proximity VAULT` "
                "first (`hypograph structure VAULT` runs it before step 4)"
            )
        for i, j, s in net_pairs(rows(embeddings, hypotheses), [_hint(h) for h in hypotheses], net):
            key = pair_key(ids[i], ids[j])
            if key not in out:
                out[key] = Candidate(*sorted((ids[i], ids[j]), key=id_sort_key), round(s, 4))
    return sorted(out.values(), key=lambda c: (-c.similarity, id_sort_key(c.a), id_sort_key(c.b)))


def _hint(h: Node) -> str:
    return " ".join(str(NodeView(h).question or "").lower().split())


def ranked(matrix, m: int, block: int = 512) -> list[list[tuple[int, float]]]:
    """Each row's ``m`` most similar other rows with a positive cosine, most similar first.
    Row blocks keep memory at O(block * N)."""
    n = matrix.shape[0]
    m = min(m, n - 1)
    out: list[list[tuple[int, float]]] = []
    if m < 1:
        return [[] for _ in range(n)]
    for a in range(0, n, block):
        sims = matrix[a : a + block] @ matrix.T
        sims = sims.toarray() if sp.issparse(sims) else np.asarray(sims)
        for r in range(sims.shape[0]):
            sims[r, a + r] = -np.inf  # never one's own neighbour
        for r in range(sims.shape[0]):
            out.append([(j, float(min(sims[r, j], 1.0))) for j in nearest(sims[r], m) if sims[r, j] > 0])
    return out


def net_pairs(matrix, hints: list[str], net: Net) -> list[tuple[int, int, float]]:
    """The pairs (i, j, cosine), i < j, that ``net`` casts over the rows of ``matrix``
    (``hints``: each row's normalised question hint): one pass per part of the net."""
    near = ranked(matrix, max(net.k, net.mutual, net.transitive))
    pairs: dict[tuple[int, int], float] = {}
    for i, j, s in _nearest(near, net.k):
        _add(pairs, i, j, s)
    if net.hint_k:
        for i, j, s in _same_hint(matrix, hints, net.hint_k):
            _add(pairs, i, j, s)
    if net.mutual:
        for i, j, s in _mutual(near, net.mutual):
            _add(pairs, i, j, s)
    if net.transitive:
        for a, c in _transitive(near, set(pairs), net.transitive):
            _add(pairs, a, c, _cosine(matrix, a, c))
    return sorted(((i, j, s) for (i, j), s in pairs.items()), key=lambda t: (-t[2], t[0], t[1]))


def _add(pairs: dict[tuple[int, int], float], i: int, j: int, s: float) -> None:
    if i != j and s > 0:
        pairs[(min(i, j), max(i, j))] = s


def _nearest(near: list[list[tuple[int, float]]], k: int):
    """Each row with its ``k`` nearest neighbours."""
    for i, row in enumerate(near):
        for j, s in row[:k]:
            yield i, j, s


def _same_hint(matrix, hints: list[str], k: int):
    """Within each group of rows sharing a question hint, each row with its ``k`` nearest."""
    groups: dict[str, list[int]] = {}
    for i, h in enumerate(hints):
        if h:
            groups.setdefault(h, []).append(i)
    for members in (g for g in groups.values() if len(g) > 1):
        for r, row in enumerate(ranked(matrix[members], k)):
            for c, s in row:
                yield members[r], members[c], s


def _mutual(near: list[list[tuple[int, float]]], m: int):
    """Pairs each among the other's ``m`` nearest."""
    close = [{j for j, _ in row[:m]} for row in near]
    for i, row in enumerate(near):
        for j, s in row[:m]:
            if i in close[j]:
                yield i, j, s


def _transitive(near: list[list[tuple[int, float]]], linked: set[tuple[int, int]], t: int):
    """A~B and B~C both pairs already, A and C among B's ``t`` closest: A~C is asked too."""
    for b, row in enumerate(near):
        for (a, _), (c, _) in combinations(row[:t], 2):
            if (min(a, b), max(a, b)) in linked and (min(b, c), max(b, c)) in linked:
                yield a, c


def _cosine(matrix, i: int, j: int) -> float:
    v = matrix[i] @ matrix[j].T
    v = v.toarray() if sp.issparse(v) else np.asarray(v)
    return float(min(np.asarray(v).ravel()[0], 1.0))


def rows(embeddings: Embeddings, nodes: list[Node]):
    """The embedding row of each node, in order: taken from ``embeddings`` when it has the id, else
    embedded into the same space (see the module docstring)."""
    index = {node_id: r for r, node_id in enumerate(embeddings.ids)}
    present = [n for n in nodes if n.id in index]
    missing = [n for n in nodes if n.id not in index]
    taken = embeddings.rows[[index[n.id] for n in present]]
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
        # the analyzer of the model the rows came from (seed or tuned), over their vocabulary
        vec = TfidfVectorizer(
            **TFIDF_MODELS.get(embeddings.model, {}), use_idf=False, dtype=np.float32, vocabulary=embeddings.vocabulary
        )
        return normalize(vec.fit_transform(texts), norm="l2", copy=False).tocsr()
    raise HypographError(f"embeddings of backend {embeddings.backend!r}: 4a cannot embed missing hypotheses like them")


def node_text(node: Node) -> str:
    """Title and statement, wiki-links stripped: what 4a compares."""
    return strip_wikilinks(f"{node.title} {NodeView(node).statement or ''}").strip()
