"""Phase 5: one scoring call per surviving behavior — impact for the behavior, novelty per mechanism.

With web grounding on, one arXiv search per behavior first (``search.ArxivSearch``); its results
ground both referees and ``method`` is ``llm-chat+web``. A failed search is traced, reported as one
warning line, and the behavior is scored with ``method: llm-chat`` — never a failed round.

``score_round`` is re-scorable alone: its result depends on the dedup survivors, the model and the
web setting only, so a new model or ``web=True`` re-scores a round without regenerating anything
(``persist_round`` then restamps the round's nodes, ids unchanged). Scores outside 1–10, missing
fields, mechanism numbers that were not asked, library ids or instruction-like text make an answer
invalid (re-asked, then the behavior is left unscored and is not persisted).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from pydantic import BaseModel, Field

from hypograph.library.generate import require_model
from hypograph.library.landscape import read_landscape
from hypograph.library.persist import load_round
from hypograph.library.rounds import (
    BehaviorScores,
    CandidateBehavior,
    ImpactScore,
    NoveltyScore,
    RoundCandidates,
    RoundDedup,
    RoundScores,
    SearchRecord,
)
from hypograph.library.schema import read_library
from hypograph.library.screen import screen_all
from hypograph.library.search import ArxivSearch, SearchOutcome
from hypograph.library.state import digest, read_model, round_dir, write_model
from hypograph.library.traces import TraceRun
from hypograph.llm.client import LLMClient, Rejected, Request, untrusted


class NoveltyItem(NoveltyScore):
    mechanism: int = Field(ge=1, description="number of the mechanism scored")
    closest: str = Field(min_length=3, max_length=400)
    differentiation: str = Field(min_length=3, max_length=600)
    caveat: str = Field(default="", max_length=400)


class ImpactItem(ImpactScore):
    rationale: str = Field(min_length=3, max_length=600)


class ScoreAnswer(BaseModel):
    impact: ImpactItem | None = None
    novelty: list[NoveltyItem]


SYSTEM = """You are two referees giving lightweight triage scores (not publication-grade verdicts).
Impact referee, on the behavior: is the phenomenon important? score 1-10 (10 = clearly important),
a one-line rationale (why it matters + who would build on it), and a recommendation: PROCEED,
PROCEED WITH CAUTION or DEPRIORITIZE.
Novelty referee, on each numbered mechanism: is the method new? score 1-10 (10 = clearly new), the
single closest prior work, a one-line differentiation, and an optional one-line caveat.
Impact and novelty are separate judgements: never combine them into a rank. Use the search results,
when given, as evidence of prior work. Refer to mechanisms only by their numbers."""


def score_round(root: Path, key: str, dedup: RoundDedup | None, client: LLMClient, search: ArxivSearch | None = None,
                web: bool | None = None, traces: TraceRun | None = None) -> RoundScores:
    """Scores of round ``key``'s survivors (cached in ``rounds/<key>/scores.json`` by inputs)."""
    candidates = load_round(root, key, "candidates", RoundCandidates)
    dedup = dedup or load_round(root, key, "dedup", RoundDedup)
    web = candidates.settings.web if web is None else web
    inputs = digest({"survivors": [b.model_dump(mode="json") for b in dedup.survivors],
                     "model": client.config.model, "web": web})
    path = round_dir(root, key) / "scores.json"
    cached = read_model(path, RoundScores)
    if cached is not None and cached.inputs_digest == inputs:
        return cached
    require_model(client, "scoring")
    search = (search or ArxivSearch()) if web else None
    loaded = read_library(root)
    library = loaded[0] if loaded else None
    landscape = read_landscape(root)
    traces = traces or TraceRun(root)
    today = dt.date.today().isoformat()
    outcomes: list[SearchOutcome | None] = []
    requests = []
    for b in dedup.survivors:
        existing = library.behavior(b.existing_id) if library and b.existing_id else None
        ask_impact = existing is None or existing.impact is None
        outcome = None
        if search is not None:
            traces.use(client, key)
            outcome = search.search(f"{b.statement} {' '.join(m.hypothesis for m in b.mechanisms[:2])}")
            client.record(f"search-{b.key}", {"query": outcome.query, "endpoint": search.describe(), "ok": outcome.ok,
                                              "error": outcome.error, "papers": [p.__dict__ for p in outcome.papers]})
        outcomes.append(outcome)
        requests.append(score_request(candidates.settings.topic, b, ask_impact, outcome, landscape.gaps))
    if requests:
        traces.use(client, key)
    answers = client.ask_many(requests)
    scored = [_scores(b, a, o, today) for b, a, o in zip(dedup.survivors, answers, outcomes, strict=True)]
    failed = [o for o in outcomes if o is not None and not o.ok]
    warnings = ([f"web search failed for {len(failed)} of {len(outcomes)} behavior(s) ({failed[0].error}): "
                 "those were scored with method llm-chat"] if failed else [])
    result = RoundScores(round=key, inputs_digest=inputs, model=client.config.model or "", behaviors=scored,
                         warnings=warnings)
    write_model(path, result)
    return result


def score_request(topic: str, b: CandidateBehavior, ask_impact: bool, outcome: SearchOutcome | None,
             gaps: dict[str, str]) -> Request[ScoreAnswer]:
    parts = [f"Topic: {topic}", "Behavior:\n" + untrusted("behavior", {}, {"statement": b.statement,
                                                                           "five_bars": b.five_bars.model_dump()})]
    mechs = {str(n): {"strategy": m.strategy, "hypothesis": m.hypothesis, "boring_null": m.boring_null}
             for n, m in enumerate(b.mechanisms, 1)}
    parts.append("Mechanisms:\n" + untrusted("mechanisms", {}, mechs))
    if outcome is not None and outcome.ok:
        papers = {"papers": [p.__dict__ for p in outcome.papers]}
        parts.append("Search results (arXiv):\n" + untrusted("search", {}, papers))
    if gaps:
        parts.append("Landscape gaps:\n" + untrusted("landscape", {}, gaps))
    parts.append(("Give the impact score of the behavior and " if ask_impact else
                  "The behavior already has an impact score: set impact to null. Give ")
                 + f"the novelty of each of the {len(b.mechanisms)} mechanism(s), numbered 1..{len(b.mechanisms)}.")
    count = len(b.mechanisms)

    def check(answer: ScoreAnswer) -> None:
        if ask_impact and answer.impact is None:
            raise ValueError("impact: missing (the behavior must be scored)")
        if not ask_impact and answer.impact is not None:
            raise ValueError("impact: must be null (this behavior keeps its score)")
        numbers = sorted(n.mechanism for n in answer.novelty)
        if numbers != list(range(1, count + 1)):
            raise ValueError(f"novelty: expected one score for each mechanism 1..{count}, got {numbers}")
        screen_all("answer", answer.model_dump(mode="json"))

    return Request(name=f"score-{b.key}", system=SYSTEM, user="\n\n".join(parts), schema=ScoreAnswer, check=check)


def _scores(b: CandidateBehavior, answer, outcome: SearchOutcome | None, today: str) -> BehaviorScores:
    record = (SearchRecord(query=outcome.query, ok=outcome.ok, results=len(outcome.papers), error=outcome.error)
              if outcome else None)
    method = "llm-chat+web" if outcome is not None and outcome.ok else "llm-chat"
    if isinstance(answer, Rejected):
        return BehaviorScores(key=b.key, date=today, method=method, search=record, rejected=answer.reason)
    by_number = {n.mechanism: n for n in answer.novelty}
    novelty = {m.key: NoveltyScore(**by_number[n].model_dump(include={"score", "closest", "differentiation", "caveat"}))
               for n, m in enumerate(b.mechanisms, 1)}
    impact = ImpactScore(**answer.impact.model_dump()) if answer.impact else None
    return BehaviorScores(key=b.key, impact=impact, novelty=novelty, method=method, date=today, search=record)
