"""The journal's edges, found by mutation testing (``make mutation``): exact refusal lines, every
field of a saved step type-checked, what a plan records when one step follows another, and the
races with a concurrent roll-forward (a journal or a file gone between a check and its use)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import hypograph.journal as journal_module
from hypograph.errors import HypographError
from hypograph.journal import ABSENT, JOURNAL, Journal, Step, apply_step, sha_text


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "in"
    root.mkdir()
    (root / "a.md").write_text("a\n")
    (root / "b.md").write_text("b\n")
    return root


def saved(root: Path, *records: dict) -> Journal:
    journal = Journal(root)
    journal.path.parent.mkdir(parents=True, exist_ok=True)
    journal.path.write_text(json.dumps({"version": 2, "steps": list(records)}))
    return journal


def refusal(call) -> str:
    with pytest.raises(HypographError) as err:
        call()
    return str(err.value)


# -- what a plan records --------------------------------------------------------------------------


def test_later_steps_record_the_state_earlier_steps_leave(root):
    """A file written by step 1 is recorded by step 2 as step 1's text; a moved-away file as absent."""
    steps = [Step(to="a.md", text="a2\n"), Step(to="c.md", text="c\n", src="a.md"), Step(to="a.md", text="a3\n")]
    records = Journal(root)._plan(steps)
    assert [r["before"] for r in records] == [
        {"a.md": sha_text("a\n")},
        {"c.md": ABSENT, "a.md": sha_text("a2\n")},
        {"a.md": ABSENT},
    ]
    assert Journal(root).apply(steps) == 3
    assert (root / "a.md").read_text() == "a3\n" and (root / "c.md").read_text() == "c\n"


# -- refusals, each one exact line ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '{"steps": []}',
        '{"version": 1, "steps": []}',
        '{"version": 2}',
        '{"version": 2, "steps": [{"to": 1, "text": "x", "src": null, "before": {}}]}',
        '{"version": 2, "steps": [{"to": "b.md", "text": 1, "src": null, "before": {}}]}',
        '{"version": 2, "steps": [{"to": "b.md", "text": "x", "src": 1, "before": {}}]}',
        '{"version": 2, "steps": [{"to": "b.md", "text": "x", "src": null, "before": []}]}',
        '{"version": 2, "steps": [{"to": "b.md", "text": "x", "src": null}]}',
        '["version", 2]',
    ],
)
def test_a_journal_with_any_field_wrong_is_refused_in_one_exact_line(root, text):
    (root / JOURNAL).parent.mkdir()
    (root / JOURNAL).write_text(text)
    assert refusal(Journal(root).roll_forward) == (
        f"{root / JOURNAL}: unreadable journal of an interrupted run; inspect and remove it"
    )
    assert (root / "b.md").read_text() == "b\n"


def test_a_journal_in_another_encoding_is_refused(root):
    (root / JOURNAL).parent.mkdir()
    (root / JOURNAL).write_bytes(b'{"version": 2, "steps": [{"to": "b.md", "text": "\xe9"}]}')
    assert "unreadable journal" in refusal(Journal(root).roll_forward)


def test_a_valid_journal_with_text_beyond_ascii_is_read(root):
    journal = saved(root, {"to": "b.md", "src": None, "text": "é ü 中\n", "before": {"b.md": sha_text("b\n")}})
    assert journal.roll_forward() == 1
    assert (root / "b.md").read_text(encoding="utf-8") == "é ü 中\n"


def test_a_step_without_the_state_of_its_file_is_refused(root):
    journal = saved(root, {"to": "c.md", "src": "a.md", "text": "c\n", "before": {"c.md": ABSENT}})
    assert refusal(journal.roll_forward) == (
        f"{root / JOURNAL}: step to c.md: no recorded state for a.md; inspect and remove the journal"
    )
    assert (root / "a.md").exists() and not (root / "c.md").exists()


def test_a_stale_file_is_refused_in_one_exact_line(root):
    journal = saved(root, {"to": "b.md", "src": None, "text": "b2\n", "before": {"b.md": sha_text("other\n")}})
    assert refusal(journal.roll_forward) == (
        f"{root / JOURNAL}: step to b.md: b.md changed since the plan was saved; not rolling it forward "
        "(inspect and remove the journal)"
    )


@pytest.mark.parametrize(
    "bad, problem",
    [
        ("", "is not relative to the input"),
        ("/abs.md", "is not relative to the input"),
        ("../out.md", "leaves the input"),
        ("sub/../../out.md", "leaves the input"),
        ("sub/..", "leaves the input"),
        (".", "leaves the input"),
        ("link/x.md", "leads through the symlinked folder"),
    ],
)
def test_each_path_leaving_the_input_is_refused_with_its_reason(root, tmp_path, bad, problem):
    (tmp_path / "elsewhere").mkdir()
    (root / "link").symlink_to(tmp_path / "elsewhere")
    assert refusal(lambda: Journal(root).apply([Step(to=bad, text="x")])).startswith(
        f"{root / JOURNAL}: step to {bad!r}: path {bad!r} {problem}"
    )


def test_paths_inside_the_input_are_accepted(root):
    """A name starting with two dots is a name, not a way out (a symlinked folder, even one that
    stays inside, is refused: tests/cli/test_safety.py)."""
    (root / "sub").mkdir()
    assert Journal(root).apply([Step(to="sub/x.md", text="x\n"), Step(to="..name.md", text="y\n")]) == 2
    assert (root / "sub/x.md").read_text() == "x\n" and (root / "..name.md").read_text() == "y\n"


# -- apply_step ------------------------------------------------------------------------------------


def test_a_move_onto_an_existing_file_is_refused_naming_both(root):
    assert refusal(lambda: apply_step(root, Step(to="b.md", text="x", src="a.md"))) == (
        "b.md: already exists; refusing to overwrite it with a.md"
    )
    assert (root / "a.md").read_text() == "a\n" and (root / "b.md").read_text() == "b\n"


def test_a_move_creates_missing_folders_and_counts_as_a_change(root):
    """Moved with its text unchanged: the write changes nothing, the move is still one change."""
    assert apply_step(root, Step(to="x/y/a.md", text="a\n", src="a.md")) == 1
    assert (root / "x/y/a.md").read_text() == "a\n" and not (root / "a.md").exists()
    assert apply_step(root, Step(to="x/y/a.md", text="a\n", src="a.md")) == 0  # done already


def fake_concurrent_move(monkeypatch, moved_by_other: bool):
    """``os.replace`` of ``a.md`` finds it gone: another roll-forward moved it first (or not)."""
    real = os.replace

    def replace(src, dst):
        if Path(src).name == "a.md":
            if moved_by_other:
                real(src, dst)
            else:
                os.unlink(src)
            raise FileNotFoundError(src)
        return real(src, dst)

    monkeypatch.setattr(journal_module.os, "replace", replace)


def test_a_file_moved_meanwhile_by_another_roll_forward_is_taken_as_moved(root, monkeypatch):
    fake_concurrent_move(monkeypatch, moved_by_other=True)
    assert apply_step(root, Step(to="sub/a.md", text="a2\n", src="a.md")) == 1
    assert (root / "sub/a.md").read_text() == "a2\n"


def test_a_file_gone_and_not_moved_is_an_error(root, monkeypatch):
    fake_concurrent_move(monkeypatch, moved_by_other=False)
    with pytest.raises(FileNotFoundError):
        apply_step(root, Step(to="sub/a.md", text="a2\n", src="a.md"))
    assert not (root / "sub/a.md").exists()


# -- a concurrent roll-forward finishing first ------------------------------------------------------


def test_a_journal_gone_while_being_read_is_nothing_to_do(root, monkeypatch):
    journal = saved(root, {"to": "b.md", "src": None, "text": "b2\n", "before": {"b.md": sha_text("b\n")}})
    real = Journal._load

    def load_after_other_finished(self):
        self.path.unlink()
        return real(self)

    monkeypatch.setattr(Journal, "_load", load_after_other_finished)
    assert journal.roll_forward() == 0
    assert (root / "b.md").read_text() == "b\n"


def test_a_journal_removed_by_another_reader_after_the_steps_is_fine(root, monkeypatch):
    """Two readers roll one plan forward; the other removes the journal first: no error here."""
    real = Journal._run

    def run_then_other_clears(self, steps):
        changed = real(self, steps)
        self.path.unlink()
        return changed

    monkeypatch.setattr(Journal, "_run", run_then_other_clears)
    journal = saved(root, {"to": "b.md", "src": None, "text": "b2\n", "before": {"b.md": sha_text("b\n")}})
    assert journal.roll_forward() == 1
    assert Journal(root).apply([Step(to="a.md", text="a2\n")]) == 1
    assert not journal.pending()


def test_a_temp_file_removed_by_another_cleaner_is_fine(root, monkeypatch):
    (root / ".hypograph").mkdir()
    ghost = root / ".hypograph" / ".journal.json.gone.tmp"
    real_glob = Path.glob
    monkeypatch.setattr(Path, "glob", lambda self, pattern: [*real_glob(self, pattern), ghost])
    assert Journal(root).apply([Step(to="b.md", text="b2\n")]) == 1


def test_a_move_onto_a_symlinked_file_is_refused_as_already_there(root):
    """The link (inside the input) is a file already at the destination: the plan is refused whole,
    the link, its target and the source left as they were."""
    (root / "c.md").write_text("c\n")
    (root / "link.md").symlink_to("c.md")
    journal = Journal(root)
    with pytest.raises(HypographError) as err:
        journal.apply([Step(to="link.md", text="x\n", src="a.md")])
    assert str(err.value) == f"{journal.path}: step to link.md: already exists; refusing to overwrite it with a.md"
    assert (root / "link.md").is_symlink() and (root / "c.md").read_text() == "c\n"
    assert (root / "a.md").read_text() == "a\n"
