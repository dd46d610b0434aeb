"""Tests that bite (issue 14): each guarantee the README leans on, tested so that it fails, every
time, when the mechanism behind it is removed — not only when a later run happens to notice.

1. the journal is rolled forward by ``load_corpus`` itself (``open_vault``'s roll-forward is in
   ``test_journal.py``), even when the ledger changed so that re-planning would decide otherwise;
2. an atomic write replaces the file (a new inode, via ``os.replace``): a reader holding the old
   file keeps reading the old bytes whole;
3. ``unmerge`` puts the restored node at its id's place among the named members;
4. check 5 flags a merged node its survivor's ``merged_from`` does not list (and nothing else);
5. minting holds the vault lock until the node file exists (a second mint blocks meanwhile), and a
   second file with an id already present is refused whatever its title.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
import time
from pathlib import Path

import pytest
from conftest import SHARED_VAULTS, build_vault, copy_tree, node_markdown

import hypograph.journal as journal_module
from hypograph import atomic
from hypograph.errors import HypographError
from hypograph.hypotheses import load_corpus
from hypograph.journal import JOURNAL
from hypograph.structure.checks import all_checks
from hypograph.structure.dispositions import Ledger, PairDecision, apply_dispositions, read_ledger, write_ledger
from hypograph.structure.unmerge import unmerge
from hypograph.vault import mint
from hypograph.vault.mint import LOCK_NAME, create_node
from hypograph.vault.nodes import link_target
from hypograph.vault.vault import open_vault


def real_vault(tmp_path: Path, name: str) -> Path:
    src = SHARED_VAULTS / name
    if not (src / "hypotheses").is_dir():
        pytest.skip(f"{src} is not available")
    return copy_tree(src, tmp_path / name)


# -- 1. load_corpus rolls an interrupted journal forward ------------------------------------------


@pytest.fixture
def crash_after_first_step(monkeypatch):
    """Journal plans die after applying their first step; returns a function disarming that."""
    real = journal_module.apply_step
    done = []

    def step_then_crash(root, step):
        if done:
            raise RuntimeError("injected crash between journal steps")
        done.append(step)
        return real(root, step)

    monkeypatch.setattr(journal_module, "apply_step", step_then_crash)
    return lambda: monkeypatch.setattr(journal_module, "apply_step", real)


def test_load_corpus_completes_a_crashed_merge_though_the_ledger_changed(tmp_path, crash_after_first_step):
    """4a merges H-1 and H-2 and dies after writing the survivor; a person then records KEEP. The
    next proximity read (``load_corpus``, no ``open_vault`` involved) must finish the saved plan:
    H-2 leaves the active set, as the survivor's merged_from already claims."""
    root = build_vault(tmp_path / "vault")
    write_ledger(
        root,
        Ledger(
            pairs={
                "H-1|H-2": PairDecision(
                    pair=("H-1", "H-2"), decision="MERGE", rationale="Same claim twice.", decided_by="human"
                )
            }
        ),
    )
    with pytest.raises(RuntimeError, match="injected"):
        apply_dispositions(open_vault(root), read_ledger(root))
    assert (root / JOURNAL).exists()
    write_ledger(
        root,
        Ledger(
            pairs={
                "H-1|H-2": PairDecision(
                    pair=("H-1", "H-2"), decision="KEEP", rationale="Changed my mind.", decided_by="human"
                )
            }
        ),
    )
    crash_after_first_step()  # disarm

    corpus = load_corpus(root)
    assert not (root / JOURNAL).exists()
    assert corpus.ids == ["H-1", "H-3", "H-4"]  # H-2 moved to hypotheses/merged/ by the saved plan
    assert (root / "hypotheses/merged/H-2 - Varroa mites transmit deformed wing virus.md").exists()
    vault = open_vault(root, roll_forward=False)
    assert vault.nodes["H-2"].meta["state"] == "merged"
    assert link_target(vault.nodes["H-2"].meta["merged_into"]) == "H-1"


def test_load_corpus_refuses_a_stale_journal_and_reads_nothing(tmp_path, crash_after_first_step):
    """The roll-forward's refusal reaches the caller: no corpus is built from a half-written vault."""
    root = build_vault(tmp_path / "vault")
    write_ledger(
        root,
        Ledger(
            pairs={
                "H-1|H-2": PairDecision(
                    pair=("H-1", "H-2"), decision="MERGE", rationale="Same claim twice.", decided_by="human"
                )
            }
        ),
    )
    with pytest.raises(RuntimeError, match="injected"):
        apply_dispositions(open_vault(root), read_ledger(root))
    crash_after_first_step()
    h2 = root / "hypotheses/H-2 - Varroa mites transmit deformed wing virus.md"
    h2.write_text(h2.read_text() + "Edited by hand after the crash.\n")
    with pytest.raises(HypographError, match="changed since the plan"):
        load_corpus(root)
    assert (root / JOURNAL).exists() and h2.exists()


# -- 2. atomic writes replace the file --------------------------------------------------------------

OLD = "old line\n" * 2000
NEW = "new text\n" * 3000


def test_a_reader_holding_the_old_file_reads_it_whole(tmp_path):
    path = tmp_path / "node.md"
    path.write_text(OLD)
    inode = path.stat().st_ino
    with open(path, encoding="utf-8") as reader:  # opened before the write, read after it
        first = reader.read(10)
        assert atomic.write_text(path, NEW) is True
        assert first + reader.read() == OLD
    assert path.read_text() == NEW
    assert path.stat().st_ino != inode  # a new file took the name; the old one was never touched
    assert [p.name for p in tmp_path.iterdir()] == ["node.md"]  # no temp file left


def test_an_unchanged_write_keeps_the_file_itself(tmp_path):
    path = tmp_path / "node.md"
    path.write_text(OLD)
    os.utime(path, (1_000_000, 1_000_000))
    before = path.stat()
    assert atomic.write_text(path, OLD) is False
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (before.st_ino, before.st_mtime_ns, before.st_size)
    assert [p.name for p in tmp_path.iterdir()] == ["node.md"]


@pytest.mark.parametrize("new", [OLD[:-1] + "X", OLD + "more\n", "new\n"])
def test_any_difference_is_written(tmp_path, new):
    """Same size with one byte changed, a longer file, a shorter one: each is a change."""
    path = tmp_path / "node.md"
    path.write_text(OLD)
    assert atomic.write_text(path, new) is True
    assert path.read_text() == new


def test_a_difference_past_the_first_megabyte_is_written(tmp_path):
    big = "x" * (1 << 20) + "tail\n"
    path = tmp_path / "big.txt"
    path.write_text(big)
    changed = big[:-2] + "X\n"
    assert atomic.write_text(path, changed) is True and path.read_text() == changed
    assert atomic.write_text(path, changed) is False


def test_a_write_that_fails_half_way_leaves_the_old_file_and_no_temp_file(tmp_path):
    path = tmp_path / "node.md"
    path.write_text(OLD)
    inode = path.stat().st_ino

    def half_then_fail(fh):
        fh.write(NEW[:100].encode())
        raise OSError("disk full")

    with pytest.raises(HypographError, match="node.md: cannot write"):  # one line naming the file
        atomic.write_atomic(path, half_then_fail)
    assert path.read_text() == OLD and path.stat().st_ino == inode
    assert [p.name for p in tmp_path.iterdir()] == ["node.md"]


def test_the_temp_file_is_hidden_beside_the_target(tmp_path):
    """Beside it, so ``os.replace`` stays on one file system; hidden and named after it, so a reader
    listing nodes skips it and the journal's cleaner finds the leftovers of its own file."""
    path = tmp_path / "journal.json"
    seen = []
    atomic.write_atomic(path, lambda fh: seen.extend(os.listdir(tmp_path)))
    assert len(seen) == 1 and re.fullmatch(r"\.journal\.json\.[^.]+\.tmp", seen[0]), seen


def test_a_new_file_gets_the_mode_open_would_give_and_missing_folders(tmp_path):
    path = tmp_path / "a" / "b" / "new.json"
    assert atomic.write_json(path, {"z": 1, "a": ["é"]}) is True
    assert path.read_text(encoding="utf-8") == '{\n  "z": 1,\n  "a": [\n    "é"\n  ]\n}\n'
    assert path.stat().st_mode & 0o777 == 0o666 & ~atomic._umask()
    assert atomic.write_json(path, {"z": 1, "a": ["é"]}) is False


def test_umask_is_read_without_changing_it():
    previous = os.umask(0o027)
    try:
        assert atomic._umask() == 0o027
        assert os.umask(0o027) == 0o027  # still in force after reading it
    finally:
        os.umask(previous)


# -- 3. unmerge places the restored node at its id's place ----------------------------------------------


def test_unmerge_puts_the_node_among_the_named_members_by_id(tmp_path):
    """covid1: HC-1 lists H-1, H-5 and the residual H-6; H-2 is merged into H-1. Restored, H-2 sits
    between H-1 and H-5 — lower than another named member, so appending would put it out of order."""
    root = real_vault(tmp_path, "covid1")
    assert unmerge(root, "H-2") == ("H-2", "H-1")
    vault = open_vault(root)
    hc = vault.nodes["HC-1"]
    assert [link_target(x) for x in hc.meta["hypotheses"]] == ["H-1", "H-2", "H-5", "H-6"]
    assert hc.body.index("[[H-1 ") < hc.body.index("[[H-2 ") < hc.body.index("[[H-5 ") < hc.body.index("[[H-6 ")
    h2 = vault.nodes["H-2"]
    assert h2.meta["state"] == "active" and h2.path.parent == Path("hypotheses") and "merged_into" not in h2.meta
    assert link_target(h2.meta["cluster"]) == "HC-1"
    assert "merged_from" not in vault.nodes["H-1"].meta
    checks = all_checks(vault, None)
    assert checks[2] == [] and checks[3] == [] and checks[4] == []
    assert read_ledger(root).pairs["H-1|H-2"].decision == "KEEP"


# -- 4. check 5: merged_from lacks an absorbed node -------------------------------------------------


def test_check_5_flags_a_merged_node_the_survivor_does_not_list(tmp_path):
    """A second node merged into H-1 (same source, so sources and locators stay right) that H-1's
    merged_from omits: only check 5's "merged_from lacks" rule is broken."""
    root = real_vault(tmp_path, "covid1")
    h1 = open_vault(root).nodes["H-1"]
    (root / "hypotheses/merged/H-99 - The market spillover stated again.md").write_text(
        node_markdown(
            {
                "type": "hypothesis",
                "id": "H-99",
                "statement": "SARS-CoV-2 first crossed into humans at the Huanan market.",
                "source": h1.meta["source"],
                "locator": "Discussion",
                "question": h1.meta["question"],
                "state": "merged",
                "merged_into": h1.link,
            }
        )
    )
    assert all_checks(open_vault(root), None) == {
        1: [],
        2: [],
        3: [],
        4: [],
        5: [("H-1", "merged_from lacks H-99")],
        6: [],
        7: [],
    }


# -- 5. minting: the lock is held until the file exists; an id is never given twice -----------------


def lock_is_free(root: Path) -> bool:
    with open(root / LOCK_NAME, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return True


def lock_waiters(lock_file: Path) -> int:
    """How many lock requests wait on ``lock_file`` (Linux /proc/locks)."""
    inode = lock_file.stat().st_ino
    return sum(
        1
        for line in Path("/proc/locks").read_text().splitlines()
        if "->" in line.split() and line.split()[-3].endswith(f":{inode}")
    )


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks")
def test_the_mint_lock_is_held_until_the_node_file_exists(tmp_path, monkeypatch):
    """The first mint is stopped while its node file is being written: the lock must still be held
    then, and a second mint must wait for it (not take the same id, whose file does not exist yet)."""
    writing, resume = threading.Event(), threading.Event()
    real = mint._create_exclusive

    def slow_create(path, text):
        if not writing.is_set():
            writing.set()
            assert resume.wait(60)
        real(path, text)

    monkeypatch.setattr(mint, "_create_exclusive", slow_create)
    results: dict[str, tuple[str, Path] | BaseException] = {}

    def mint_one(title):
        try:
            results[title] = create_node(tmp_path, "hypothesis", title)
        except BaseException as e:  # noqa: BLE001 - reported by the assertions below
            results[title] = e

    first = threading.Thread(target=mint_one, args=("First",))
    first.start()
    try:
        assert writing.wait(60), "the first mint never wrote its file"
        assert not lock_is_free(tmp_path), "the mint lock was released before the node file was written"
        second = threading.Thread(target=mint_one, args=("Second",))
        second.start()
        deadline = time.monotonic() + 60
        while lock_waiters(tmp_path / LOCK_NAME) == 0:  # handshake: the second mint waits in flock
            assert "Second" not in results, f"the second mint did not wait: {results['Second']}"
            assert time.monotonic() < deadline, "the second mint never waited for the lock"
            time.sleep(0.01)
        assert "Second" not in results
    finally:
        resume.set()
        first.join(60)
    second.join(60)
    assert results == {
        "First": ("H-1", Path("hypotheses/H-1 - First.md")),
        "Second": ("H-2", Path("hypotheses/H-2 - Second.md")),
    }
    assert sorted(p.name for p in (tmp_path / "hypotheses").iterdir()) == ["H-1 - First.md", "H-2 - Second.md"]


@pytest.mark.parametrize(
    "existing", ["hypotheses/H-1 - Taken.md", "hypotheses/merged/H-1 - Absorbed long ago.md", "hypotheses/H-1.md"]
)
def test_an_id_already_present_is_refused_whatever_its_title(tmp_path, monkeypatch, existing):
    """If the count were ever stale (another tool minting without the lock), the new node must not
    become a second H-1 just because its title — and so its filename — differs."""
    (tmp_path / existing).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / existing).write_text(node_markdown({"type": "hypothesis", "id": "H-1", "statement": "taken"}))
    monkeypatch.setattr(mint, "highest_id", lambda root, prefix: 0)
    with pytest.raises(HypographError, match="H-1.*already"):
        create_node(tmp_path, "hypothesis", "A different title", {"statement": "new"})
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.md")) == [existing]
    assert not any(p.name.endswith(".tmp") for p in tmp_path.rglob("*"))


def test_an_id_prefix_of_another_is_not_taken(tmp_path, monkeypatch):
    """H-12 present does not make H-1 taken (the id ends at a non-digit)."""
    (tmp_path / "hypotheses").mkdir()
    (tmp_path / "hypotheses/H-12 - Other.md").write_text(node_markdown({"type": "hypothesis", "id": "H-12"}))
    monkeypatch.setattr(mint, "highest_id", lambda root, prefix: 0)
    assert create_node(tmp_path, "hypothesis", "New")[0] == "H-1"


def test_new_bytes_reach_the_disk_before_the_replace_and_unchanged_bytes_are_never_flushed(tmp_path, monkeypatch):
    """fsync, then os.replace: a crash leaves the old file or the whole new one. A re-run writing the
    same bytes changes nothing, and does not wait for the disk to store a copy it then deletes."""
    events = []
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: events.append("fsync"))
    real_replace = os.replace
    monkeypatch.setattr(atomic.os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b)))
    path = tmp_path / "graph.json"
    assert atomic.write_text(path, "first\n") is True
    assert atomic.write_text(path, "second\n") is True
    assert events == ["fsync", "replace", "fsync", "replace"]
    events.clear()
    mtime = path.stat().st_mtime_ns
    assert atomic.write_text(path, "second\n") is False
    assert events == [] and path.stat().st_mtime_ns == mtime and os.listdir(tmp_path) == ["graph.json"]


def test_a_held_lock_makes_the_impatient_caller_busy_and_nothing_else(tmp_path):
    """``file_lock(path, busy)`` raises ``busy`` when another holder has the lock, and only then: an
    error raised inside the locked block is that error, not a busy lock."""
    from hypograph.locks import file_lock

    path = tmp_path / ".hypograph" / "case.lock"
    busy = RuntimeError("another dispatch holds the case lock")
    with file_lock(path):
        with pytest.raises(RuntimeError) as err, file_lock(path, busy):
            pass
        assert err.value is busy
    with pytest.raises(BlockingIOError, match="inside"), file_lock(path, busy):
        raise BlockingIOError("inside the block")
    with file_lock(path, busy):  # released by the block above
        pass
    (tmp_path / "link.lock").symlink_to(path)
    with pytest.raises(HypographError, match=r"link\.lock: lock file is a symlink"), file_lock(tmp_path / "link.lock"):
        pass
