"""The acceptance rules for a batch, as pure functions returning ``(id, reason)`` violations.

They run twice: on the model's candidates before anything is accepted (a violation rejects the
whole answer) and, as blocking checks, on a published batch. Ids are the controller's labels
``H1``, ``H2``, … (a candidate's label is its 1-based position).

Duplicates are compared after normalisation (``hypograph.text.normalise``: Unicode NFKC, case
folding, punctuation and symbols removed, whitespace collapsed): this catches presentation
differences only, not two wordings of one mechanism.
"""

from __future__ import annotations

from collections.abc import Iterable

from hypograph.case.models import OBSERVATION_KINDS
from hypograph.text import normalise

Violation = tuple[str, str]
WEAK_KINDS = ("assumption", "external_expectation")


def _label(i: int, h: dict) -> str:
    return str(h.get("id") or f"H{i + 1}")


def references(hyps: list[dict], context: dict) -> list[Violation]:
    """Every source id is in the context's catalogue, every interpretation id is one of its
    I-aliases; nothing else counts."""
    sources = {s["id"] for s in context["catalogue"]}
    aliases = {s["alias"] for s in context["statements"]}
    out: list[Violation] = []
    for i, h in enumerate(hyps):
        for sid in h.get("source_ids", []):
            if sid not in sources:
                out.append((_label(i, h), f"source_ids: {sid!r} is not a source of this case's catalogue"))
        for iid in h.get("interpretation_ids", []):
            if iid not in aliases:
                out.append(
                    (_label(i, h), f"interpretation_ids: {iid!r} is not an accepted statement (I1…I{len(aliases)})")
                )
        for key in ("source_ids", "interpretation_ids"):
            if len(set(h.get(key, []))) != len(h.get(key, [])):
                out.append((_label(i, h), f"{key}: lists an id twice"))
    return out


def grounding(hyps: list[dict], context: dict) -> list[Violation]:
    """H1 cites observation data (human observation, report or comment) and the anchor statement
    (first known divergence, else failure stage, else reported behavior); no hypothesis rests
    only on assumptions, external expectations or unread implementation references."""
    kinds = {s["id"]: s for s in context["catalogue"]}
    out: list[Violation] = []
    if not hyps:
        return out
    first = hyps[0]
    if not any(kinds.get(s, {}).get("kind") in OBSERVATION_KINDS for s in first.get("source_ids", [])):
        out.append(
            (_label(0, first), "source_ids: the first hypothesis must cite a human observation, report or comment")
        )
    anchor = context["anchor"]
    if anchor["alias"] not in first.get("interpretation_ids", []):
        out.append(
            (
                _label(0, first),
                f"interpretation_ids: the first hypothesis must cite {anchor['alias']} "
                f"({anchor['name'].replace('_', ' ')})",
            )
        )
    for i, h in enumerate(hyps):
        cited = [kinds[s] for s in h.get("source_ids", []) if s in kinds]
        if cited and all(_weak(s) for s in cited):
            out.append(
                (
                    _label(i, h),
                    "source_ids: grounded only in assumptions, external expectations or "
                    "unread implementation references",
                )
            )
    return out


def _weak(source: dict) -> bool:
    return source["kind"] in WEAK_KINDS or (
        source["kind"] == "implementation_reference" and not source.get("read", True)
    )


def duplicates(hyps: list[dict]) -> list[Violation]:
    """No two titles, and no two mechanisms, equal after normalisation."""
    out: list[Violation] = []
    for key in ("title", "mechanism"):
        seen: dict[str, str] = {}
        for i, h in enumerate(hyps):
            norm = normalise(str(h.get(key, "")))
            if norm in seen:
                out.append((_label(i, h), f"{key}: duplicates the {key} of {seen[norm]} (after normalisation)"))
            else:
                seen[norm] = _label(i, h)
    return out


def counts(hyps: list[dict], policy: dict) -> list[Violation]:
    n = len(hyps)
    if n < policy["min_hypotheses"] or n > policy["max_hypotheses"]:
        return [
            ("batch", f"{n} hypotheses; the policy asks for {policy['min_hypotheses']} to {policy['max_hypotheses']}")
        ]
    return []


def candidate_violations(hyps: list[dict], context: dict) -> list[Violation]:
    """Everything that rejects a model answer, in one list."""
    return counts(hyps, context["policy"]) + references(hyps, context) + grounding(hyps, context) + duplicates(hyps)


def describe(violations: Iterable[Violation], limit: int = 8) -> str:
    v = list(violations)
    text = "; ".join(f"{i}: {r}" for i, r in v[:limit])
    return text + (f"; and {len(v) - limit} more" if len(v) > limit else "")
