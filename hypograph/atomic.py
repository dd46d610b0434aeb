"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from hypograph.errors import HypographError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp creates 0600 files; a written file gets the mode open() would give it.
FILE_MODE = 0o666 & ~_umask()


def write_atomic(path: Path, write: Callable[[IO[bytes]], None], fsync: bool = True) -> bool:
    """Write `path` through `write(fileobj)` into a temp file beside it, fsync, then `os.replace`.

    Returns False (and leaves the file untouched, mtime included) when the new bytes equal the old,
    so a re-run on unchanged input changes nothing on disk. Refuses to replace a symlink by a regular
    file (write to the file it points at instead: ``hypograph.paths.write_target``). A file system
    refusing the write (read-only, permissions, full) is one HypographError naming ``path``.
    """
    path = Path(path)
    if path.is_symlink():
        raise HypographError(f"{path}: is a symlink; not replacing it by a regular file")
    try:
        return _write_atomic(path, write, fsync)
    except OSError as e:
        raise HypographError(f"{path}: cannot write ({e.strerror or type(e).__name__})") from None


def _write_atomic(path: Path, write: Callable[[IO[bytes]], None], fsync: bool = True) -> bool:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            unchanged = path.exists() and _same_bytes(path, Path(tmp))
            if not unchanged and fsync:  # what replaces the file reaches the disk first; a copy to discard need not
                os.fsync(fh.fileno())
        if unchanged:
            os.unlink(tmp)
            return False
        os.replace(tmp, path)
        return True
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _same_bytes(a: Path, b: Path) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            ca, cb = fa.read(1 << 20), fb.read(1 << 20)
            if ca != cb:
                return False
            if not ca:
                return True


def write_text(path: Path, text: str, fsync: bool = True) -> bool:
    """Atomically write UTF-8 text; returns whether the file changed."""
    return write_atomic(path, lambda fh: fh.write(text.encode("utf-8")), fsync)


def sync_tree(root: Path) -> None:
    """Make everything written under ``root``'s file system durable: ``syncfs`` on it (Linux), else ``sync``."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if libc.syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    except (OSError, AttributeError):
        pass
    os.sync()


def write_json(path: Path, value: Any) -> bool:
    """Atomically write `value` as pretty UTF-8 JSON (key order as given); returns whether it changed."""
    return write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")
