"""The per-round values a library round passes from step to step (and keeps in tool state).

``RoundSettings`` -> generate -> ``RoundCandidates`` -> dedup -> ``RoundDedup`` -> score ->
``RoundScores`` -> persist -> ``PersistPlan``. Candidates carry round-local keys (``c1``,
``c1.m2``); library ids are minted only when a round is persisted.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from hypograph.library.schema import Data, FiveBars, Method, Recommendation
from hypograph.library.settings import RoundSettings
from hypograph.library.state import digest

__all__ = ["RoundSettings"]  # stored in each round's candidates.json; declared with the run settings


class Skip(BaseModel):
    strategy: str
    reason: str


class CandidateMechanism(BaseModel):
    key: str
    strategy: str
    directions: list[str]
    hypothesis: str
    boring_null: str
    data: Data
    model: list[str]


class CandidateBehavior(BaseModel):
    """A generated behavior, or (given) the target: ``existing_id`` set when it is already a node."""

    key: str
    existing_id: str | None = None
    source: Literal["discover", "given"]
    discovery_strategy: str = ""
    discovery_strategy_detail: str = ""
    statement: str
    five_bars: FiveBars = Field(default_factory=FiveBars)
    gaps: list[str] = Field(default_factory=list)
    mechanisms: list[CandidateMechanism] = Field(default_factory=list)
    skipped: list[Skip] = Field(default_factory=list)


class BanlistStats(BaseModel):
    mode: Literal["full", "clustered", "empty"]
    items: int
    shown: int
    clusters: int = 0
    tokens: int


class RoundCandidates(BaseModel):
    round: str
    settings: RoundSettings
    date: str
    batch: str = Field(description="date.runNN.rNN stamped on the round's nodes")
    model: str
    banlist: BanlistStats
    gaps_grounded: list[str] = Field(default_factory=list)
    behaviors: list[CandidateBehavior]


class Verdict(BaseModel):
    """One dedup decision. ``of``: the library id or round key this candidate duplicates."""

    layer: Literal["behavior", "mechanism"]
    key: str
    verdict: Literal["new", "duplicate", "unjudged"]
    of: str | None = None
    decided_by: Literal["exact", "model", "no-neighbour", "rejected", "prefilter"]  # prefilter: older rounds
    similarity: float | None = None
    neighbours: list[str] = Field(default_factory=list)
    nuance: str = ""
    model: str = Field(default="", description="the model that judged it (decided_by model)")


class RoundDedup(BaseModel):
    round: str
    candidates_digest: str
    verdicts: list[Verdict]
    survivors: list[CandidateBehavior]
    embedder: str = Field(default="", description="the backend that chose the neighbours (sbert, or tfidf and why)")
    prompt: str = ""

    def removed(self, layer: str, by: str) -> int:
        return sum(1 for v in self.verdicts if v.layer == layer and v.verdict != "new" and v.decided_by == by)


class ImpactDimensions(BaseModel):
    importance: int = Field(ge=1, le=10)
    builders: str
    tractability: int = Field(ge=1, le=10)
    null_risk: int = Field(ge=1, le=10, description="risk of a boring null, 10 = very likely")


class ImpactScore(BaseModel):
    score: int = Field(ge=1, le=10)
    rationale: str
    recommendation: Recommendation
    dimensions: ImpactDimensions | None = None


class NoveltyScore(BaseModel):
    score: int = Field(ge=1, le=10)
    closest: str
    differentiation: str
    caveat: str = ""
    closest_source: Literal["retrieved", "memory"] | None = None
    closest_id: str = Field(default="", description="the retrieved paper's id or URL (closest_source retrieved)")


class Paper(BaseModel):
    source: str
    id: str
    title: str
    year: str = ""
    url: str = ""
    summary: str = ""


class SearchRecord(BaseModel):
    query: str
    ok: bool
    results: int = 0
    error: str = ""
    source: str = ""
    angle: str = ""


class BehaviorScores(BaseModel):
    """Scores of one surviving behavior; ``rejected`` set when the model gave no valid answer."""

    key: str
    impact: ImpactScore | None = None
    novelty: dict[str, NoveltyScore] = Field(default_factory=dict)
    method: Method = "llm-chat"
    date: str
    search: SearchRecord | None = None
    searches: list[SearchRecord] = Field(default_factory=list)
    papers: list[Paper] = Field(default_factory=list, description="the retrieved papers the referees were shown")
    rejected: str | None = None


class RoundScores(BaseModel):
    round: str
    inputs_digest: str = Field(description="dedup survivors + model + web: what these scores were computed from")
    model: str
    behaviors: list[BehaviorScores]
    warnings: list[str] = Field(default_factory=list)
    prompt: str = ""

    @property
    def digest(self) -> str:
        return digest(self.model_dump(mode="json"))


class PersistPlan(BaseModel):
    """Ids minted for a round before the library is written; ``complete`` once it was."""

    round: str
    ids: dict[str, str] = Field(default_factory=dict, description="candidate key -> minted id")
    targets: dict[str, str] = Field(default_factory=dict, description="candidate key -> existing behavior id (given)")
    notes: dict[str, str] = Field(default_factory=dict, description="existing id -> merged nuance")
    scores_digest: str = ""
    applied: list[str] = Field(default_factory=list, description="ids and notes already written to the file")
    complete: bool = False

    @property
    def added_behaviors(self) -> int:
        return sum(1 for k in self.ids if ".m" not in k)

    @property
    def added_mechanisms(self) -> int:
        return sum(1 for k in self.ids if ".m" in k)
