"""The creation registry and the hooked journal of a case batch, field by field (case batches: "the
immutable registry records max_hypotheses, created_count, remaining_slots, next_id and every
creation's ID, origin artifact/hash/JSON pointer and allocated budget"). Found by mutation
testing: the end-to-end tests check the registry against itself, so a misspelt key passed."""

from __future__ import annotations

import json

import pytest
from case_support import valid_answer

from hypograph.case.batch import assemble
from hypograph.case.config import UNIT
from hypograph.case.package import sha_text
from hypograph.case.publish import CrashAt, HookedJournal, SimulatedCrash
from hypograph.journal import Step

CONTEXT = {
    "analysis_revision": 2,
    "package_id": "pkg-7",
    "prompt_version": "hypotheses_v1",
    "question": "Why?",
    "policy": {"initial_budget": 100, "max_hypotheses": 5},
    "bindings": {"policy": {"path": "analysis/hypotheses/0002/policy.json", "sha256": "ab"}},
}
ROUND = {"attempt_id": "attempt-1", "answer": valid_answer(3)}


def test_the_registry_records_every_creation_with_its_origin_and_budget():
    files = assemble(ROUND, "analysis/hypotheses/0002/rounds/attempt-1.json", CONTEXT, "{}\n")
    hyp_path, reg_path = "analysis/hypotheses/0002/hypotheses.json", "analysis/hypotheses/0002/registry.json"
    assert sorted(files) == sorted([hyp_path, reg_path, "analysis/hypotheses/0002/hypotheses.md"])
    hyp_text = files[hyp_path]
    assert json.loads(files[reg_path]) == {
        "package_id": "pkg-7",
        "analysis_revision": 2,
        "max_hypotheses": 5,
        "created_count": 3,
        "remaining_slots": 2,
        "next_id": "H4",
        "creations": [
            {
                "id": f"H{n}",
                "analysis_revision": 2,
                "origin": {"artifact": hyp_path, "sha256": sha_text(hyp_text), "pointer": f"/hypotheses/{n - 1}"},
                "budget_allocation": {"initial": 100, "unit": UNIT},
            }
            for n in (1, 2, 3)
        ],
    }
    doc = json.loads(hyp_text)
    assert (doc["package_id"], doc["analysis_revision"], doc["attempt_id"]) == ("pkg-7", 2, "attempt-1")
    assert [(h["id"], h["analysis_revision"], h["position"]) for h in doc["hypotheses"]] == [
        ("H1", 2, 1),
        ("H2", 2, 2),
        ("H3", 2, 3),
    ]


def test_a_crash_point_names_itself():
    hook = CrashAt("publish:wrote:registry.json")
    hook("publish:journal-saved")
    with pytest.raises(SimulatedCrash) as crash:
        hook("publish:wrote:registry.json")
    assert crash.value.args == ("publish:wrote:registry.json",)
    assert hook.seen == ["publish:journal-saved", "publish:wrote:registry.json"]


def test_the_hooked_journal_counts_the_files_it_changed(tmp_path):
    (tmp_path / "same.json").write_text("same\n")
    seen = []
    journal = HookedJournal(tmp_path, "state/journal.json", seen.append)
    steps = [Step(to="a.json", text="a\n"), Step(to="b.json", text="b\n"), Step(to="same.json", text="same\n")]
    assert journal.apply(steps) == 2
    assert seen == ["journal-saved", "wrote:a.json", "wrote:b.json", "wrote:same.json"]
    assert HookedJournal(tmp_path, "state/journal.json", seen.append).apply(steps) == 0
