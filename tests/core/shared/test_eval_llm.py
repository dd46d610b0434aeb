"""``make eval-llm``'s own logic, without a model: which flows it builds from which inputs, and how
it counts a flow's traces (eval/llm.py; the flows themselves run against a real server only there)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "eval"))
import llm as eval_llm  # noqa: E402


def test_a_shared_vault_it_cannot_find_is_one_line_before_any_flow(tmp_path):
    with pytest.raises(SystemExit) as stopped:
        eval_llm.flows(tmp_path / "work", {"proximity", "structure-eggs1"}, tmp_path / "nowhere")
    message = str(stopped.value)
    assert message.startswith("eval-llm: no eggs1/ in ") and "SHARED_VAULTS=DIR" in message
    assert not (tmp_path / "work").exists()  # refused before anything was copied


def test_every_flow_is_built_on_a_copy_in_the_order_the_table_shows(tmp_path):
    shared = tmp_path / "shared"
    for name in ("covid1", "eggs1"):
        shutil.copytree(REPO / "examples" / "vault", shared / name)
    work = tmp_path / "work"
    work.mkdir()
    flows = eval_llm.flows(work, set(eval_llm.FLOWS + eval_llm.MORE_FLOWS), shared, "http://127.0.0.1:1/v1")
    assert [f.name.split(" (")[0] for f in flows] == [
        "prox adjudicate + label",
        "hypograph proximity",
        "hypograph library, 2 rounds",
        "hypograph batch --into",
        "hypograph structure",
        "hypograph structure",
        "hypograph structure",
    ]
    assert all(work in f.root.parents or f.root.parent == work for f in flows)
    assert (work / "structure-eggs1" / "hypotheses").is_dir() and not (work / "structure-eggs1" / ".hypograph").exists()


def trace(folder: Path, seq: int, name: str, outcome: str = "answered", validation: str = "valid") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    record = {"outcome": outcome, "attempt": 1, "usage": {"prompt_tokens": 10, "completion_tokens": "5"}}
    if outcome == "answered":
        record |= {"validation": validation, "response_format": "json_object"}
    (folder / f"{seq:04d}-{name}.json").write_text(json.dumps(record))


def test_a_question_asked_again_in_halves_is_no_fallback_and_a_rejected_half_is(tmp_path):
    runs = tmp_path / "state" / ".hypograph" / "traces" / "dedup_verdicts" / "run01"
    cut = "the answer was cut off at its budget of 150 tokens (finish_reason: length)"
    trace(runs, 1, "pairs-H-1-H-2_H-3-H-4_H-5-H-6", validation=cut)
    trace(runs, 2, "pairs-H-1-H-2_H-3-H-4_H-5-H-6", validation=cut)
    trace(runs, 3, "pairs-H-1-H-2_H-3-H-4")
    trace(runs, 4, "pairs-H-5-H-6", validation="answer: Invalid JSON")
    trace(runs, 5, "pairs-H-7-H-8", outcome="error")
    counts = eval_llm.count(sorted(eval_llm.trace_files(tmp_path / "state")), policy_flow=True)
    assert (counts.calls, counts.failed, counts.rejected, counts.fallbacks) == (4, 1, 1, 2)
    assert counts.prompt_tokens == 40 and counts.completion_tokens == 20 and counts.modes == {"json_object"}
