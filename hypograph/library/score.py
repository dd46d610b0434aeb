"""Phase 5: one scoring call per surviving behavior — impact for the behavior, novelty per mechanism.

With web grounding on (``NOVELTY_WEB``), before scoring:

1. **queries by the model** (prompt ``queries.v1``, one call per batch of behaviors): for each
   behavior, search terms for the behavior itself and for its mechanism angle;
2. **search** each query on every resource (arXiv, OpenAlex; ``search.web_search``), papers merged
   by id and title, at most ``MAX_PAPERS`` per behavior, every search traced;
3. the referees (prompt ``score.v2``: impact on explicit dimensions — importance, who builds on it,
   tractability, risk of a boring null — and novelty against the retrieved work) see the papers
   numbered P1… with source, id, title and year. ``closest`` names a retrieved paper by its number
   (the tool writes its title, year, id and URL) or, when none is close, says it comes from the
   model's memory. ``method`` is ``llm-chat+web`` only for a behavior whose referees were shown at
   least one retrieved paper; a failed or empty search leaves ``llm-chat`` and one warning line.

``score_round`` is re-scorable alone: its result depends on the dedup survivors, the model, the
web setting and the prompt versions only, so a new model or ``web=True`` re-scores a round
without regenerating anything (``persist_round`` then restamps the round's nodes, ids unchanged).
Scores outside 1–10, missing fields, or mechanism / paper numbers that were not shown make an
answer invalid (re-asked). A behavior whose answers stay invalid leaves the round not done
(``Unscored``, exit 2: how many and why): ``scores.json`` is not written and nothing is persisted,
so a re-run asks again — only the rejected questions, the valid answers come from the model-answer
cache — and a rejection never freezes into a round that dropped the behavior.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from pydantic import BaseModel, Field

from hypograph.errors import NotDone
from hypograph.library.generate import require_model
from hypograph.library.landscape import read_landscape
from hypograph.library.persist import load_round
from hypograph.library.prompts import prompt
from hypograph.library.rounds import (
    BehaviorScores,
    CandidateBehavior,
    ImpactDimensions,
    ImpactScore,
    NoveltyScore,
    Paper,
    RoundCandidates,
    RoundDedup,
    RoundScores,
    SearchRecord,
)
from hypograph.library.schema import Recommendation, read_library
from hypograph.library.search import WebSearch, as_web_search, web_search
from hypograph.library.state import digest, read_model, round_dir, write_model
from hypograph.library.traces import TraceRun
from hypograph.llm.answers import require_one_each
from hypograph.llm.client import LLMClient, Rejected, Request, untrusted

MAX_PAPERS = 8
QUERY_BATCH = 8


class NoveltyItem(BaseModel):
    mechanism: int = Field(ge=1, description="number of the mechanism scored")
    score: int = Field(ge=1, le=10)
    closest_paper: int | None = Field(default=None, ge=1, description="number P<n> of the closest retrieved paper")
    closest_memory: str = Field(
        default="", max_length=400, description="closest prior work from memory, when no retrieved paper is close"
    )
    differentiation: str = Field(min_length=3, max_length=600)
    caveat: str = Field(default="", max_length=400)


class ImpactItem(BaseModel):
    importance: int = Field(ge=1, le=10)
    builders: str = Field(min_length=3, max_length=300)
    tractability: int = Field(ge=1, le=10)
    null_risk: int = Field(ge=1, le=10)
    score: int = Field(ge=1, le=10)
    rationale: str = Field(min_length=3, max_length=600)
    recommendation: Recommendation


class ScoreAnswer(BaseModel):
    impact: ImpactItem | None = None
    novelty: list[NoveltyItem]


class BehaviorQueries(BaseModel):
    behavior: int = Field(ge=1)
    behavior_terms: list[str] = Field(min_length=2, max_length=5)
    mechanism_terms: list[str] = Field(min_length=2, max_length=5)


class QueriesAnswer(BaseModel):
    queries: list[BehaviorQueries]


Grounding = dict[str, tuple[list[Paper], list[SearchRecord], str]]  # behavior key -> (papers, searches, why none)


def score_round(
    root: Path,
    key: str,
    client: LLMClient,
    search=None,
    web: bool | None = None,
    traces: TraceRun | None = None,
) -> RoundScores:
    """Scores of round ``key``'s dedup survivors (read from ``rounds/<key>/dedup.json``; cached in
    ``rounds/<key>/scores.json`` by inputs).

    ``search``: a ``WebSearch`` or one resource (``ArxivSearch``, ``OpenAlexSearch``); None with
    web on: ``web_search()`` (arXiv and OpenAlex at their configured endpoints)."""
    candidates = load_round(root, key, "candidates", RoundCandidates)
    dedup = load_round(root, key, "dedup", RoundDedup)
    web = candidates.settings.web if web is None else web
    inputs = digest(
        {
            "survivors": [b.model_dump(mode="json") for b in dedup.survivors],
            "model": client.config.model,
            "web": web,
            "prompts": [prompt("score")[0], prompt("queries")[0]],
        }
    )
    path = round_dir(root, key) / "scores.json"
    cached = read_model(path, RoundScores)
    if cached is not None and cached.inputs_digest == inputs:
        return cached
    require_model(client, "scoring needs a model")
    searcher = (as_web_search(search) or web_search()) if web else None
    traces = traces or TraceRun(root, candidates.settings.invocation)
    survivors = dedup.survivors
    if survivors:
        traces.use(client, key)
    grounding = (
        ground(survivors, client, searcher, traces)
        if searcher is not None and survivors
        else {b.key: ([], [], "") for b in survivors}
    )
    result = RoundScores(
        round=key,
        inputs_digest=inputs,
        model=client.config.model or "",
        behaviors=_score_all(root, candidates.settings.topic, survivors, grounding, client, traces),
        warnings=_warnings(survivors, grounding) if searcher is not None else [],
        prompt=prompt("score")[0],
    )
    _require_scored(key, result)
    write_model(path, result)
    return result


class Unscored(NotDone):
    """Some of a round's survivors got no valid scoring answer: the round is not done (exit 2)."""


def _require_scored(key: str, result: RoundScores) -> None:
    """``Unscored`` naming how many survivors the model's answers left unscored, and why."""
    rejected = [b for b in result.behaviors if b.rejected is not None]
    if not rejected:
        return
    why = "; ".join(dict.fromkeys(" ".join(b.rejected.split())[:200] for b in rejected))
    raise Unscored(
        f"round {key}: {len(rejected)} of {len(result.behaviors)} surviving behaviors unscored: the model's "
        f"scoring answer was rejected ({why}); nothing of the round was kept: run it again to score them "
        "(`hypograph library DIR --topic …` completes a pending round first; valid answers are cached, only "
        "these are asked again)"
    )


def _score_all(
    root: Path, topic: str, survivors: list[CandidateBehavior], grounding: Grounding, client: LLMClient, traces
) -> list[BehaviorScores]:
    """Ask the model to score each survivor (impact only for a behavior without one yet), given its papers."""
    loaded = read_library(root)
    library = loaded[0] if loaded else None
    gaps = read_landscape(root).gaps
    today = dt.date.today().isoformat()
    requests = []
    for b in survivors:
        existing = library.behavior(b.existing_id) if library and b.existing_id else None
        ask_impact = existing is None or existing.impact is None
        requests.append(score_request(topic, b, ask_impact, grounding[b.key][0], gaps))
    scored = []
    for b, request, answer in zip(survivors, requests, client.ask_many(requests), strict=True):
        traces.cap_if_rejected(answer, request.name)
        papers, searches, _ = grounding[b.key]
        scored.append(_scores(b, answer, papers, searches, today))
    return scored


def ground(survivors: list[CandidateBehavior], client: LLMClient, searcher: WebSearch, traces: TraceRun) -> Grounding:
    """Per behavior key: (papers to show, the searches made, why there are none)."""
    out: Grounding = {}
    batches = [survivors[i : i + QUERY_BATCH] for i in range(0, len(survivors), QUERY_BATCH)]
    requests = [queries_request(batch) for batch in batches]
    answers = client.ask_many(requests)
    for batch, request, answer in zip(batches, requests, answers, strict=True):
        traces.cap_if_rejected(answer, request.name)
        if isinstance(answer, Rejected):
            for b in batch:
                out[b.key] = ([], [], f"the model's search queries were rejected ({answer.reason})")
            continue
        by_number = {q.behavior: q for q in answer.queries}
        for n, b in enumerate(batch, 1):
            papers, records = _search(searcher, by_number[n])
            client.record(
                f"search-{b.key}",
                {
                    "endpoints": searcher.describe(),
                    "searches": [r.model_dump() for r in records],
                    "papers": [p.model_dump() for p in papers],
                },
            )
            failed = [r for r in records if not r.ok]
            why = "" if papers else (failed[0].error if failed else "no paper matched the queries")
            out[b.key] = (papers, records, why)
    return out


def _search(searcher: WebSearch, q: BehaviorQueries) -> tuple[list[Paper], list[SearchRecord]]:
    """Run one behavior's queries (its behavior terms, then its mechanism terms): the first
    ``MAX_PAPERS`` distinct papers (by id and by title) and a record of every search made."""
    papers: list[Paper] = []
    records: list[SearchRecord] = []
    seen: set[str] = set()
    for angle, terms in (("behavior", q.behavior_terms), ("mechanism", q.mechanism_terms)):
        for outcome in searcher.search(terms):
            records.append(
                SearchRecord(
                    query=outcome.query,
                    ok=outcome.ok,
                    results=len(outcome.papers),
                    error=outcome.error,
                    source=outcome.source,
                    angle=angle,
                )
            )
            for p in outcome.papers:
                mark = " ".join(p.title.casefold().split())
                if p.id not in seen and mark not in seen and len(papers) < MAX_PAPERS:
                    papers.append(p)
                seen |= {p.id, mark}
    return papers, records


def queries_request(batch: list[CandidateBehavior]) -> Request[QueriesAnswer]:
    items = {
        str(n): {"behavior": b.statement, "mechanism_angle": [f"{m.strategy}: {m.hypothesis}" for m in b.mechanisms]}
        for n, b in enumerate(batch, 1)
    }
    user = (
        f"Write search terms for each of these {len(batch)} behavior(s), numbered 1..{len(batch)}: "
        "behavior_terms for the phenomenon, mechanism_terms for its mechanism angle.\n"
        + untrusted("behaviors", {}, items)
    )

    def check(answer: QueriesAnswer) -> None:
        require_one_each((q.behavior for q in answer.queries), len(batch), "queries entry for each behavior")
        for q in answer.queries:
            for t in q.behavior_terms + q.mechanism_terms:
                if not t.strip() or len(t) > 80:
                    raise ValueError(f"behavior {q.behavior}: a search term must be 1-80 characters")

    return Request(
        name=f"queries-{batch[0].key}", system=prompt("queries")[1], user=user, schema=QueriesAnswer, check=check
    )


def score_request(
    topic: str, b: CandidateBehavior, ask_impact: bool, papers: list[Paper], gaps: dict[str, str]
) -> Request[ScoreAnswer]:
    parts = [
        f"Topic: {topic}",
        "Behavior:\n" + untrusted("behavior", {}, {"statement": b.statement, "five_bars": b.five_bars.model_dump()}),
    ]
    mechs = {
        str(n): {"strategy": m.strategy, "hypothesis": m.hypothesis, "boring_null": m.boring_null}
        for n, m in enumerate(b.mechanisms, 1)
    }
    parts.append("Mechanisms:\n" + untrusted("mechanisms", {}, mechs))
    if papers:
        shown = {
            f"P{n}": {"source": p.source, "id": p.id, "title": p.title, "year": p.year, "summary": p.summary}
            for n, p in enumerate(papers, 1)
        }
        parts.append(
            f"Retrieved papers (literature search, {len(papers)}; cite the closest by its number "
            "in closest_paper):\n" + untrusted("papers", {}, shown)
        )
    else:
        parts.append(
            "No retrieved papers: set closest_paper to null and name the closest prior work you know "
            "of in closest_memory."
        )
    if gaps:
        parts.append("Landscape gaps:\n" + untrusted("landscape", {}, gaps))
    parts.append(
        (
            "Give the impact of the behavior (its dimensions, then score, rationale, recommendation) and "
            if ask_impact
            else "The behavior already has an impact score: set impact to null. Give "
        )
        + f"the novelty of each of the {len(b.mechanisms)} mechanism(s), numbered 1..{len(b.mechanisms)}."
    )
    count = len(b.mechanisms)

    def check(answer: ScoreAnswer) -> None:
        if ask_impact and answer.impact is None:
            raise ValueError("impact: missing (the behavior must be scored)")
        if not ask_impact and answer.impact is not None:
            raise ValueError("impact: must be null (this behavior keeps its score)")
        require_one_each((n.mechanism for n in answer.novelty), count, "novelty score for each mechanism")
        for n in answer.novelty:
            if n.closest_paper is not None and n.closest_paper > len(papers):
                raise ValueError(
                    f"novelty[mechanism {n.mechanism}].closest_paper: P{n.closest_paper} was not shown "
                    f"({'P1..P' + str(len(papers)) if papers else 'no papers were shown'})"
                )
            if n.closest_paper is None and len(n.closest_memory.strip()) < 3:
                raise ValueError(f"novelty[mechanism {n.mechanism}]: give closest_paper or closest_memory")

    return Request(
        name=f"score-{b.key}", system=prompt("score")[1], user="\n\n".join(parts), schema=ScoreAnswer, check=check
    )


def cite(p: Paper) -> str:
    """How a retrieved paper is named in ``closest``: title (year), id, URL."""
    year = f" ({p.year})" if p.year else ""
    url = f" {p.url}" if p.url and p.url not in p.id else ""
    return f"{p.title}{year}, {p.id}{url}"


def _novelty(item: NoveltyItem, papers: list[Paper]) -> NoveltyScore:
    if item.closest_paper is not None:
        p = papers[item.closest_paper - 1]
        return NoveltyScore(
            score=item.score,
            closest=cite(p),
            differentiation=item.differentiation,
            caveat=item.caveat,
            closest_source="retrieved",
            closest_id=p.url or p.id,
        )
    memory = " ".join(item.closest_memory.split())
    return NoveltyScore(
        score=item.score,
        closest=f"{memory} (from the model's memory; not a retrieved paper)",
        differentiation=item.differentiation,
        caveat=item.caveat,
        closest_source="memory",
    )


def _scores(
    b: CandidateBehavior, answer, papers: list[Paper], searches: list[SearchRecord], today: str
) -> BehaviorScores:
    method = "llm-chat+web" if papers else "llm-chat"  # +web only when retrieved papers were shown
    first = searches[0] if searches else None
    if isinstance(answer, Rejected):
        return BehaviorScores(
            key=b.key, date=today, method=method, search=first, searches=searches, papers=papers, rejected=answer.reason
        )
    by_number = {n.mechanism: n for n in answer.novelty}
    novelty = {m.key: _novelty(by_number[n], papers) for n, m in enumerate(b.mechanisms, 1)}
    impact = None
    if answer.impact:
        i = answer.impact
        impact = ImpactScore(
            score=i.score,
            rationale=i.rationale,
            recommendation=i.recommendation,
            dimensions=ImpactDimensions(
                importance=i.importance, builders=i.builders, tractability=i.tractability, null_risk=i.null_risk
            ),
        )
    return BehaviorScores(
        key=b.key,
        impact=impact,
        novelty=novelty,
        method=method,
        date=today,
        search=first,
        searches=searches,
        papers=papers,
    )


def _warnings(survivors: list[CandidateBehavior], grounding) -> list[str]:
    bare = [(b.key, grounding[b.key][2]) for b in survivors if not grounding[b.key][0]]
    if not bare:
        return []
    return [
        f"web search gave no paper for {len(bare)} of {len(survivors)} behavior(s) ({bare[0][1]}): "
        "those were scored with method llm-chat"
    ]
