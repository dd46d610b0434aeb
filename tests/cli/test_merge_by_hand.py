"""A person's MERGE in ``proximity/review.json`` for hypotheses already clustered (issue 11):
applied as a deliberate exception (the absorbed node leaves its cluster, said in the cluster's
body, the structure map and the CLI summary) or refused loudly, never silently ignored.

Driven through the ``hypograph`` command as a user would (its ``main``, in this process:
tests/support/cli_helper.py): structure the example vault (H-1 "A multi-decade drought from c. 1250 BCE undermined the
palace economies" and H-22 "Generations of failing rains starved the palaces of the surplus they
ran on" end in different clusters, answering different questions; they are not a duplicate pair
by the vectors, and a person's MERGE still applies), record the MERGE, structure again.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helper import in_process
from conftest import EXAMPLE_VAULT, copy_tree, write_vault_node
from test_structure import clusters, failures, hypotheses, members

from hypograph.llm import OfflinePolicy
from hypograph.proximity.adjudicate import Decision
from hypograph.structure.dispositions import read_ledger, run_dispositions
from hypograph.structure.structure_map import MAP
from hypograph.vault.nodes import link_target
from hypograph.vault.vault import open_vault


def review(root: Path, a: str, b: str, verdict: str = "MERGE") -> None:
    (root / "proximity" / "review.json").write_text(
        json.dumps(
            [
                {
                    "pair": [a, b],
                    "verdict": verdict,
                    "rationale": "Same claim about the drought, in other words.",
                    "reviewer": "ana",
                }
            ]
        )
    )


def full_copy(src: Path, dst: Path) -> Path:
    """A copy with the vault's proximity output and tool state (ledger, baseline) kept."""
    return Path(shutil.copytree(src, dst, ignore=shutil.ignore_patterns("dagster")))


def cluster_of(root: Path, h_id: str) -> str | None:
    return next((hc.id for hc in clusters(root).values() if h_id in members(hc)), None)


@pytest.fixture(scope="module")
def structured(tmp_path_factory):
    """The example vault structured once, offline, through the CLI."""
    root = copy_tree(EXAMPLE_VAULT, tmp_path_factory.mktemp("by-hand") / "vault")
    proc = in_process("structure", root, "--llm", "offline")
    assert proc.returncode == 0, proc.stderr
    assert "wait for your review" in proc.stdout
    return root


@pytest.fixture(scope="module")
def merged(structured, tmp_path_factory):
    root = full_copy(structured, tmp_path_factory.mktemp("merged") / "vault")
    before = {h: cluster_of(root, h) for h in ("H-1", "H-22")}
    left = [m for m in members(clusters(root)[before["H-22"]]) if m != "H-22"]
    review(root, "H-1", "H-22")
    proc = in_process("structure", root, "--llm", "offline")
    assert proc.returncode == 0, proc.stderr
    return root, before, left, proc


def test_a_human_merge_of_clustered_hypotheses_is_applied(merged):
    root, before, left, proc = merged
    assert before["H-1"] != before["H-22"] and before["H-22"] is not None
    hyps = hypotheses(root)
    survivor, absorbed = hyps["H-1"], hyps["H-22"]
    assert absorbed.meta["state"] == "merged" and absorbed.path.parent == Path("hypotheses/merged")
    assert absorbed.meta["merged_into"] == survivor.link and "cluster" not in absorbed.meta
    assert survivor.meta["merged_from"] == [absorbed.link] and survivor.meta["state"] == "active"
    assert cluster_of(root, "H-1") == before["H-1"]  # the survivor stays where it was

    hc = clusters(root)[before["H-22"]]
    assert members(hc) == left  # the others, in their frozen order
    assert [link_target(link) for link in hc.body.splitlines() if link.startswith("![[")] == left
    assert "Changed by hand: H-22 left this cluster, merged into H-1" in hc.body
    text = (root / MAP).read_text(encoding="utf-8")
    assert "## Changed by hand" in text and f"[[{hc.path.stem}]]: H-22 left this cluster" in text
    d = read_ledger(root).pairs["H-1|H-22"]
    assert d.decision == "MERGE" and d.decided_by == "human" and "deliberate exception" in d.rationale
    assert failures(root) == {}

    # The user is told, and the pair has left the review queue.
    assert f"MERGE H-1/H-22 from proximity/review.json applied: H-22 merged into H-1 and left {hc.id}" in proc.stdout
    assert "1 hypothesis merged into a survivor" in proc.stdout
    assert 'H-22 "Generations of failing' not in proc.stdout.split("wait for your review")[-1]


def test_an_applied_merge_is_not_also_said_to_decide_nothing(merged):
    """Step 4 applied the MERGE, then proximity ran again on the vault it left (H-22 merged): the
    review is carried out, not a decision that 'decides nothing now' (which the command printed
    first, above the line saying it was applied)."""
    _, _, _, proc = merged
    assert "MERGE H-1/H-22 from proximity/review.json applied" in proc.stdout
    assert "decides nothing now" not in proc.stderr, proc.stderr


def test_structuring_again_changes_nothing(merged, tmp_path):
    root = full_copy(merged[0], tmp_path / "vault")
    proc = in_process("structure", root, "--llm", "offline")
    assert proc.returncode == 0, proc.stderr
    assert "nothing to change" in proc.stdout and "H-1/H-22" not in proc.stdout


def test_a_merge_unmerged_by_hand_is_refused_loudly(merged, tmp_path):
    root = full_copy(merged[0], tmp_path / "vault")
    assert in_process("unmerge", root, "H-22").returncode == 0  # review.json still says MERGE
    proc = in_process("structure", root, "--llm", "offline")
    assert proc.returncode == 0, proc.stderr
    assert "MERGE H-1/H-22 from proximity/review.json refused: the pair was kept apart by hand" in proc.stdout
    assert hypotheses(root)["H-22"].meta["state"] == "active"
    assert failures(root) == {}


def test_a_merge_that_would_leave_a_cluster_with_one_member_is_refused(structured, tmp_path):
    """H-30 sits alone in a cluster with its residual (the Linear B question): it cannot leave it."""
    root = full_copy(structured, tmp_path / "vault")
    assert len(members(clusters(root)[cluster_of(root, "H-30")])) == 2
    human = Decision(
        pair=("H-29", "H-30"),
        similarity=0.5,
        verdict="MERGE",
        rationale="Same claim.",
        recommended_action="Retire H-30",
        decided_by="human",
    )
    report = run_dispositions(open_vault(root), [human], None, OfflinePolicy())
    (line,) = report.refused
    assert line.startswith("MERGE H-29/H-30 from proximity/review.json refused: H-30 would leave")
    assert "1 member(s)" in line and report.by_hand == [] and report.merged == {}
    assert hypotheses(root)["H-30"].meta["state"] == "active" and failures(root) == {}


def test_a_review_naming_no_current_hypothesis_is_reported_not_dropped(structured, tmp_path):
    root = full_copy(structured, tmp_path / "vault")
    gone = "H-900"  # a hypothesis dropped since the review (an id no hypothesis has is refused: issue 47)
    write_vault_node(
        root, gone, "Cold snaps kill clusters", folder="hypotheses/dropped", state="dropped", drop_reason="off topic"
    )
    review(root, "H-1", gone, "KEEP")
    proc = in_process("structure", root, "--llm", "offline")
    assert proc.returncode == 0, proc.stderr
    assert (
        f"warning: proximity/review.json: KEEP H-1/{gone} decides nothing now: {gone} is not a current hypothesis"
        in proc.stderr
    )
