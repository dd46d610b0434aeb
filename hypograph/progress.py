"""Progress of long work: the domain says where a stage starts and ends (and how far it got); whoever
runs it decides where that goes. No Dagster, no third-party import: the CLI and the assets share it.

    with stage("embed", total=len(texts)) as s:      # "embed ..." when it starts
        for block in blocks:
            ...
            s.advance(len(block))                     # a bar, where the sink draws one
    # "embed: 30 in 0.41 s" when it ends (the count is total, or what advance() counted)

Every event goes to the ``hypograph.progress`` logger at INFO (a Dagster run keeps that logger's
records in its log: ``pipelines/instance.py`` names it in ``dagster.yaml``) and to each sink pushed
with ``reporting(sink)``; the CLI pushes one that prints to a terminal (``hypograph_cli/terminal.py``).
Nothing is printed by default. A Dagster run adds, to the sinks only (``notify``), its steps (start
and end events with ``step=True``), each asset it materialized (an ``asset`` event) and each check
it evaluated (a ``check`` event).
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
    count at ``end``), ``total`` what is expected (None: unknown); ``seconds`` since the start.
    From a Dagster run (``notify``): ``step`` marks a step's start and end; ``asset``, the asset
    ``name`` materialized (``seconds``: its steps'); ``check``, the check ``name`` evaluated
    (``done``: 1 passed, 0 failed)."""

    kind: str
    name: str
    done: int = 0
    total: int | None = None
    seconds: float = 0.0
    unit: str = ""
    step: bool = False


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


def counted(n: int, unit: str) -> str:
    """``1 file``, ``2 files``, ``1 hypothesis``: units are given in the plural."""
    if n == 1 and unit.endswith("s"):
        unit = unit[:-3] + "is" if unit.endswith("ses") else unit[:-1]
    return f"{n} {unit}".rstrip()


def describe(event: Event) -> str:
    """One line for a start or an end: ``embed: 30 hypotheses ...`` / ``embed: 30 hypotheses in 0.41 s``
    (``name ...`` and ``name: done in 0.41 s`` for a stage that counts nothing)."""
    if event.kind == "start":
        return (
            f"{event.name}: {counted(event.total, event.unit)} ..." if event.total is not None else f"{event.name} ..."
        )
    return f"{event.name}: {what_ended(event)} in {event.seconds:.2f} s"


def what_ended(event: Event) -> str:
    """What an ended stage counted (``30 hypotheses``), or ``done`` for a stage that counts nothing."""
    return counted(event.done, event.unit) if event.done or event.total is not None or event.unit else "done"


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
