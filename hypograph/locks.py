"""One exclusive file lock, for every "one at a time" in Hypograph: minting a vault id, a
structuring step, a library round, a case dispatch, opening the Dagster instance."""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypograph.atomic import FILE_MODE
from hypograph.errors import HypographError


@contextmanager
def file_lock(path: Path, busy: Exception | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created with its folders if missing, never through a
    symlink) for the block; the lock goes with the process if it dies.

    Waits for another holder, or, given ``busy``, raises ``busy`` at once instead. A lock file that
    cannot be opened is one HypographError naming it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    except OSError as e:
        why = "is a symlink" if e.errno == errno.ELOOP else f"cannot be opened ({e.strerror})"
        hint = " (is the input read-only?)" if e.errno in (errno.EACCES, errno.EPERM) else ""
        raise HypographError(f"{path}: lock file {why}{hint}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if busy is not None else 0))
        except BlockingIOError:
            raise busy from None
        yield
    finally:
        os.close(fd)  # closing releases the lock
