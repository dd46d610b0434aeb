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

A signal whose handler raises (``KeyboardInterrupt``; a Dagster step's
``DagsterExecutionInterruptedError``) while a finalizer runs (a ``__del__``, a gc or weakref
callback) has broken off that finalizer, and Python can only print "Exception ignored in: ..." with
its traceback and go on as if nothing had happened. There is no later moment to raise it again (a
signal re-sent is handled at the next bytecode: the hook's own, or the next finalizer's), so the
command ends there, as ``exit_now``'s late signals do: its last words (the line; with ``--json``
its record), exit 130. That is safe at any moment: every file is written to a temp file and moved
into place whole (a later writer removes the temp files left), the run left started is marked failed
by the next command (``assets/active_runs.py``), and forked helpers die with their parent.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_pipe: dict[str, int] = {}  # "read": the wakeup pipe's read end while ``counted`` holds it
_seen = {"interrupted": False}


@contextmanager
def counted(line: str | None = None, record: Callable[[], str] = lambda: "") -> Iterator[None]:
    """While the block runs (a command): SIGTERM raises KeyboardInterrupt as SIGINT does, and
    every SIGINT or SIGTERM is remembered for ``interrupted()``. Given ``line`` (a console command's
    interrupted line), a signal whose exception lands in a finalizer ends the process with ``line``
    on stderr, ``record()`` on stdout (with ``--json``, else ""), exit 130 (see the module
    docstring). Restored after. Off the main thread (signals cannot be handled there) a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    old_term = signal.signal(signal.SIGTERM, signal.default_int_handler)
    # Started with SIGINT ignored (a script's background job): a Dagster run gives SIGTERM SIGINT's
    # handler when it ends, so an ignored SIGINT made SIGTERM ignored until the exit; and its steps
    # take SIGINT over anyway. So SIGINT is Ctrl-C's here too.
    old_int = signal.getsignal(signal.SIGINT)
    if old_int == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    old_hook = sys.unraisablehook
    if line is not None:
        sys.unraisablehook = lambda unraisable: _unraisable(unraisable, line, record, old_hook)
    _pipe["read"], _seen["interrupted"] = r, False
    try:
        yield
    finally:
        sys.unraisablehook = old_hook
        for signum, old in ((signal.SIGTERM, old_term), (signal.SIGINT, old_int)):
            if signal.getsignal(signum) is signal.default_int_handler:  # else ``hold_to_exit`` has it
                signal.signal(signum, old)
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

    hold_to_exit(line)
    for thread in threading.enumerate():  # what the interpreter's exit waits for first
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # noqa: SLF001 - the handlers the interpreter's exit runs, run here first
    _flush()
    os._exit(code)


def hold_to_exit(line: str) -> None:
    """From now to the process's end a SIGINT or SIGTERM ends the console command with ``line`` and
    130. Called before ``counted`` hands the signals back, so no moment between the command's end
    and ``exit_now`` leaves SIGTERM at its default (which killed the command with no line, -15)."""

    def late(_signum, _frame) -> None:
        _end(line, "")

    signal.signal(signal.SIGTERM, late)
    signal.signal(signal.SIGINT, late)


def _unraisable(unraisable, line: str, record: Callable[[], str], fallback) -> None:
    """``sys.unraisablehook`` while ``counted`` holds the signals: an interruption (an exception
    that is no ``Exception``, raised after a SIGINT or SIGTERM arrived) that a finalizer could not
    raise ends the command with ``line``, ``record()`` and 130; anything else goes to ``fallback``."""
    kind = unraisable.exc_type
    if kind is None or issubclass(kind, Exception) or not interrupted():
        fallback(unraisable)
        return
    try:
        text = record()
    except Exception:  # noqa: BLE001 - no record can be made here: the line is still said, the exit still 130
        text = ""
    _end(line, text)


def _end(line: str, record: str) -> None:
    """Say ``line`` on stderr and ``record`` on stdout, then exit 130 with no teardown: straight to
    the file descriptors, as the streams' own buffers may be in the middle of the write this cut."""
    _flush()
    for fd, text in ((1, record), (2, line + "\n")):
        with contextlib.suppress(OSError):  # a closed pipe: nothing more to say there
            os.write(fd, text.encode("utf-8", errors="replace"))
    os._exit(130)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe or stream, or one whose write the signal cut (reentrant): nothing more there
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            stream.flush()
