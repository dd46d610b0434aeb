"""What a ``hypograph`` command shows on a terminal, in one place: ``run(name, command)``.

The command runs with a ``TerminalSink`` on ``hypograph.progress`` and with ``sys.stderr`` (and
``sys.stdout`` when it is the terminal too) guarded, so that:

* what runs now — the command, a run, a Dagster step, a domain stage, a bar — is one *status line*,
  written without a newline and erased (``\\r\\033[K``) before anything else prints: a stage's
  line, an error, the summary. No line is ever glued to it, and none of it is left once the
  command returns;
* an asset ends in one line, ``similarity_graph: done in 0.22 s (graph blocks: 1 block)``: the
  steps of a graph-backed asset together, the domain stages that ran inside them in brackets. An
  op that materializes nothing and a domain stage outside any step leave no line;
* the checks a run evaluated are one line, ``5 checks pass`` or ``1 of 7 checks failed:
  every_active_hypothesis_in_one_cluster``, printed after the run's assets and before anything
  else prints;
* ``hypograph proximity: done in 7.92 s`` ends a command that exits 0 and nothing ends one that
  does not: a failure's cause is the first line after the stage lines.

Off a terminal, or with ``--quiet``, ``run`` is not used and none of this is printed.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from hypograph.progress import Event, counted, describe, reporting, what_ended

ERASE = "\r\033[K"  # back to the line's start, the line cleared


@dataclass
class _Open:
    name: str
    step: bool
    text: str  # its status line


def checks_line(checks: list[tuple[str, bool]]) -> str:
    """``7 checks pass``, or ``1 of 7 checks failed: name`` naming every failed one."""
    failed = list(dict.fromkeys(name for name, passed in checks if not passed))
    if not failed:
        return f"{counted(len(checks), 'checks')} pass" if len(checks) > 1 else "1 check passes"
    return f"{len(failed)} of {counted(len(checks), 'checks')} failed: {', '.join(failed)}"


class TerminalSink:
    """Draws progress events on ``stream`` (a terminal) as the module says; ``before_output()`` is
    called before anything else writes to that terminal, ``after_output(text)`` after."""

    def __init__(self, stream, width: int = 30, flush_first: tuple = ()):
        self.stream, self.width, self.flush_first = stream, width, flush_first
        self._open: list[_Open] = []  # the stages running now, innermost last
        self._status = False  # a status line is on the terminal, the cursor at its end
        self._midline = False  # other output left the cursor in the middle of a line
        self._notes: list[str] = []  # domain stages ended inside the current asset's steps
        self._checks: list[tuple[str, bool]] = []  # evaluated since the last checks line
        self._lock = threading.RLock()

    def __call__(self, event: Event) -> None:
        with self._lock:
            if event.kind == "start":
                self._open.append(_Open(event.name, event.step, describe(event)))
                self._redraw()
            elif event.kind == "advance":
                if self._open and self._open[-1].name == event.name and event.total and event.seconds >= 0.5:
                    filled = min(self.width, self.width * event.done // max(event.total, 1))
                    bar = "#" * filled + "." * (self.width - filled)
                    self._open[-1].text = f"{event.name} [{bar}] {event.done}/{event.total} {event.unit}".rstrip()
                    self._redraw()
            elif event.kind == "end":
                self._end(event)
            elif event.kind == "check":
                self._checks.append((event.name, bool(event.done)))
            elif event.kind == "asset":
                notes, self._notes = self._notes, []
                self.line(f"{event.name}: done in {event.seconds:.2f} s" + (f" ({'; '.join(notes)})" if notes else ""))

    def _end(self, event: Event) -> None:
        names = [o.name for o in self._open]
        if event.name in names:  # a stage closes the stages (a failed step) still open inside it
            del self._open[len(names) - 1 - names[::-1].index(event.name) :]
        if not event.step:
            if any(o.step for o in self._open):
                self._notes.append(f"{event.name}: {what_ended(event)}")
            else:  # outside any step (a run ended): its checks in one line
                self._notes = []
                self.flush_checks()
        self._redraw()

    def line(self, text: str) -> None:
        """``text`` as a line of its own, the status line redrawn below it."""
        with self._lock:
            self.clear()
            self._write(text + "\n")
            self._redraw()

    def flush_checks(self) -> None:
        with self._lock:
            if self._checks:
                checks, self._checks = self._checks, []
                self.clear()
                self._write(checks_line(checks) + "\n")

    def before_output(self) -> None:
        """Something else is about to print: the checks' line first, the status line erased."""
        with self._lock:
            self.flush_checks()
            self.clear()

    def after_output(self, text: str) -> None:
        with self._lock:
            self._midline = not text.endswith("\n")

    def clear(self) -> None:
        with self._lock:
            if self._status:
                self._write(ERASE)
                self._status = False

    def finish(self, done: str | None) -> None:
        """The command returned: its checks' line, then ``done`` as its last line (None: nothing)."""
        with self._lock:
            self._open.clear()
            self.flush_checks()
            self.clear()
            if done is not None:
                self._write(("\n" if self._midline else "") + done + "\n")
                self._midline = False

    def _redraw(self) -> None:
        if not self._open:
            self.clear()
            return
        text = self._open[-1].text[: self._columns() - 1]  # a wrapped line could not be erased
        if self._midline:
            self._write("\n")
            self._midline = False
        self._write((ERASE if self._status else "") + text)
        self._status = True

    def _columns(self) -> int:
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            columns = 0
        return columns if columns > 1 else 80  # a new pseudo-terminal says 0

    def _write(self, text: str) -> None:
        try:
            for other in self.flush_first:  # what is buffered for the same terminal goes first
                other.flush()
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed terminal: progress is a courtesy, never a failure
            pass


class _Guarded:
    """A stream whose writes first let the sink erase its status line (everything else delegated)."""

    def __init__(self, stream, sink: TerminalSink):
        self._stream, self._sink = stream, sink

    def write(self, text: str) -> int:
        if not text:
            return 0
        self._sink.before_output()
        n = self._stream.write(text)
        self._sink.after_output(text)
        return n

    def writelines(self, lines) -> None:
        for text in lines:
            self.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def run(name: str, command: Callable[[], int]) -> int:
    """``command()`` (a handler returning the exit code) with its progress drawn on ``sys.stderr``,
    a terminal, as the module says; ``name`` is the command's stage (``hypograph proximity``)."""
    err, out = sys.stderr, sys.stdout
    same_terminal = _isatty(out)
    sink = TerminalSink(err, flush_first=(out,) if same_terminal else ())
    sys.stderr = _Guarded(err, sink)
    if same_terminal:
        sys.stdout = _Guarded(out, sink)
    started, code = time.perf_counter(), None
    try:
        with reporting(sink):
            sink(Event("start", name))
            code = command()
        return code
    finally:
        sys.stderr, sys.stdout = err, out
        sink.finish(f"{name}: done in {time.perf_counter() - started:.2f} s" if code == 0 else None)


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
