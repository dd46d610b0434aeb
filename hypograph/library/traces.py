"""Where a library invocation's traces go: ``L/.hypograph/traces/hypothesis-batch/<date>_run<NN>/r<NN>/``.

One run folder, and so one batch run index, per *invocation*: a CLI run of R rounds is one
invocation however many processes or Dagster steps carry it out. ``TraceRun(L, invocation=id)``
resolves ``id`` through ``L/.hypograph/library/invocations.json`` (under a lock), so every step
given the same id writes into the same folder and stamps the same ``runNN`` (a command passes its
id to every round's run in the run config); without an id, the object itself is the invocation. The folder
is created on first use only, so a fully cached re-run leaves no empty folder behind.

A rejected answer's traces are capped: each of its trace files past ``CAP_BYTES`` keeps its first
and last 32 KiB (as JSON text, within the cap) and its size (a 10,000-candidate answer re-asked
twice must not leave 150 MB behind). Every trace is capped when written (``hypograph.llm.trace``);
this cap is the tighter one for an answer that was of no use.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypograph.atomic import STATE_MAX, open_regular, read_regular, write_json
from hypograph.library.state import TRACE_TASK, library_state, state_dir, trace_round_dir
from hypograph.llm.client import LLMClient, Rejected, new_run_dir
from hypograph.locks import file_lock

CAP_BYTES = 64 * 1024
KEEP_INVOCATIONS = 500


class TraceRun:
    def __init__(self, root: Path, invocation: str | None = None):
        self.root = Path(root)
        self.invocation = invocation
        self._dir: Path | None = None
        self._used: set[Path] = set()

    @property
    def base(self) -> Path:
        return state_dir(self.root) / "traces" / TRACE_TASK

    @property
    def dir(self) -> Path:
        if self._dir is None:
            self._dir = self._invocation_dir() if self.invocation else new_run_dir(self.base)
        return self._dir

    def _invocation_dir(self) -> Path:
        """The run folder registered for ``self.invocation``, made and registered on first use."""
        registry = library_state(self.root) / "invocations.json"
        with file_lock(library_state(self.root) / "invocations.lock"):
            try:
                known = json.loads(read_regular(registry, STATE_MAX, follow=True))
                known = known if isinstance(known, dict) else {}
            except (FileNotFoundError, ValueError, RecursionError):
                known = {}  # a lost or damaged registry only costs a new run folder
            name = known.get(self.invocation)
            if isinstance(name, str) and name and (self.base / name).is_dir():
                return self.base / name
            folder = new_run_dir(self.base)
            known[self.invocation] = folder.name
            write_json(registry, dict(list(known.items())[-KEEP_INVOCATIONS:]))
            return folder

    @property
    def run_index(self) -> int:
        return int(self.dir.name.rsplit("run", 1)[1])

    def batch(self, date: str, round_key: str) -> str:
        """The seed's batch stamp ``<date>.run<NN>.r<NN>``."""
        return f"{date}.run{self.run_index:02d}.{trace_round_dir(self.dir, round_key).name}"

    def use(self, client: LLMClient, round_key: str) -> Path:
        """Point ``client``'s traces at this run's folder for ``round_key``; returns it."""
        d = trace_round_dir(self.dir, round_key)
        client.trace_to(d)
        self._used.add(d)
        return d

    def cap_if_rejected(self, answer, name: str) -> int:
        """If ``answer`` is Rejected, cap the trace files of request ``name``; returns how many were."""
        if not isinstance(answer, Rejected):
            return 0
        capped = 0
        for d in self._used:
            for path in d.glob(f"*-{name}.json"):
                if cap_trace(path):
                    capped += 1
        return capped


def cap_trace(path: Path, limit: int = CAP_BYTES) -> bool:
    """Replace trace ``path`` by its first and last ``limit // 2`` bytes and its size when it is larger."""
    try:
        size = path.stat().st_size
        if size <= limit:
            return False
        with os.fdopen(open_regular(path), "rb") as f:
            head = f.read(limit // 2)
            f.seek(max(size - limit // 2, limit // 2))
            tail = f.read(limit // 2)
    except OSError:
        return False
    head_text, tail_text = _within(head.decode("utf-8", "ignore"), limit // 2), tail.decode("utf-8", "ignore")
    tail_text = tail_text[len(tail_text) - len(_within(tail_text, limit // 2)) :]
    capped = {"truncated": True, "size_bytes": size, "outcome": "rejected answer (trace capped)"}
    write_json(path, {**capped, "head": head_text, "tail": tail_text})
    return True


def _within(text: str, limit: int) -> str:
    """The longest start of ``text`` whose JSON string fits ``limit`` bytes (escaping lengthens it)."""
    while True:
        encoded = len(json.dumps(text, ensure_ascii=False).encode("utf-8"))
        if encoded <= limit:
            return text
        text = text[: max(0, len(text) * limit // encoded - 64)]
