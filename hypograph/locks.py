"""One file lock, for every "one at a time" in Hypograph: minting a vault id, a structuring step, a
library round, a case dispatch, opening the Dagster instance; and its shared form, for reading a
vault while no structuring writes it."""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hypograph.atomic import FILE_MODE, open_regular
from hypograph.errors import HypographError

POLL = 0.05  # seconds between two tries of a lock waited for with a timeout

_held = threading.local()  # this thread's locks: absolute path -> [mode ("ex" | "sh"), depth]


def _holding() -> dict[str, list]:
    if not hasattr(_held, "locks"):
        _held.locks = {}
    return _held.locks


def held(path: Path) -> str | None:
    """``"ex"`` or ``"sh"`` if this thread holds the lock on ``path``, else None."""
    entry = _holding().get(os.path.abspath(path))
    return entry[0] if entry else None


def holder(path: Path) -> str:
    """What the holder of an exclusive lock wrote into the lock file (``owner``), or ``""``."""
    try:  # never waits on a FIFO planted there
        with os.fdopen(open_regular(path, follow=True), "rb") as fh:
            return fh.read(2000).decode("utf-8", errors="replace").strip()
    except (OSError, HypographError):
        return ""


@dataclass(frozen=True)
class LockOptions:
    """How ``file_lock`` takes its lock (its keyword arguments): ``shared`` (a reader's lock),
    ``wait`` (seconds before ``busy`` is raised), ``owner`` (text written into an exclusive lock's
    file), ``create`` (create a missing file; else a missing file is no lock) and ``reentrant``."""

    shared: bool = False
    wait: float | None = None
    owner: str | None = None
    create: bool = True
    reentrant: bool = False


@contextmanager
def file_lock(path: Path, busy: Exception | Callable[[str], Exception] | None = None, **options) -> Iterator[bool]:
    """Hold an exclusive (or, with ``shared``, a shared) ``flock`` on ``path`` for the block; the
    lock goes with the process if it dies. The file is created with its folders if missing
    (unless ``create`` is false: then a missing file is no lock, and the block runs without one,
    yielding False), never through a symlink. ``options``: the fields of ``LockOptions`` (an
    unknown name is a TypeError).

    With ``reentrant``, per thread: a thread already holding the lock (taken reentrant) runs a
    nested block at once (an exclusive hold covers a shared request; a shared one cannot become
    exclusive: that is an error). Without, a nested request is another holder's, as across processes.

    Waits for another holder; given ``busy``, raises ``busy`` (or ``busy(holder text)``) instead,
    at once or after ``wait`` seconds. ``owner``: text written into the lock file once an exclusive
    lock is held, so that someone refused can be told who holds it. A lock file that cannot be
    opened is one HypographError naming it. Yields whether a lock is held."""
    opts = LockOptions(**options)
    shared, reentrant = opts.shared, opts.reentrant
    key = os.path.abspath(path)
    entry = _holding().get(key) if reentrant else None
    if entry is not None:
        if entry[0] == "sh" and not shared:
            raise HypographError(f"{path}: held for reading by this thread; cannot be taken for writing inside")
        entry[1] += 1
        try:
            yield True
        finally:
            entry[1] -= 1
        return
    fd = _open(path, shared, opts.create)
    if fd is None:
        yield False
        return
    try:
        _acquire(fd, path, shared, busy, opts.wait)
        if opts.owner is not None and not shared:
            os.ftruncate(fd, 0)
            os.pwrite(fd, opts.owner.encode("utf-8"), 0)
        if not reentrant:
            yield True
            return
        _holding()[key] = ["sh" if shared else "ex", 1]
        try:
            yield True
        finally:
            del _holding()[key]
    finally:
        os.close(fd)  # closing releases the lock


def _open(path: Path, shared: bool, create: bool) -> int | None:
    try:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        flags = (os.O_RDONLY if shared else os.O_RDWR) | os.O_NOFOLLOW | (os.O_CREAT if create else 0)
        return os.open(path, flags, FILE_MODE)
    except FileNotFoundError:
        if not create:
            return None
        raise HypographError(f"{path}: lock file cannot be opened (no such folder)") from None
    except OSError as e:
        why = "is a symlink" if e.errno == errno.ELOOP else f"cannot be opened ({e.strerror})"
        hint = " (is the input read-only?)" if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else ""
        raise HypographError(f"{path}: lock file {why}{hint}") from None


def _acquire(fd: int, path: Path, shared: bool, busy, wait: float | None) -> None:
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    if busy is None:
        fcntl.flock(fd, mode)
        return
    deadline = time.monotonic() + (wait or 0)
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise (busy(holder(path)) if callable(busy) else busy) from None
            time.sleep(POLL)
