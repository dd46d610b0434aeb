"""The model request of a batch: the versioned prompt file filled with the frozen context.

All case text goes in as JSON inside ``untrusted()`` tags; the catalogue carries ids, kinds,
titles and summaries, never a source's raw payload. The attempt id (and earlier rejected
attempts' reasons) are part of the prompt, so a correction is a new question, not a cache hit.
"""

from __future__ import annotations

from importlib import resources
from string import Template

from hypograph.case.models import Answer
from hypograph.case.rules import candidate_violations, describe
from hypograph.ids import numbered_key
from hypograph.llm.client import Request, untrusted


def prompt_text(version: str) -> tuple[str, str]:
    """(system, user) templates of ``<version>.txt`` shipped in this package."""
    raw = resources.files("hypograph.case").joinpath(f"{version}.txt").read_text(encoding="utf-8")
    lines = [ln for ln in raw.splitlines() if not ln.startswith("#")]
    text = "\n".join(lines)
    _, _, rest = text.partition("=== system\n")
    system, _, user = rest.partition("=== user\n")
    return system.strip(), user.strip()


def build_request(context: dict, attempt_id: str, rejections: list[dict]) -> Request[Answer]:
    """The request for ``attempt_id``; its check rejects any answer a rule rejects."""
    system_t, user_t = prompt_text(context["prompt_version"])
    policy = context["policy"]
    values = {
        "min_hypotheses": policy["min_hypotheses"],
        "max_hypotheses": policy["max_hypotheses"],
        "anchor_alias": context["anchor"]["alias"],
        "anchor_name": context["anchor"]["name"].replace("_", " "),
        "question": untrusted("question", {}, {"question": context["question"]}),
        "catalogue": untrusted("case_catalogue", {}, {"sources": context["catalogue"]}),
        "interpretation": untrusted(
            "interpretation",
            {},
            {
                "statements": [
                    {
                        "alias": s["alias"],
                        "json_pointer": s["pointer"],
                        "text": s["text"],
                        "source_ids": s["source_ids"],
                    }
                    for s in context["statements"]
                ]
            },
        ),
        "policy": untrusted("policy", {}, policy),
        "prior": untrusted("prior_proposals", {"status": "untested"}, {"generations": context["prior_generations"]}),
        "attempt_id": attempt_id,
        "rejections": "".join(f"\nAttempt {r['attempt_id']} was rejected: {r['reason']}" for r in rejections),
    }

    def check(answer: Answer) -> None:
        violations = candidate_violations([c.model_dump() for c in answer.hypotheses], context)
        if violations:
            raise ValueError(describe(violations))

    return Request(
        name=f"hypotheses-{numbered_key(context['analysis_revision'])}-{attempt_id}",
        system=Template(system_t).substitute(values),
        user=Template(user_t).substitute(values),
        schema=Answer,
        check=check,
    )
