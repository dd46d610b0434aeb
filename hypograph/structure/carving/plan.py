"""A cluster 4b will create, as decided (by the model or offline) before any id is minted; saved
whole in the carve file so an interrupted run completes it without deciding again.

Prose may name the members minted for the cluster before they have ids: ``constructed_token(k)``
(its k-th constructed member, from 1) and ``RESIDUAL_TOKEN``; ``resolve`` replaces them with the
ids once minted."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

RESIDUAL_TOKEN = "⟦residual⟧"
TOKEN_RE = re.compile(r"⟦(constructed (\d+)|residual)⟧")


def constructed_token(k: int) -> str:
    return f"⟦constructed {k}⟧"


def resolve(text: str, constructed: list[str], residual: str | None) -> str:
    """``text`` with the placeholders of minted members replaced by their ids (``constructed``:
    the ids of the cluster's constructed members in plan order; ``residual``: the residual's id).
    A placeholder whose member does not exist (yet) is left as it is."""

    def one(m: re.Match) -> str:
        if m.group(2):
            k = int(m.group(2))
            return constructed[k - 1] if 1 <= k <= len(constructed) else m.group(0)
        return residual or m.group(0)

    return TOKEN_RE.sub(one, text)


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
    residual_question: str | None = None  # the residual's own question, if not the cluster's
    constructed: list[dict] = field(default_factory=list)  # {"title", "statement", "reason", "question"}
