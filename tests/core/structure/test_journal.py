"""The journal: save the whole plan, apply it, roll it forward after a crash (``hypograph/journal.py``).

* a plan applied in full; a crash between steps finished by ``roll_forward`` (twice: idempotent);
* roll-forward gives the saved plan even when re-planning now would give another (issue 14 point 1),
  at the journal and at the vault (``open_vault`` after a crashed 4a whose ledger changed since);
* paths leaving the input refused (absolute, ``..``, symlinked folder), nothing applied (issue 13);
* a stale journal (a file edited since the plan) refused in one line, nothing applied;
* temp files of a killed journal write cleaned.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import build_vault

import hypograph.journal as journal_module
from hypograph.errors import HypographError
from hypograph.journal import JOURNAL, Journal, Step
from hypograph.structure.dispositions import Ledger, PairDecision, apply_dispositions, read_ledger, write_ledger
from hypograph.vault.vault import open_vault


def files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` except the journal's folder, by relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".hypograph" not in p.relative_to(root).parts
    }


@pytest.fixture
def crash_after(monkeypatch):
    """``crash_after(n)``: plans die after applying their first ``n`` steps; ``crash_after(None)``
    disarms."""
    real = journal_module.apply_step

    def arm(n: int | None) -> list[Step]:
        done: list[Step] = []

        def step_then_crash(root, step):
            if n is not None and len(done) == n:
                raise RuntimeError("injected crash between journal steps")
            done.append(step)
            return real(root, step)

        monkeypatch.setattr(journal_module, "apply_step", step_then_crash)
        return done

    yield arm
    monkeypatch.undo()


def plan_from(root: Path) -> list[Step]:
    """A planner that reads its input: moves ``a.md`` and writes both notes from ``choice.txt``."""
    choice = (root / "choice.txt").read_text()
    return [Step(to="b.md", text=f"b chose {choice}\n"), Step(to="sub/a.md", text=f"a chose {choice}\n", src="a.md")]


def start(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.md").write_text("a\n")
    (root / "b.md").write_text("b\n")
    (root / "choice.txt").write_text("first")
    return root


def test_apply_moves_then_writes_and_clears(tmp_path):
    root = start(tmp_path / "in")
    journal = Journal(root)
    assert journal.apply(plan_from(root)) == 2
    assert not journal.pending() and not (root / JOURNAL).exists()
    assert not (root / "a.md").exists()
    assert (root / "sub/a.md").read_text() == "a chose first\n" and (root / "b.md").read_text() == "b chose first\n"
    assert journal.apply([Step(to="b.md", text="b chose first\n")]) == 0  # unchanged bytes: no write
    assert journal.apply([]) == 0 and not journal.pending()


def test_saved_plan_records_the_state_of_every_file_it_touches(tmp_path, crash_after):
    root = start(tmp_path / "in")
    crash_after(0)
    with pytest.raises(RuntimeError):
        Journal(root).apply(plan_from(root))
    saved = json.loads((root / JOURNAL).read_text())
    assert saved["version"] == 2
    sha = journal_module.file_state
    assert [s["before"] for s in saved["steps"]] == [
        {"b.md": sha(root / "b.md")},
        {"sub/a.md": "absent", "a.md": sha(root / "a.md")},
    ]
    assert files(root)["a.md"] == b"a\n"  # nothing applied yet


def test_crash_between_steps_is_rolled_forward_once(tmp_path, crash_after):
    root = start(tmp_path / "in")
    expected_root = start(tmp_path / "expected")
    Journal(expected_root).apply(plan_from(expected_root))

    done = crash_after(1)
    with pytest.raises(RuntimeError, match="injected"):
        Journal(root).apply(plan_from(root))
    assert len(done) == 1 and Journal(root).pending()
    assert (root / "a.md").exists() and not (root / "sub/a.md").exists()  # the move not done yet

    crash_after(None)
    assert Journal(root).roll_forward() == 1
    assert not Journal(root).pending()
    assert files(root) == files(expected_root)
    assert Journal(root).roll_forward() == 0  # nothing left: a second roll-forward changes nothing
    assert files(root) == files(expected_root)


def test_crash_inside_a_move_is_rolled_forward(tmp_path):
    """Moved, not yet rewritten (a crash between ``os.replace`` and the write): still a known state."""
    root = start(tmp_path / "in")
    steps = plan_from(root)
    journal = Journal(root)
    journal.path.parent.mkdir(parents=True)
    journal.path.write_text(json.dumps({"version": 2, "steps": journal._plan(steps)}))
    (root / "sub").mkdir()
    os.replace(root / "a.md", root / "sub/a.md")
    assert journal.roll_forward() == 2
    assert (root / "sub/a.md").read_text() == "a chose first\n"


def test_roll_forward_finishes_the_saved_plan_not_a_new_one(tmp_path, crash_after):
    """Between the crash the input changed so that re-planning would decide otherwise: rolling
    forward must still complete the plan that was half applied (else the files disagree)."""
    root = start(tmp_path / "fresh")
    crash_after(1)
    with pytest.raises(RuntimeError):
        Journal(root).apply(plan_from(root))
    (root / "choice.txt").write_text("second")
    crash_after(None)
    Journal(root).roll_forward()
    assert (root / "b.md").read_text() == "b chose first\n"
    assert (root / "sub/a.md").read_text() == "a chose first\n"  # the saved plan, not "second"


def test_open_vault_completes_a_crashed_merge_though_the_ledger_changed(tmp_path, crash_after):
    """4a merges H-1 and H-2, dies after writing the survivor; a person then records KEEP for the
    pair. Opening the vault must finish the merge that was half written (the survivor already
    lists H-2 in merged_from), not leave H-2 active beside a survivor that claims it."""
    root = build_vault(tmp_path / "vault")
    ledger = Ledger(
        pairs={
            "H-1|H-2": PairDecision(
                pair=("H-1", "H-2"), decision="MERGE", rationale="Same claim twice.", decided_by="human"
            )
        }
    )
    write_ledger(root, ledger)
    crash_after(1)
    with pytest.raises(RuntimeError):
        apply_dispositions(open_vault(root), read_ledger(root))
    ledger.pairs["H-1|H-2"] = PairDecision(
        pair=("H-1", "H-2"), decision="KEEP", rationale="Changed my mind.", decided_by="human"
    )
    write_ledger(root, ledger)
    crash_after(None)

    vault = open_vault(root)  # no re-run: just reading rolls the plan forward
    h2 = vault.nodes["H-2"]
    assert h2.meta["state"] == "merged" and h2.path.parent == Path("hypotheses/merged")
    assert [str(x) for x in vault.nodes["H-1"].meta["merged_from"]] == [h2.link]
    assert not (root / JOURNAL).exists()
    assert apply_dispositions(vault, read_ledger(root)).files_changed == 0  # whole and consistent


@pytest.mark.parametrize("bad", ["/etc/passwd-copy", "../outside.md", "sub/../../outside.md", "linked/x.md", ""])
@pytest.mark.parametrize("field", ["to", "src"])
def test_paths_leaving_the_input_are_refused(tmp_path, bad, field):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = start(tmp_path / "in")
    (root / "linked").symlink_to(outside)
    before = files(root)
    step = Step(to=bad, text="x") if field == "to" else Step(to="c.md", text="x", src=bad)
    with pytest.raises(HypographError) as err:
        Journal(root).apply([Step(to="b.md", text="changed\n"), step])
    assert str(root / JOURNAL) in str(err.value) and repr(bad) in str(err.value)
    assert "\n" not in str(err.value)
    assert files(root) == before and not (root / JOURNAL).exists()
    assert list(outside.iterdir()) == []

    # The same plan arriving as a saved journal (a vault received from someone else).
    (root / JOURNAL).parent.mkdir(exist_ok=True)
    absent = {step.to: "absent", **({step.src: "absent"} if step.src else {})}
    record = {"to": step.to, "src": step.src, "text": "x", "before": absent}
    (root / JOURNAL).write_text(
        json.dumps(
            {
                "version": 2,
                "steps": [{"to": "b.md", "src": None, "text": "changed\n", "before": {"b.md": "absent"}}, record],
            }
        )
    )
    with pytest.raises(HypographError, match="journal.json"):
        open_vault(root)
    assert files(root) == before and list(outside.iterdir()) == []


def test_a_symlinked_file_leading_outside_is_refused_and_stays_a_link(tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("keep me\n")
    root = start(tmp_path / "in")
    (root / "link.md").symlink_to(outside)
    with pytest.raises(HypographError, match="link.md.*outside the input"):
        Journal(root).apply([Step(to="b.md", text="changed\n"), Step(to="link.md", text="new\n")])
    assert outside.read_text() == "keep me\n" and (root / "link.md").is_symlink()
    assert (root / "b.md").read_text() == "b\n"


def test_a_symlinked_file_inside_is_written_through_and_never_moved(tmp_path):
    root = start(tmp_path / "in")
    (root / "notes").mkdir()
    (root / "notes" / "real.md").write_text("real\n")
    (root / "link.md").symlink_to("notes/real.md")
    Journal(root).apply([Step(to="link.md", text="new\n")])
    assert (root / "link.md").is_symlink() and (root / "notes" / "real.md").read_text() == "new\n"
    with pytest.raises(HypographError, match="is a symlink; moving it"):
        Journal(root).apply([Step(to="moved.md", text="x\n", src="link.md")])
    assert (root / "link.md").is_symlink() and not (root / "moved.md").exists()


def test_stale_journal_is_refused_and_nothing_applied(tmp_path, crash_after):
    root = start(tmp_path / "in")
    crash_after(0)
    with pytest.raises(RuntimeError):
        Journal(root).apply(plan_from(root))
    crash_after(None)
    (root / "a.md").write_text("a, edited by hand after the crash\n")
    before = files(root)
    with pytest.raises(HypographError) as err:
        Journal(root).roll_forward()
    msg = str(err.value)
    assert "\n" not in msg and str(root / JOURNAL) in msg and "a.md changed since the plan" in msg
    assert files(root) == before and Journal(root).pending()


def test_old_or_broken_journal_is_refused_in_one_line(tmp_path):
    root = start(tmp_path / "in")
    (root / JOURNAL).parent.mkdir()
    for text in [
        '{"steps": [{"from": "a.md", "to": "b.md", "text": "x"}]}',
        "{not json",
        '{"version": 2, "steps": [{"to": 1}]}',
    ]:
        (root / JOURNAL).write_text(text)
        with pytest.raises(HypographError, match="unreadable journal") as err:
            Journal(root).roll_forward()
        assert "\n" not in str(err.value)
    assert (root / "a.md").read_text() == "a\n"


def test_move_onto_an_existing_file_is_refused_before_anything_is_written(tmp_path):
    root = start(tmp_path / "in")
    with pytest.raises(HypographError, match="already exists"):
        Journal(root).apply([Step(to="a.md", text="a2\n"), Step(to="b.md", text="x", src="a.md")])
    assert (root / "a.md").read_text() == "a\n" and not Journal(root).pending()


def test_leftover_journal_temp_files_are_cleaned(tmp_path):
    root = start(tmp_path / "in")
    (root / ".hypograph").mkdir()
    leftover = root / ".hypograph" / ".journal.json.abc123.tmp"
    leftover.write_text('{"version": 2, "st')
    other = root / ".hypograph" / "keep.tmp"
    other.write_text("")
    Journal(root).apply([Step(to="b.md", text="b2\n")])
    assert not leftover.exists() and other.exists()


def test_custom_journal_name(tmp_path):
    root = start(tmp_path / "in")
    journal = Journal(root, "state/batch.json")
    assert journal.path == root / "state/batch.json"
    assert journal.apply([Step(to="b.md", text="b2\n")]) == 1 and not journal.path.exists()
