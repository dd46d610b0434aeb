"""An accepted answer as the three files published together: hypotheses.json, registry.json and
hypotheses.md. Pure: the same round always gives the same bytes, so a replay after a crash
publishes exactly what the crashed run would have.

The controller labels H1, H2, … in returned order; H1 is ``tester_primary``, the rest
``alternative``; every record is ``status: new``, ``confidence: unassessed``, with the policy's
initial budget as an immutable creation allocation (``budget_accounting: not_started``).
"""

from __future__ import annotations

from hypograph.case.config import UNIT
from hypograph.case.package import json_text, rev_dir, sha_text

CANDIDATE_FIELDS = (
    "title",
    "mechanism",
    "rationale",
    "distinction",
    "source_ids",
    "interpretation_ids",
    "expected_evidence",
    "falsifying_evidence",
    "open_questions",
)
MD_SPECIAL = set("\\`*_[]<>|~!#$&{}")


def paths(revision: int) -> dict[str, str]:
    d = rev_dir("hypotheses", revision)
    return {
        "hypotheses": f"{d}/hypotheses.json",
        "hypothesis_registry": f"{d}/registry.json",
        "hypotheses_summary": f"{d}/hypotheses.md",
        "hypothesis_policy": f"{d}/policy.json",
        "hypothesis_context": f"{d}/context.json",
        "dispatch": f"{d}/dispatch.json",
    }


def records(candidates: list[dict], revision: int, initial_budget: int) -> list[dict]:
    out = []
    for n, c in enumerate(candidates, 1):
        out.append(
            {
                "id": f"H{n}",
                "analysis_revision": revision,
                "position": n,
                "role": "tester_primary" if n == 1 else "alternative",
                "status": "new",
                "confidence": "unassessed",
                **{k: c[k] for k in CANDIDATE_FIELDS},
                "budget_allocation": {"initial": initial_budget, "unit": UNIT},
                "budget_accounting": "not_started",
            }
        )
    return out


def assemble(round_doc: dict, round_path: str, context: dict, context_text: str) -> dict[str, str]:
    """{path: text} of hypotheses.json, registry.json and hypotheses.md for a confirmed round."""
    rev = context["analysis_revision"]
    policy = context["policy"]
    p = paths(rev)
    hyps = records(round_doc["answer"]["hypotheses"], rev, policy["initial_budget"])
    hyp_doc = {
        "package_id": context["package_id"],
        "analysis_revision": rev,
        "attempt_id": round_doc["attempt_id"],
        "prompt_version": context["prompt_version"],
        "bindings": {
            "policy": context["bindings"]["policy"],
            "context": {"path": p["hypothesis_context"], "sha256": sha_text(context_text)},
            "round": {"path": round_path, "sha256": sha_text(json_text(round_doc))},
        },
        "hypotheses": hyps,
    }
    hyp_text = json_text(hyp_doc)
    registry = {
        "package_id": context["package_id"],
        "analysis_revision": rev,
        "max_hypotheses": policy["max_hypotheses"],
        "created_count": len(hyps),
        "remaining_slots": policy["max_hypotheses"] - len(hyps),
        "next_id": f"H{len(hyps) + 1}",
        "creations": [
            {
                "id": h["id"],
                "analysis_revision": rev,
                "origin": {"artifact": p["hypotheses"], "sha256": sha_text(hyp_text), "pointer": f"/hypotheses/{i}"},
                "budget_allocation": h["budget_allocation"],
            }
            for i, h in enumerate(hyps)
        ],
    }
    return {
        p["hypotheses"]: hyp_text,
        p["hypothesis_registry"]: json_text(registry),
        p["hypotheses_summary"]: summary(hyp_doc, context),
    }


def escape(text) -> str:
    """One line of Markdown-inert text: newlines become spaces, markup characters are escaped."""
    flat = " ".join(str(text).split())
    return "".join(f"\\{c}" if c in MD_SPECIAL else c for c in flat)


def summary(hyp_doc: dict, context: dict) -> str:
    """hypotheses.md: deterministic (no dates), every case-derived string escaped."""
    lines = [
        f"# Initial hypotheses, analysis revision {hyp_doc['analysis_revision']}",
        "",
        f"Package `{escape(hyp_doc['package_id'])}`, attempt `{escape(hyp_doc['attempt_id'])}`, "
        f"prompt {hyp_doc['prompt_version']}. Possible causes, untested: none is a confirmed root cause.",
        "",
        f"Question: {escape(context['question'])}",
        "",
    ]
    for h in hyp_doc["hypotheses"]:
        lines += [
            f"## {h['id']}: {escape(h['title'])}",
            "",
            f"- role: {h['role']}; status: {h['status']}; confidence: {h['confidence']}",
            f"- budget: {h['budget_allocation']['initial']} {h['budget_allocation']['unit']} "
            f"(accounting {h['budget_accounting']})",
            f"- mechanism: {escape(h['mechanism'])}",
            f"- rationale: {escape(h['rationale'])}",
            f"- distinction: {escape(h['distinction'])}",
            f"- sources: {escape(', '.join(h['source_ids']))}",
            f"- statements: {escape(', '.join(h['interpretation_ids']))}",
        ]
        for key in ("expected_evidence", "falsifying_evidence", "open_questions"):
            lines.append(f"- {key.replace('_', ' ')}:")
            lines += [f"  - {escape(x)}" for x in h[key]] or ["  - (none)"]
        lines.append("")
    return "\n".join(lines)
