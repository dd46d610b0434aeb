"""A cluster 4b will create, as decided (by the model or offline) before any id is minted; saved
whole in the carve file so an interrupted run completes it without deciding again."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ClusterPlan:
    """A cluster to create: what 4b decided, before any id is minted."""

    title: str
    members: list[str]
    exclusivity: str
    independence: str
    justification: str
    question: str | None = None
    relevance: str | None = None
    depends_on: list[tuple[int, str]] = field(default_factory=list)  # (index of another new cluster, note)
    exhaustive: bool = False
    residual_title: str = ""
    residual_statement: str = ""
    residual_note: str = ""
    constructed: list[dict] = field(default_factory=list)  # {"title", "statement", "reason"}
