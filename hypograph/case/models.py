"""The records of a case package: catalogue, interpretation, the model's candidates.

A source's ``kind`` decides what it may ground: human observations, reports and comments are
data; technical facts may support alternatives; assumptions, external expectations and unread
implementation references can never ground a hypothesis alone.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

SOURCE_KINDS = (
    "human_observation",
    "report",
    "comment",
    "technical_fact",
    "assumption",
    "external_expectation",
    "implementation_reference",
)
OBSERVATION_KINDS = frozenset({"human_observation", "report", "comment"})
SourceKind = Literal[
    "human_observation",
    "report",
    "comment",
    "technical_fact",
    "assumption",
    "external_expectation",
    "implementation_reference",
]
ANCHORS = ("first_known_divergence", "failure_stage", "reported_behavior")  # H1's anchor, in order
ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$"
# Fields a model might add that only the controller may set.
CONTROLLER_FIELDS = (
    "id",
    "h_id",
    "hypothesis_id",
    "label",
    "position",
    "priority",
    "rank",
    "status",
    "confidence",
    "probability",
    "likelihood",
    "budget",
    "budget_allocation",
    "initial_budget",
    "budget_accounting",
    "role",
    "tester_primary",
    "patch",
    "patch_instructions",
    "fix",
    "tool",
    "tools",
    "tool_request",
    "tool_requests",
    "tool_calls",
    "actions",
    "command",
    "commands",
)


class Source(BaseModel):
    """One entry of the canonical case catalogue."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=ID_PATTERN)
    kind: SourceKind
    title: str = Field(min_length=1)
    summary: str = ""
    origin: str | None = None  # the input it was taken from (a path inside the package)
    member: str | None = None  # the archive member, when ``origin`` is a ZIP archive kept whole
    read: bool = True  # an implementation reference nobody has read grounds nothing

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        data = handler(self)
        if data.get("member") is None:  # only archive members carry it: other catalogues stay as before
            data.pop("member", None)
        return data


class Catalogue(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sources: list[Source]

    @field_validator("sources")
    @classmethod
    def _unique(cls, sources: list[Source]) -> list[Source]:
        seen: set[str] = set()
        for s in sources:
            if s.id in seen:
                raise ValueError(f"source id {s.id!r} appears twice")
            seen.add(s.id)
        return sources

    def by_id(self) -> dict[str, Source]:
        return {s.id: s for s in self.sources}


class Statement(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1)
    source_ids: list[str] = []


class Bindings(BaseModel):
    """What an interpretation was made from, by sha256: the catalogue file and every input."""

    model_config = ConfigDict(extra="forbid")
    catalogue: dict[str, str]  # {"path", "sha256"}
    inputs: dict[str, str]  # path inside the package -> sha256


class Interpretation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    analysis_revision: int = Field(ge=1)
    question: str = Field(min_length=1)
    statements: list[Statement]
    first_known_divergence: Statement | None = None
    failure_stage: Statement | None = None
    reported_behavior: Statement | None = None
    confirmed: bool = False
    confirmation: dict[str, Any] | None = None
    bindings: Bindings

    def aliases(self) -> list[tuple[str, str, Statement]]:
        """(``I1``…, JSON pointer into interpretation.json, statement): accepted statements in
        order, then the anchors that are present."""
        items = [(f"/statements/{i}", s) for i, s in enumerate(self.statements)]
        items += [(f"/{name}", getattr(self, name)) for name in ANCHORS if getattr(self, name) is not None]
        return [(f"I{n}", pointer, s) for n, (pointer, s) in enumerate(items, 1)]

    def anchor(self) -> tuple[str, str] | None:
        """(alias, anchor name) H1 must cite: first known divergence, else failure stage, else
        reported behavior."""
        by_pointer = {p: a for a, p, _s in self.aliases()}
        for name in ANCHORS:
            if getattr(self, name) is not None:
                return by_pointer[f"/{name}"], name
        return None


class Candidate(BaseModel):
    """One proposal as the model must write it: text and references, nothing the controller sets."""

    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=1, max_length=300)
    mechanism: str = Field(min_length=1)
    rationale: str = Field(min_length=1)
    distinction: str = Field(min_length=1)
    source_ids: list[str] = Field(min_length=1)
    interpretation_ids: list[str] = Field(min_length=1)
    expected_evidence: list[str] = Field(min_length=1)
    falsifying_evidence: list[str] = Field(min_length=1)
    open_questions: list[str]  # required like the other eight (case batches), though it may be empty

    @model_validator(mode="before")
    @classmethod
    def _no_controller_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if str(key).lower() in CONTROLLER_FIELDS:
                    raise ValueError(
                        f"field {key!r} is not accepted from the model: ids, positions, priorities, "
                        "statuses, confidence, budgets, patches and tool requests are the controller's"
                    )
        return data

    @field_validator("title", "mechanism", "rationale", "distinction")
    @classmethod
    def _nonblank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hypotheses: list[Candidate]

    @model_validator(mode="before")
    @classmethod
    def _no_controller_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if key != "hypotheses":
                    raise ValueError(f"field {key!r} is not accepted from the model: answer with 'hypotheses' only")
        return data
