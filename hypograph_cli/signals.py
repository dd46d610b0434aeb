"""SIGTERM ends a ``hypograph`` command as Ctrl-C does (exit 130, one line), and is never lost.

Dagster maps SIGTERM to whatever handles SIGINT while a run goes on; between its steps it only
notes the signal (``capture_interrupts``) and forgets it when the run ends, so a SIGTERM received
then let the command go on to exit 0. Here every SIGINT and SIGTERM the process receives, whoever
handled it, is also written to a pipe (``signal.set_wakeup_fd``: the C-level handler writes the
signal's number for every Python-handled signal, whichever handler Dagster has installed); a
command that finds one there after a run, or when it ends, stops with 130. The files a run writes
go through temp files and ``os.replace``, so an interrupted write leaves none half-written.

Once the command has its exit code, ``exit_now`` ends the process: Python's own teardown resets both
signals to their defaults and then spends seconds freeing what a run imported, and a SIGTERM then
killed the command with no line (exit -15, a probe of issue 47's fresh pass).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_pipe: dict[str, int] = {}  # "read": the wakeup pipe's read end while ``counted`` holds it
_seen = {"interrupted": False}


@contextmanager
def counted() -> Iterator[None]:
    """While the block runs (a command): SIGTERM raises KeyboardInterrupt as SIGINT does, and
    every SIGINT or SIGTERM is remembered for ``interrupted()``. Restored after. Off the main
    thread (signals cannot be handled there) a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    old_term = signal.signal(signal.SIGTERM, signal.default_int_handler)
    _pipe["read"], _seen["interrupted"] = r, False
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.set_wakeup_fd(old_fd)
        _pipe.pop("read", None)
        os.close(r)
        os.close(w)


def interrupted() -> bool:
    """Whether a SIGINT or SIGTERM reached the process since ``counted`` began (handled by anyone)."""
    r = _pipe.get("read")
    if r is not None:
        try:
            while data := os.read(r, 512):
                if signal.SIGINT in data or signal.SIGTERM in data:
                    _seen["interrupted"] = True
        except BlockingIOError:
            pass
    return _seen["interrupted"]


def exit_now(code: int, line: str) -> None:
    """End the console command with ``code`` (never returns): other threads joined, exit handlers
    run, output flushed, then ``os._exit``; a SIGINT or SIGTERM from here on ends it with ``line``
    and 130 instead of reaching Python's teardown, which resets both to their defaults first."""

    def late(_signum, _frame) -> None:
        _flush()
        os.write(2, (line + "\n").encode("utf-8", errors="replace"))
        os._exit(130)

    signal.signal(signal.SIGTERM, late)
    signal.signal(signal.SIGINT, late)
    for thread in threading.enumerate():  # what the interpreter's exit waits for first
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # noqa: SLF001 - the handlers the interpreter's exit runs, run here first
    _flush()
    os._exit(code)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing more to say there
            stream.flush()
