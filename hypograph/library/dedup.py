"""Phase 4: two-layer semantic dedup of a round's candidates, decided by the model.

Behaviors first (discover only: against every library behavior and the round's earlier
candidates), then mechanisms within each surviving / target behavior (against that behavior's
existing mechanisms and the earlier candidates under it). For each candidate:

1. **exact**: a text equal after normalisation (``hypograph.text.normalise``) to a library node or an
   earlier candidate (a mechanism's hypothesis: to any in the library) is a duplicate without
   asking: a model repeating a banlist item ends here, dropped and counted, never an error;
2. **neighbours by meaning**: every other candidate is embedded with the pool (sentence
   embeddings by default; TF-IDF only when the settings ask for it or the sentence model cannot
   load, recorded in ``RoundDedup.embedder``) and shown its ``shown_count`` nearest library nodes
   (``max(10, settings.neighbours)``, default 15, or ``SHOWN_PER_ROOT`` x sqrt(library nodes) when
   that is more: a true duplicate's rank grows with the library) and its ``ROUND_NEIGHBOURS``
   nearest earlier candidates; past ``LARGE_POOL`` nodes, they are ranked by two sentence models'
   rows (``StoredSbert.ranking_rows``: all-MiniLM-L6-v2 beside all-mpnet-base-v2) after the
   library's mean row is taken away (``_centred_cosine``); the cosines shown stay MiniLM's;
3. **the model judges**: batches of numbered candidates, each with its numbered neighbours; the
   answer is ``new`` or ``duplicate`` of neighbour *number* n (the id is looked up from the
   number, never taken from the model), plus an optional nuance for the kept node's ``notes``.
   A call shows at most ``BATCH_NEIGHBOURS`` neighbours: a longer list is judged in parts, and
   the candidate is a duplicate of the first neighbour any part names. No similarity decides
   alone. A rejected answer decides nothing: its candidates are ``unjudged``, the round is not
   done (``Unjudged``, exit 2: how many and why), ``dedup.json`` is not written, and a re-run
   judges them (the answers that were valid come from the model-answer cache, so only the
   rejected questions are asked again). Mechanisms are judged only once every behavior was.

Only a candidate with no node at all to compare with (the first of an empty library) is ``new``
without a call (``no-neighbour``). Every verdict records what decided it, the neighbours shown
and, for a model verdict, the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, Field

from hypograph.errors import NotDone
from hypograph.library.embedder import LARGE_POOL, Embedder, backend_of, cosine, make_embedder
from hypograph.library.generate import require_model
from hypograph.library.persist import load_round
from hypograph.library.prompts import prompt
from hypograph.library.rounds import (
    CandidateBehavior,
    RoundCandidates,
    RoundDedup,
    Verdict,
)
from hypograph.library.schema import Library, read_library
from hypograph.library.settings import DEFAULT_NEIGHBOURS, MIN_NEIGHBOURS
from hypograph.library.state import digest, library_state, read_model, round_dir, write_model
from hypograph.library.traces import TraceRun
from hypograph.llm.answers import require_one_each
from hypograph.llm.client import LLMClient, Rejected, Request, untrusted
from hypograph.llm.policy import SMALLER
from hypograph.proximity.nearest import nearest
from hypograph.text import normalise

BATCH = 8
BATCH_NEIGHBOURS = 240  # a call carries at most BATCH items and at most this many neighbours
ROUND_NEIGHBOURS = 5  # earlier candidates of the same round shown besides the library nodes
# Library nodes shown per candidate: the settings' k, or SHOWN_PER_ROOT * sqrt(library nodes) when
# that is more: a paraphrase's rank among same-topic nodes grows with the library. The smallest
# multiple of 0.5 meeting issue 34's goals (0.98 at 1,000 nodes, 0.95 at 10,000) on the tuning half
# of its labelled set, ranked as below; recall and tokens per size: benchmarks/README.md.
SHOWN_PER_ROOT = 7.5


@dataclass
class Item:
    """One candidate to dedup: its key, text, and (ref, text, cosine) neighbours shown to the model."""

    layer: Literal["behavior", "mechanism"]
    key: str
    text: str
    neighbours: list[tuple[str, str, float]]
    exact: str | None = None  # the node it equals after normalisation
    offset: int = 0  # a part's first neighbour's position among its candidate's (``_parts``)


class Judgement(BaseModel):
    item: int = Field(ge=1)
    verdict: Literal["new", "duplicate"]
    neighbour: int | None = Field(default=None, ge=1, description="number of the neighbour it duplicates")
    nuance: str = Field(default="", max_length=400, description="optional nuance worth adding to the kept node")


class Judgements(BaseModel):
    judgements: list[Judgement]


def dedup_round(
    root: Path,
    key: str,
    candidates: RoundCandidates | None,
    client: LLMClient,
    embedder: Embedder | None = None,
    traces: TraceRun | None = None,
) -> RoundDedup:
    """The round's dedup verdicts and survivors (cached in ``rounds/<key>/dedup.json``)."""
    candidates = candidates or load_round(root, key, "candidates", RoundCandidates)
    path = round_dir(root, key) / "dedup.json"
    cand_digest = digest(candidates.model_dump(mode="json"))
    cached = read_model(path, RoundDedup)
    if cached is not None and cached.candidates_digest == cand_digest and not _unjudged(cached.verdicts):
        return cached  # one with unjudged candidates (an older version wrote those) is judged again
    require_model(client, "dedup needs a model")
    loaded = read_library(root)
    library = loaded[0] if loaded else None
    settings = candidates.settings
    embedder = embedder or make_embedder(settings.embedder, store=library_state(root) / "embeddings")
    judge = _Judge(client, traces or TraceRun(root), key)
    k = max(MIN_NEIGHBOURS, settings.neighbours)
    verdicts: list[Verdict] = []
    behaviors = candidates.behaviors
    if settings.behavior_source == "discover":
        verdicts += judge.decide(behavior_items(library, behaviors, embedder, k), "behavior")
        judge.require_judged(verdicts, "behavior")
        behaviors = _kept(behaviors, verdicts)
    items = [i for b in behaviors for i in mechanism_items(library, b, embedder, k)]
    _exact_elsewhere(items, library, behaviors)
    mech_verdicts = judge.decide(items, "mechanism")
    judge.require_judged(mech_verdicts, "mechanism")
    verdicts += mech_verdicts
    result = RoundDedup(
        round=key,
        candidates_digest=cand_digest,
        verdicts=verdicts,
        survivors=_survivors(behaviors, mech_verdicts, settings.behavior_source),
        embedder=backend_of(embedder),
        prompt=prompt("dedup")[0],
    )
    write_model(path, result)
    return result


class Unjudged(NotDone):
    """Some of a round's candidates got no valid dedup answer: the round is not done (exit 2)."""


def _unjudged(verdicts: list[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if v.verdict == "unjudged"]


def _kept(behaviors: list[CandidateBehavior], verdicts: list[Verdict]) -> list[CandidateBehavior]:
    """The behaviors no verdict drops (a duplicate)."""
    dropped = {v.key for v in verdicts if v.verdict != "new"}
    return [b for b in behaviors if b.key not in dropped]


def _survivors(
    behaviors: list[CandidateBehavior], mech_verdicts: list[Verdict], source: str
) -> list[CandidateBehavior]:
    """Each behavior with only its kept mechanisms; in given mode a target left with none drops out."""
    dropped = {v.key for v in mech_verdicts if v.verdict != "new"}
    survivors = []
    for b in behaviors:
        kept = b.model_copy(update={"mechanisms": [m for m in b.mechanisms if m.key not in dropped]})
        if source == "discover" or kept.mechanisms:
            survivors.append(kept)
    return survivors


def behavior_items(
    library: Library | None, behaviors: list[CandidateBehavior], embedder: Embedder, k: int = DEFAULT_NEIGHBOURS
) -> list[Item]:
    """Each candidate behavior with its nearest library behaviors and earlier candidates."""
    pool = [(b.id, b.statement) for b in (library.behaviors if library else [])]
    return neighbour_items("behavior", pool, [(c.key, c.statement) for c in behaviors], embedder, k)


def mechanism_items(
    library: Library | None, behavior: CandidateBehavior, embedder: Embedder, k: int = DEFAULT_NEIGHBOURS
) -> list[Item]:
    """Each candidate mechanism with its nearest mechanisms of the same behavior (existing, then earlier)."""
    node = library.behavior(behavior.existing_id) if library and behavior.existing_id else None
    pool = [(m.id, mechanism_text(m.strategy, m.hypothesis)) for m in (node.mechanisms if node else [])]
    queries = [(m.key, mechanism_text(m.strategy, m.hypothesis)) for m in behavior.mechanisms]
    return neighbour_items("mechanism", pool, queries, embedder, k)


def _exact_elsewhere(items: list[Item], library: Library | None, behaviors: list[CandidateBehavior]) -> None:
    """Mark as exact duplicates the mechanisms whose hypothesis equals, after normalisation, one
    under *another* behavior (the library's or an earlier candidate's): the library keeps every
    mechanism text distinct (``checks.check_distinct``), so such a repeat would fail its checks."""
    seen = {normalise(m.hypothesis): m.id for _, m in (library.mechanisms() if library else [])}
    by_key = {m.key: m for b in behaviors for m in b.mechanisms}
    for it in items:
        key = normalise(by_key[it.key].hypothesis)
        if it.exact is None and key in seen:
            it.exact = seen[key]
        seen.setdefault(key, it.key)


def mechanism_text(strategy: str, hypothesis: str) -> str:
    return f"{strategy}: {hypothesis}"


def neighbour_items(
    layer,
    existing: list[tuple[str, str]],
    queries: list[tuple[str, str]],
    embedder: Embedder,
    k: int = DEFAULT_NEIGHBOURS,
) -> list[Item]:
    """Query q's neighbours among ``existing`` and queries before q: exact match first, else its
    ``shown_count(k, len(existing))`` nearest existing nodes (best first; centred cosines past
    ``LARGE_POOL`` dense rows) and its ``ROUND_NEIGHBOURS`` nearest earlier queries. Each neighbour is
    (ref, text, plain cosine)."""
    if not queries:
        return []
    pool = existing + queries
    offset = len(existing)
    rows = embedder([t for _, t in pool])
    sims = cosine(rows[offset:], rows)
    ranking = sims
    if offset > LARGE_POOL and not sp.issparse(rows):
        ranking = _centred_cosine(_ranking_rows(embedder, [t for _, t in pool], rows), offset)
    keys = _exact_keys(layer, pool)
    shown = shown_count(k, offset)
    items = []
    for q, (qk, qt) in enumerate(queries):
        limit = offset + q  # only existing nodes and earlier candidates
        exact = next((pool[j][0] for j in range(limit) if keys[j] == keys[offset + q]), None)
        order = _shown(ranking[q, :limit], offset, shown)
        row = sims[q]
        items.append(Item(layer, qk, qt, [(pool[j][0], pool[j][1], round(float(row[j]), 4)) for j in order], exact))
    return items


def shown_count(k: int, nodes: int) -> int:
    """Library nodes shown per candidate against ``nodes`` existing ones: ``k``, or
    ``SHOWN_PER_ROOT * sqrt(nodes)`` when that is more (never more than ``nodes``)."""
    return min(nodes, max(k, math.ceil(SHOWN_PER_ROOT * math.sqrt(nodes))))


def _ranking_rows(embedder: Embedder, texts: list[str], rows: np.ndarray) -> np.ndarray:
    """The rows that rank a large pool: the library embedder's ``ranking_rows`` (two sentence
    models), or its own rows for any other embedder."""
    ranking_rows = getattr(embedder, "ranking_rows", None)
    return ranking_rows(texts) if ranking_rows else rows


def _centred_cosine(rows: np.ndarray, offset: int) -> np.ndarray:
    """Cosines of the queries (rows past ``offset``) to every row, after the existing nodes' mean row
    is taken from all: a library is about one topic, and the direction every node shares tells
    none apart (benchmarks/README.md, issue 34). Ranks the neighbours only; the cosines shown and
    recorded stay the plain ones."""
    centred = rows - rows[:offset].mean(axis=0)
    norms = np.linalg.norm(centred, axis=1, keepdims=True)
    centred = centred / np.where(norms > 0, norms, 1.0)
    return centred[offset:] @ centred.T


def _exact_keys(layer: str, pool: list[tuple[str, str]]) -> list[str]:
    """Each pool text normalised for the exact-match test: a mechanism is an exact duplicate by its
    hypothesis alone, whatever strategy it was filed under."""
    return [normalise(t.partition(": ")[2] or t) if layer == "mechanism" else normalise(t) for _, t in pool]


def _shown(row: np.ndarray, offset: int, k: int) -> list[int]:
    """The neighbours shown for one query (``row``: its similarities to the ``offset`` existing nodes,
    then to earlier candidates): the ``k`` nearest existing nodes, then the nearest earlier candidates
    of the round (their own slots: a round's siblings must not push a library duplicate out)."""
    return nearest(row[:offset], k) + [offset + j for j in nearest(row[offset:], ROUND_NEIGHBOURS)]


@dataclass
class _Judge:
    """Asks the model for the verdicts of a round's items, one layer at a time, traced under the round."""

    client: LLMClient
    traces: TraceRun
    key: str
    reasons: list[str] = field(default_factory=list)  # why answers were rejected, in order

    def require_judged(self, verdicts: list[Verdict], layer: str) -> None:
        """``Unjudged`` naming how many of ``layer``'s candidates got no valid answer, and why."""
        unjudged = _unjudged(verdicts)
        if not unjudged:
            return
        why = "; ".join(dict.fromkeys(" ".join(r.split())[:200] for r in self.reasons))
        later = " (their mechanisms are judged once they are)" if layer == "behavior" else ""
        raise Unjudged(
            f"round {self.key}: {len(unjudged)} of {len(verdicts)} candidate {layer}s unjudged{later}: "
            f"the model's dedup answer was rejected ({why}); nothing of the round was kept and it is not "
            "saturated: run it again to judge them (`hypograph library DIR --topic …` completes a pending round "
            "first; valid answers are cached, only these are asked again)"
        )

    def decide(self, items: list[Item], layer: str) -> list[Verdict]:
        """One verdict per item, in order: settled ones without a call, the rest judged in batches."""
        verdicts, ask = settled(items, layer)
        if ask:
            self.traces.use(self.client, self.key)
            parts: dict[str, list[tuple[int, Verdict]]] = {}
            for part, v in self._judged(layer, judge_batches(ask)):
                parts.setdefault(part.key, []).append((part.offset, v))
            for it in ask:
                ranked = [v for _, v in sorted(parts[it.key], key=lambda p: p[0])]
                verdicts[it.key] = _joined(ranked, [r for r, _, _ in it.neighbours])
        return [verdicts[it.key] for it in items]

    def _judged(self, layer: str, batches: list[list[Item]]) -> list[tuple[Item, Verdict]]:
        """Each batch's items (parts) with their verdicts. A batch whose prompt the server cannot
        take, or whose answer a token budget cut off, is asked again as two halves (``_halves``),
        down to one neighbour: a small context gets more, smaller calls instead of no verdict."""
        answers = self.client.ask_many([judge_request(layer, batch) for batch in batches])
        model = self.client.config.model or ""
        judged: list[tuple[Item, Verdict]] = []
        smaller: list[list[Item]] = []
        for batch, answer in zip(batches, answers, strict=True):
            halves = _halves(batch) if isinstance(answer, Rejected) and answer.kind in SMALLER else None
            if halves:
                smaller += halves
                continue
            self.traces.cap_if_rejected(answer, f"dedup-{layer}s")
            if isinstance(answer, Rejected):
                self.reasons.append(answer.reason)
            judged += zip(batch, _verdicts(layer, batch, answer, model), strict=True)
        return judged + (self._judged(layer, smaller) if smaller else [])


def judge_batches(ask: list[Item]) -> list[list[Item]]:
    """``ask`` in order, cut into calls of at most ``BATCH`` items whose neighbours add up to at
    most ``BATCH_NEIGHBOURS``. An item with more is split into parts (``_parts``), each a call of
    its own, so a prompt stays one a model reads whole (a server that cannot take one still gets
    it in halves: ``_Judge._judged``)."""
    batches: list[list[Item]] = []
    size = 0
    for it in (part for item in ask for part in _parts(item)):
        if not batches or len(batches[-1]) == BATCH or size + len(it.neighbours) > BATCH_NEIGHBOURS:
            batches.append([])
            size = 0
        batches[-1].append(it)
        size += len(it.neighbours)
    return batches


def _parts(item: Item) -> list[Item]:
    """``item`` with its neighbours cut into as few parts as keep each within ``BATCH_NEIGHBOURS``,
    of even size, in rank order (the round's earlier candidates, last, in the last part)."""
    count = math.ceil(len(item.neighbours) / BATCH_NEIGHBOURS)
    if count <= 1:
        return [item]
    size = math.ceil(len(item.neighbours) / count)
    return [
        replace(item, neighbours=item.neighbours[i : i + size], offset=item.offset + i)
        for i in range(0, len(item.neighbours), size)
    ]


def _halves(batch: list[Item]) -> list[list[Item]] | None:
    """``batch`` as two smaller calls: its items in two, or its one item's neighbours in two;
    None for one item with one neighbour (nothing smaller to ask)."""
    if len(batch) > 1:
        return [batch[: len(batch) // 2], batch[len(batch) // 2 :]]
    (item,) = batch
    if len(item.neighbours) < 2:
        return None
    half = len(item.neighbours) // 2
    return [
        [replace(item, neighbours=item.neighbours[:half])],
        [replace(item, neighbours=item.neighbours[half:], offset=item.offset + half)],
    ]


def _joined(parts: list[Verdict], neighbours: list[str]) -> Verdict:
    """One candidate's verdict from its parts' (in their neighbours' rank order), recording every
    neighbour shown: unjudged if any part's answer was rejected (a re-run asks that part again),
    else a duplicate of the first part that names one, else new."""
    joined = next((v for v in parts if v.verdict == "unjudged"), None)
    joined = joined or next((v for v in parts if v.verdict == "duplicate"), parts[0])
    return joined if len(parts) == 1 else joined.model_copy(update={"neighbours": neighbours})


def settled(items: list[Item], layer: str) -> tuple[dict[str, Verdict], list[Item]]:
    """Verdicts needing no model (exact duplicates, nothing to compare with) and the items left to judge."""
    verdicts: dict[str, Verdict] = {}
    ask: list[Item] = []
    for it in items:
        if it.exact is not None:
            verdicts[it.key] = Verdict(
                layer=layer, key=it.key, verdict="duplicate", of=it.exact, decided_by="exact", similarity=1.0
            )
        elif not it.neighbours:
            verdicts[it.key] = Verdict(layer=layer, key=it.key, verdict="new", decided_by="no-neighbour")
        else:
            ask.append(it)
    return verdicts, ask


def judge_request(layer: str, batch: list[Item]) -> Request[Judgements]:
    blocks = []
    for n, it in enumerate(batch, 1):
        neigh = {str(j): text for j, (_, text, _) in enumerate(it.neighbours, 1)}
        blocks.append(
            f"Item {n}:\n"
            + untrusted("candidate", {"layer": layer}, {"text": it.text})
            + "\nNeighbours:\n"
            + untrusted("neighbours", {}, neigh)
        )
    user = f"Judge these {len(batch)} {layer} item(s).\n\n" + "\n\n".join(blocks)

    def check(answer: Judgements) -> None:
        require_one_each((j.item for j in answer.judgements), len(batch), "judgement for each item")
        for j in answer.judgements:
            count = len(batch[j.item - 1].neighbours)
            if j.verdict == "duplicate" and (j.neighbour is None or j.neighbour > count):
                raise ValueError(f"item {j.item}: a duplicate must name its neighbour number 1..{count}")

    return Request(name=f"dedup-{layer}s", system=prompt("dedup")[1], user=user, schema=Judgements, check=check)


def _verdicts(layer: str, batch: list[Item], answer, model: str) -> list[Verdict]:
    if isinstance(answer, Rejected):
        return [
            Verdict(
                layer=layer,
                key=it.key,
                verdict="unjudged",
                decided_by="rejected",
                neighbours=[r for r, _, _ in it.neighbours],
                nuance="",
                model=model,
            )
            for it in batch
        ]
    by_item = {j.item: j for j in answer.judgements}
    out = []
    for n, it in enumerate(batch, 1):
        j = by_item[n]
        refs = [r for r, _, _ in it.neighbours]
        if j.verdict == "duplicate":
            ref, _, sim = it.neighbours[j.neighbour - 1]
            out.append(
                Verdict(
                    layer=layer,
                    key=it.key,
                    verdict="duplicate",
                    of=ref,
                    decided_by="model",
                    similarity=sim,
                    neighbours=refs,
                    nuance=j.nuance.strip(),
                    model=model,
                )
            )
        else:
            out.append(
                Verdict(layer=layer, key=it.key, verdict="new", decided_by="model", neighbours=refs, model=model)
            )
    return out
