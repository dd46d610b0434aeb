"""Phase 4: two-layer semantic dedup of a round's candidates against the library as it stands.

Layer 1, the embedding prefilter (the proximity engine's embedder + cosine): for each candidate it
finds the ``k`` nearest library nodes (and earlier candidates of the same round). A candidate at or
above ``auto_drop`` cosine to one of them is a duplicate outright; one with no neighbour sharing
anything is new; the rest go to layer 2.

Layer 2, the model judge: each candidate with its numbered neighbours; the model answers ``new`` or
``duplicate`` of neighbour *number* n (never an id: the id is looked up from the number), plus any
nuance worth adding to the kept node's ``notes``. A rejected answer leaves its candidates
``unjudged``; they are dropped, never persisted unjudged.

Behaviors first (discover only), then mechanisms within each surviving / target behavior.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from hypograph.library.embedder import Embedder, cosine, make_embedder
from hypograph.library.generate import require_model
from hypograph.library.persist import load_round
from hypograph.library.rounds import CandidateBehavior, RoundCandidates, RoundDedup, Verdict
from hypograph.library.schema import Library, read_library
from hypograph.library.screen import screen
from hypograph.library.state import digest, read_model, round_dir, write_model
from hypograph.library.traces import TraceRun
from hypograph.llm.client import LLMClient, Rejected, Request, untrusted

MIN_SIMILARITY = 0.05  # below this a "neighbour" shares nothing worth a model's look
BATCH = 8


@dataclass
class Item:
    """One candidate to dedup: its key, text, and (ref, text, cosine) neighbours."""

    layer: Literal["behavior", "mechanism"]
    key: str
    text: str
    neighbours: list[tuple[str, str, float]]


class Judgement(BaseModel):
    item: int = Field(ge=1)
    verdict: Literal["new", "duplicate"]
    neighbour: int | None = Field(default=None, ge=1, description="number of the neighbour it duplicates")
    nuance: str = Field(default="", max_length=400, description="optional nuance worth adding to the kept node")


class Judgements(BaseModel):
    judgements: list[Judgement]


SYSTEM = """You judge whether newly proposed research hypotheses duplicate existing ones.
For each numbered item, compare it with its numbered neighbours by meaning, not wording: a reworded
statement of the same phenomenon (behaviors) or the same internal object and causal relation
(mechanisms) is a duplicate. Answer "new", or "duplicate" with the number of the neighbour it
duplicates. If a duplicate adds a nuance worth keeping, put one short sentence in "nuance".
Refer to neighbours only by their numbers. Answer every item once."""


def dedup_round(root: Path, key: str, candidates: RoundCandidates | None, client: LLMClient,
                embedder: Embedder | None = None, traces: TraceRun | None = None) -> RoundDedup:
    """The round's dedup verdicts and survivors (cached in ``rounds/<key>/dedup.json``)."""
    candidates = candidates or load_round(root, key, "candidates", RoundCandidates)
    path = round_dir(root, key) / "dedup.json"
    cand_digest = digest(candidates.model_dump(mode="json"))
    cached = read_model(path, RoundDedup)
    if cached is not None and cached.candidates_digest == cand_digest:
        return cached
    require_model(client, "dedup")
    loaded = read_library(root)
    library = loaded[0] if loaded else None
    embedder = embedder or make_embedder(candidates.settings.embedder)
    traces = traces or TraceRun(root)
    settings = candidates.settings
    verdicts: list[Verdict] = []
    behaviors = candidates.behaviors
    if settings.behavior_source == "discover":
        items = behavior_items(library, behaviors, embedder, settings.neighbours)
        verdicts += _decide(items, settings.auto_drop, client, traces, key, "behavior")
        dropped = {v.key for v in verdicts if v.verdict != "new"}
        behaviors = [b for b in behaviors if b.key not in dropped]
    items = [i for b in behaviors for i in mechanism_items(library, b, embedder, settings.neighbours)]
    mech_verdicts = _decide(items, settings.auto_drop, client, traces, key, "mechanism")
    verdicts += mech_verdicts
    dropped = {v.key for v in mech_verdicts if v.verdict != "new"}
    survivors = []
    for b in behaviors:
        kept = b.model_copy(update={"mechanisms": [m for m in b.mechanisms if m.key not in dropped]})
        if settings.behavior_source == "discover" or kept.mechanisms:
            survivors.append(kept)
    result = RoundDedup(round=key, candidates_digest=cand_digest, verdicts=verdicts, survivors=survivors)
    write_model(path, result)
    return result


def nearest(query_rows, pool_rows, k: int, allowed: list[int] | None = None) -> list[list[tuple[int, float]]]:
    """Per query row, up to ``k`` (pool index, cosine) above MIN_SIMILARITY, best first;
    ``allowed[q]`` limits query q to pool indices below it (earlier items only)."""
    sims = cosine(query_rows, pool_rows)
    out = []
    for q in range(sims.shape[0]):
        row = sims[q, : allowed[q]] if allowed is not None else sims[q]
        order = np.argsort(-row, kind="stable")[:k]
        out.append([(int(j), float(row[j])) for j in order if row[j] > MIN_SIMILARITY])
    return out


def behavior_items(library: Library | None, behaviors: list[CandidateBehavior], embedder: Embedder,
                   k: int) -> list[Item]:
    """Each candidate behavior with its nearest library behaviors and earlier candidates."""
    pool = [(b.id, b.statement) for b in (library.behaviors if library else [])]
    pool += [(c.key, c.statement) for c in behaviors]
    return _items("behavior", pool, [(c.key, c.statement) for c in behaviors], embedder, k)


def mechanism_items(library: Library | None, behavior: CandidateBehavior, embedder: Embedder, k: int) -> list[Item]:
    """Each candidate mechanism with its nearest mechanisms of the same behavior (existing, then earlier)."""
    node = library.behavior(behavior.existing_id) if library and behavior.existing_id else None
    pool = [(m.id, m.hypothesis) for m in (node.mechanisms if node else [])]
    pool += [(m.key, m.hypothesis) for m in behavior.mechanisms]
    return _items("mechanism", pool, [(m.key, m.hypothesis) for m in behavior.mechanisms], embedder, k)


def _items(layer, pool: list[tuple[str, str]], queries: list[tuple[str, str]], embedder: Embedder,
           k: int) -> list[Item]:
    if not queries:
        return []
    offset = len(pool) - len(queries)  # queries are the last rows of the pool
    rows = embedder([t for _, t in pool])
    near = nearest(rows[offset:], rows, k, allowed=[offset + q for q in range(len(queries))])
    return [Item(layer, qk, qt, [(pool[j][0], pool[j][1], round(s, 4)) for j, s in near[q]])
            for q, (qk, qt) in enumerate(queries)]


def _decide(items: list[Item], auto_drop: float, client: LLMClient, traces: TraceRun, key: str,
            layer: str) -> list[Verdict]:
    verdicts, ask = prefilter(items, auto_drop, layer)
    if ask:
        traces.use(client, key)
        batches = judge_batches(ask)
        answers = client.ask_many([judge_request(layer, batch) for batch in batches])
        for batch, answer in zip(batches, answers, strict=True):
            for it, v in zip(batch, _verdicts(layer, batch, answer), strict=True):
                verdicts[it.key] = v
    return [verdicts[it.key] for it in items]


def judge_batches(ask: list[Item]) -> list[list[Item]]:
    return [ask[i:i + BATCH] for i in range(0, len(ask), BATCH)]


def prefilter(items: list[Item], auto_drop: float, layer: str) -> tuple[dict[str, Verdict], list[Item]]:
    """Layer 1's verdicts (duplicate at >= auto_drop, new without neighbours) and the items left for the model."""
    verdicts: dict[str, Verdict] = {}
    ask: list[Item] = []
    for it in items:
        refs = [r for r, _, _ in it.neighbours]
        if it.neighbours and it.neighbours[0][2] >= auto_drop - 1e-6:
            ref, _, sim = it.neighbours[0]
            verdicts[it.key] = Verdict(layer=layer, key=it.key, verdict="duplicate", of=ref, decided_by="prefilter",
                                       similarity=sim, neighbours=refs)
        elif not it.neighbours:
            verdicts[it.key] = Verdict(layer=layer, key=it.key, verdict="new", decided_by="no-neighbour")
        else:
            ask.append(it)
    return verdicts, ask


def judge_request(layer: str, batch: list[Item]) -> Request[Judgements]:
    blocks = []
    for n, it in enumerate(batch, 1):
        neigh = {str(j): text for j, (_, text, _) in enumerate(it.neighbours, 1)}
        blocks.append(f"Item {n}:\n" + untrusted("candidate", {"layer": layer}, {"text": it.text})
                      + "\nNeighbours:\n" + untrusted("neighbours", {}, neigh))
    user = f"Judge these {len(batch)} {layer} item(s).\n\n" + "\n\n".join(blocks)

    def check(answer: Judgements) -> None:
        numbers = sorted(j.item for j in answer.judgements)
        if numbers != list(range(1, len(batch) + 1)):
            raise ValueError(f"expected exactly one judgement for each item 1..{len(batch)}, got {numbers}")
        for j in answer.judgements:
            count = len(batch[j.item - 1].neighbours)
            if j.verdict == "duplicate" and (j.neighbour is None or j.neighbour > count):
                raise ValueError(f"item {j.item}: a duplicate must name its neighbour number 1..{count}")
            screen(f"judgements[item {j.item}].nuance", j.nuance)

    return Request(name=f"dedup-{layer}s", system=SYSTEM, user=user, schema=Judgements, check=check)


def _verdicts(layer: str, batch: list[Item], answer) -> list[Verdict]:
    if isinstance(answer, Rejected):
        return [Verdict(layer=layer, key=it.key, verdict="unjudged", decided_by="rejected",
                        neighbours=[r for r, _, _ in it.neighbours], nuance="") for it in batch]
    by_item = {j.item: j for j in answer.judgements}
    out = []
    for n, it in enumerate(batch, 1):
        j = by_item[n]
        refs = [r for r, _, _ in it.neighbours]
        if j.verdict == "duplicate":
            ref, _, sim = it.neighbours[j.neighbour - 1]
            out.append(Verdict(layer=layer, key=it.key, verdict="duplicate", of=ref, decided_by="model",
                               similarity=sim, neighbours=refs, nuance=j.nuance.strip()))
        else:
            out.append(Verdict(layer=layer, key=it.key, verdict="new", decided_by="model", neighbours=refs))
    return out
