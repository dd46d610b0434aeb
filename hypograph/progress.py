"""Progress of long work: the domain says where a stage starts and ends (and how far it got); whoever
runs it decides where that goes. No Dagster, no third-party import: the CLI and the assets share it.

    with stage("embed", total=len(texts)) as s:      # "embed ..." when it starts
        for block in blocks:
            ...
            s.advance(len(block))                     # a bar, where the sink draws one
    # "embed: 30 in 0.41 s" when it ends (the count is total, or what advance() counted)

Every event goes to the ``hypograph.progress`` logger at INFO (a Dagster run keeps that logger's
records in its log: ``pipelines/instance.py`` names it in ``dagster.yaml``) and to each sink pushed
with ``reporting(sink)``; the CLI pushes one that prints to a terminal. Nothing is printed by default.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

LOGGER = logging.getLogger("hypograph.progress")


@dataclass
class Event:
    """``kind`` is ``start``, ``advance`` or ``end``; ``done`` counts what is finished so far (the
    count at ``end``), ``total`` what is expected (None: unknown); ``seconds`` since the start."""

    kind: str
    name: str
    done: int = 0
    total: int | None = None
    seconds: float = 0.0
    unit: str = ""


Sink = Callable[[Event], None]
_sinks: list[Sink] = []


@contextmanager
def reporting(sink: Sink) -> Iterator[None]:
    """Send every progress event to ``sink`` while the block runs (sinks nest; the newest is last)."""
    _sinks.append(sink)
    try:
        yield
    finally:
        _sinks.remove(sink)


def _emit(event: Event) -> None:
    if event.kind != "advance":
        LOGGER.info(describe(event))
    for sink in list(_sinks):
        sink(event)


def notify(event: Event) -> None:
    """``event`` to the sinks only (not the log): a stage someone else logs already (a Dagster step)."""
    for sink in list(_sinks):
        sink(event)


def _count(n: int, unit: str) -> str:
    """``1 file``, ``2 files``, ``1 hypothesis``: units are given in the plural."""
    if n == 1 and unit.endswith("s"):
        unit = unit[:-3] + "is" if unit.endswith("ses") else unit[:-1]
    return f"{n} {unit}".rstrip()


def describe(event: Event) -> str:
    """One line for a start or an end: ``embed: 30 hypotheses ...`` / ``embed: 30 hypotheses in 0.41 s``
    (``name ...`` and ``name: done in 0.41 s`` for a stage that counts nothing)."""
    if event.kind == "start":
        return (
            f"{event.name}: {_count(event.total, event.unit)} ..." if event.total is not None else f"{event.name} ..."
        )
    counted = event.done or event.total is not None or event.unit
    return f"{event.name}: {_count(event.done, event.unit) if counted else 'done'} in {event.seconds:.2f} s"


@dataclass
class Stage:
    """A running stage: ``advance(n)`` adds ``n`` to what is done; ``count`` sets the final count."""

    name: str
    total: int | None
    unit: str
    started: float = field(default_factory=time.perf_counter)
    done: int = 0
    count: int | None = None
    _last: float = 0.0

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if now - self._last >= 0.1 or (self.total is not None and self.done >= self.total):
            self._last = now  # at most ten events a second, however fine the steps
            _emit(Event("advance", self.name, self.done, self.total, now - self.started, self.unit))


@contextmanager
def stage(name: str, total: int | None = None, unit: str = "") -> Iterator[Stage]:
    """Report the block as the stage ``name``: its start, its advances and its end with the count
    (``count`` if set, else what ``advance`` counted, else ``total``) and the seconds it took. A
    failing block reports no end: the error says what happened."""
    s = Stage(name, total, unit)
    _emit(Event("start", name, 0, total, 0.0, unit))
    yield s
    done = s.count if s.count is not None else (s.done or (total or 0))
    _emit(Event("end", name, done, total, time.perf_counter() - s.started, unit))


class TerminalSink:
    """Prints each stage on ``stream``: its start line, replaced in place by its end line when
    nothing came between (one line a stage), and for a stage with a known total that runs long
    enough to watch (0.5 s), a bar redrawn in place: ``embed [#####.....] 15/30 hypotheses``."""

    def __init__(self, stream, width: int = 30):
        self.stream, self.width = stream, width
        self._open: str | None = None  # the stage whose start (or bar) is on the current line

    def __call__(self, event: Event) -> None:
        if event.kind == "advance":
            if event.total and event.seconds >= 0.5:
                filled = min(self.width, self.width * event.done // max(event.total, 1))
                bar = "#" * filled + "." * (self.width - filled)
                self._line(f"{event.name} [{bar}] {event.done}/{event.total} {event.unit}".rstrip(), event.name)
            return
        if event.kind == "start":
            self._line(describe(event), event.name)
            return
        self._line(describe(event), event.name)
        self._write("\n")
        self._open = None

    def _line(self, text: str, name: str) -> None:
        if self._open == name:
            self._write("\r\033[K" + text)  # the same stage: its line rewritten
        else:
            self._write(("\n" if self._open is not None else "") + text)
        self._open = name

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed terminal: progress is a courtesy, never a failure
            pass
