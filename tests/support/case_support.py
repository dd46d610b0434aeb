"""Builders for case-batch tests: a small confirmed case, valid and invalid model answers, and a
builder wired to a local stub endpoint (tests/support/llm_stub.py) through the real openai client."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path

from llm_stub import API_KEY, MODEL, answer
from pydantic import SecretStr

from hypograph.case import CaseGateway, CaseStore, HypothesisBuilder, HypothesisConfig
from hypograph.case.models import Source, Statement
from hypograph.case.revision import NewRevision, add_revision, confirm
from hypograph.llm.config import LLMConfig

T0 = dt.datetime(2030, 1, 1, 12, 0, tzinfo=dt.UTC)

INPUTS = {
    "grower-report.md": "# Report\nThe tomato plants in house 3 wilt every afternoon since 2 June.\n",
    "sensor-log.csv": "time,substrate_moisture\n2030-06-02T14:00,18%\n",
    "notes/comment.txt": "Irrigation valve 3B was replaced on 1 June.\n",
}
SOURCES = [
    Source(
        id="OBS1",
        kind="human_observation",
        title="Afternoon wilting in house 3",
        summary="Plants wilt from about 14:00 and recover overnight.",
        origin="grower-report.md",
    ),
    Source(
        id="REP1", kind="report", title="Grower's report", summary="Wilting began on 2 June.", origin="grower-report.md"
    ),
    Source(
        id="COM1",
        kind="comment",
        title="Maintenance note",
        summary="Valve 3B replaced on 1 June.",
        origin="notes/comment.txt",
    ),
    Source(
        id="TEC1",
        kind="technical_fact",
        title="Substrate moisture log",
        summary="18% at 14:00 on 2 June.",
        origin="sensor-log.csv",
    ),
    Source(id="ASM1", kind="assumption", title="Heat is the usual cause", summary="Assumed heat stress."),
    Source(id="EXP1", kind="external_expectation", title="Supplier expectation", summary="Valves need no calibration."),
    Source(
        id="IMP1", kind="implementation_reference", title="Valve controller firmware", summary="Not read.", read=False
    ),
]
STATEMENTS = [
    Statement(text="Plants in house 3 wilt every afternoon and recover overnight.", source_ids=["OBS1"]),
    Statement(text="The wilting started on 2 June.", source_ids=["REP1"]),
    Statement(text="Substrate moisture fell to 18% by 14:00.", source_ids=["TEC1"]),
]
ANCHORS = {
    "first_known_divergence": Statement(
        text="Wilting first seen the day after valve 3B was replaced.", source_ids=["REP1", "COM1"]
    ),
    "reported_behavior": Statement(text="Afternoon wilting in house 3.", source_ids=["OBS1"]),
}
ANCHOR = "I4"  # three statements, then the first known divergence


def make_case(root: Path, name: str = "tomatoes", confirmed: bool = True, **changes) -> Path:
    """A case package ``root/name`` with one revision (confirmed unless told otherwise)."""
    case_dir = Path(root) / name
    revision = NewRevision(
        changes.get("question", "Why do the tomato plants in house 3 wilt every afternoon?"),
        changes.get("statements", STATEMENTS),
        changes.get("sources", SOURCES),
        changes.get("anchors", ANCHORS),
        changes.get("inputs", INPUTS),
    )
    add_revision(case_dir, revision)
    if confirmed:
        confirm(case_dir, by="tester", now=T0)
    return case_dir


CAUSES = ["valve flow", "root rot", "sensor drift", "salt build-up", "pump timing", "drain block", "heat"]


def candidate(n: int, **over) -> dict:
    base = {
        "title": f"Cause number {n}: {CAUSES[n % 7]}",
        "mechanism": f"Mechanism {n}: "
        + [
            "the new valve delivers less water",
            "roots decay and take up less",
            "the moisture probe misreads",
            "salts raise osmotic stress",
            "the pump runs too early",
            "drains hold water",
            "heat",
        ][n % 7],
        "rationale": "The timing matches the observations.",
        "distinction": f"Only candidate {n} predicts this.",
        "source_ids": ["OBS1", "COM1"] if n == 1 else ["TEC1"],
        "interpretation_ids": ["I1", ANCHOR] if n == 1 else ["I3"],
        "expected_evidence": ["Flow at valve 3B is below the set point."],
        "falsifying_evidence": ["Flow at valve 3B is normal."],
        "open_questions": ["Was the valve calibrated?"],
    }
    return {**base, **over}


def valid_answer(count: int = 3) -> dict:
    return {"hypotheses": [candidate(n) for n in range(1, count + 1)]}


def changed(doc: dict, index: int, **over) -> dict:
    out = copy.deepcopy(doc)
    out["hypotheses"][index].update(over)
    return out


def reply(doc: dict):
    return answer(json.dumps(doc))


class Clock:
    """A settable clock for due times (dispatches never sleep, so tests never do either)."""

    def __init__(self, now: dt.datetime = T0):
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **kw) -> None:
        self.now += dt.timedelta(**kw)


def endpoint(url: str, timeout: float = 2.0) -> LLMConfig:
    return LLMConfig(model=MODEL, base_url=url, api_key=SecretStr(API_KEY), timeout=timeout)


def builder_for(case_dir: Path, urls: list[str], config: HypothesisConfig | None = None, **kw) -> HypothesisBuilder:
    config = config or HypothesisConfig()
    gateway = CaseGateway([endpoint(u) for u in urls], config.reasks)
    return HypothesisBuilder(CaseStore(Path(case_dir).parent), gateway, config, **kw)


def package_id(case_dir: Path) -> str:
    return json.loads((Path(case_dir) / "manifest.json").read_text())["package_id"]


def files(root: Path, skip_state: bool = True) -> dict[str, bytes]:
    """relative path -> bytes of every file (tool state under .hypograph/ skipped)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(Path(root).rglob("*"))
        if p.is_file() and not (skip_state and p.relative_to(root).parts[0] == ".hypograph")
    }
