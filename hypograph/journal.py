"""Save the whole plan, then apply it, and roll it forward after a crash.

A plan is a list of ``Step``: move ``src`` to ``to`` (if ``src`` is given and still there), then
write ``text`` to ``to`` atomically. ``Journal.apply(steps)`` checks every path, saves the whole
plan to one JSON file (atomically), applies the steps one by one and removes the file. If the
process dies in between, the next ``Journal.roll_forward()`` finishes the saved plan instead of
letting a caller re-plan from a half-written state. Every step is idempotent, so a plan can be
rolled forward twice (or by two readers at once) with the same result.

Safety (every refusal is one ``HypographError`` line naming the journal file and the step, and
nothing is applied):

* every path is one ``hypograph.paths`` lets the tool write: relative, no ``..``, no symlinked
  folder on the way, no symlink resolving outside, a name that fits (a journal may come from a
  vault received by git, zip or sync);
* the saved plan records, for every file it will rewrite or move, the sha256 of its bytes at plan
  time (or ``"absent"``); a roll-forward refuses a plan when a file is in neither the state it was
  planned against nor a state the plan itself produces — someone edited it since, so finishing
  the old plan would overwrite their edit.

Journal file format (``version`` 2)::

    {"version": 2, "steps": [{"to": "a.md", "src": null, "text": "...",
                              "before": {"a.md": "<sha256 hex>" | "absent"}}, ...]}

Bottom layer: imports only ``atomic``, ``paths`` and ``errors``.
"""

from __future__ import annotations

import hashlib
import json
import os
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from hypograph.atomic import STATE_MAX, open_regular, read_regular, sync_tree, write_json, write_text
from hypograph.errors import HypographError
from hypograph.paths import OURS, check_folder, unsafe, write_target

ABSENT = "absent"
JOURNAL = Path(OURS) / "journal.json"  # default place, relative to the root
VERSION = 2


@dataclass(frozen=True)
class Step:
    """Write ``text`` to ``to``, after moving ``src`` there first (paths relative to the root)."""

    to: str
    text: str
    src: str | None = None

    @property
    def moves(self) -> bool:
        return self.src is not None and self.src != self.to


def sha_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_state(path: Path) -> str:
    """sha256 of the file's bytes, or ``"absent"``."""
    try:  # a regular file only: a FIFO there is one line, never waited on
        with os.fdopen(open_regular(path, follow=True), "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except FileNotFoundError:
        return ABSENT


class Journal:
    """One plan file under ``root`` (default ``.hypograph/journal.json``)."""

    def __init__(self, root: Path, name: str | Path = JOURNAL):
        self.root = Path(root)
        self.name = Path(name)
        self.path = self.root / self.name

    def pending(self) -> bool:
        """Whether a saved plan waits to be rolled forward."""
        return self.path.exists()

    def apply(self, steps: list[Step]) -> int:
        """Check, save, apply and clear ``steps``. Returns the number of files changed.

        Refuses (nothing written) a step leaving the root or a move onto an existing file.
        """
        if not steps:
            return 0
        for step in steps:
            self._check_paths(step)
            if step.moves and (self.root / step.src).exists() and (self.root / step.to).exists():
                raise HypographError(
                    f"{self.path}: step to {step.to}: already exists; refusing to overwrite it with {step.src}"
                )
        self._clean_temp_files()
        write_json(self.path, {"version": VERSION, "steps": self._plan(steps)})
        changed = self._run(steps)
        self._clear()
        return changed

    def roll_forward(self) -> int:
        """Finish the plan of a run that died half-way, if any. Returns files changed."""
        if not self.path.exists():
            return 0
        records = self._load()
        if records is None:
            return 0  # rolled forward (or finished) by another process meanwhile
        steps = [Step(to=r["to"], text=r["text"], src=r.get("src")) for r in records]
        for step in steps:
            self._check_paths(step)
        self._check_not_stale(steps, records)
        changed = self._run(steps)
        self.path.unlink(missing_ok=True)
        return changed

    # -- plan ------------------------------------------------------------------------------------

    def _plan(self, steps: list[Step]) -> list[dict]:
        """Each step with the state of its files just before it (later steps see earlier ones)."""
        state: dict[str, str] = {}

        def now(rel: str) -> str:
            if rel not in state:
                state[rel] = file_state(self.root / rel)
            return state[rel]

        records = []
        for step in steps:
            before = {step.to: now(step.to)}
            if step.moves:
                before[step.src] = now(step.src)
                state[step.src] = ABSENT
            state[step.to] = sha_text(step.text)
            records.append({"to": step.to, "src": step.src, "text": step.text, "before": before})
        return records

    def _load(self) -> list[dict] | None:
        try:
            data = json.loads(read_regular(self.path, STATE_MAX, follow=True))
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise HypographError(
                f"{self.path}: unreadable journal of an interrupted run; inspect and remove it"
            ) from None
        try:
            if data.get("version") != VERSION:
                raise ValueError("version")
            records = data["steps"]
            for r in records:
                if not (
                    isinstance(r["to"], str)
                    and isinstance(r["text"], str)
                    and isinstance(r.get("src"), (str, type(None)))
                    and isinstance(r["before"], dict)
                ):
                    raise ValueError("step")
        except (KeyError, TypeError, ValueError, AttributeError):
            raise HypographError(
                f"{self.path}: unreadable journal of an interrupted run; inspect and remove it"
            ) from None
        return records

    def _check_not_stale(self, steps: list[Step], records: list[dict]) -> None:
        """Every file must be in a state the plan knows: as planned against, or as written by it."""
        allowed: dict[str, set[str]] = {}
        for step, record in zip(steps, records, strict=True):
            before = record["before"]
            for rel in _paths(step):
                if rel not in before:
                    raise HypographError(
                        f"{self.path}: step to {step.to}: no recorded state for {rel}; inspect and remove the journal"
                    )
                allowed.setdefault(rel, set()).add(before[rel])
            allowed[step.to].add(sha_text(step.text))
            if step.moves:
                allowed[step.src].add(ABSENT)
                allowed[step.to].add(before[step.src])  # moved, not yet rewritten
        for step in steps:
            for rel in _paths(step):
                if file_state(self.root / rel) not in allowed[rel]:
                    raise HypographError(
                        f"{self.path}: step to {step.to}: {rel} changed since the plan "
                        "was saved; not rolling it forward (inspect and remove the journal)"
                    )

    def _check_paths(self, step: Step) -> None:
        """Every path of ``step`` one the tool may write (``hypograph.paths.unsafe``), and the
        journal's own folder no symlink."""
        check_folder(self.root, self.name.parent)
        for rel in _paths(step):
            problem = unsafe(self.root, rel, moving=step.moves and rel == step.src)
            if problem:
                raise HypographError(f"{self.path}: step to {step.to!r}: path {rel!r} {problem}")

    # -- apply -----------------------------------------------------------------------------------

    def _run(self, steps: list[Step]) -> int:
        """Apply the steps, then make them durable at once (one ``syncfs``, not an fsync per file:
        until the plan file is removed, a crash rolls the plan forward again)."""
        token = _DEFERRED_SYNC.set(True)
        try:
            changed = sum(apply_step(self.root, step) for step in steps)
        finally:
            _DEFERRED_SYNC.reset(token)
        if changed:
            sync_tree(self.root)
        return changed

    def _clear(self) -> None:
        self.path.unlink(missing_ok=True)  # another reader may have rolled the same plan forward
        self._clean_temp_files()

    def _clean_temp_files(self) -> None:
        """Temp files of a journal write killed half-way (``.journal.json.*.tmp``).

        Only ``apply`` cleans: its callers hold the input's write lock, so no other writer is
        saving a plan; a lock-free reader's roll-forward could delete a writer's temp file."""
        if self.path.parent.is_dir():
            for tmp in self.path.parent.glob(f".{self.path.name}.*.tmp"):
                tmp.unlink(missing_ok=True)


def _paths(step: Step) -> tuple[str, ...]:
    return (step.to,) if step.src is None else (step.to, step.src)


_DEFERRED_SYNC: ContextVar[bool] = ContextVar("journal_deferred_sync", default=False)


def apply_step(root: Path, step: Step) -> int:
    """Move ``src`` to ``to`` (if still there), then write ``text`` to ``to`` atomically.

    Moving first and rewriting second means a file is never in two places and never missing.
    Returns 1 if anything changed, else 0.
    """
    dst = write_target(root, step.to)  # a symlinked node (inside the input) is written through
    moved = False
    if step.moves:
        src = root / step.src
        if src.exists():
            if dst.exists():
                raise HypographError(f"{step.to}: already exists; refusing to overwrite it with {step.src}")
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(src, dst)
                moved = True
            except FileNotFoundError:
                if not dst.exists():  # not moved by a concurrent roll-forward either: really gone
                    raise
    # inside a plan, one sync after the last step makes them all durable (``Journal._run``)
    return int(write_text(dst, step.text, fsync=not _DEFERRED_SYNC.get()) or moved)
