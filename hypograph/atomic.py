"""Atomic file writes: a reader sees the old file or the new one, never half of either; and the
bounded read of a small state file (``read_regular``).

Reading rule: a file the tool keeps state in (an input's ``input-id``, the input registry) is
opened without following a symlink (``O_NOFOLLOW``), refused unless the open descriptor is a
regular file (a FIFO, device or socket is never read: ``/dev/zero`` would never end), and refused
above the size cap stated for its kind (``read_regular``'s ``max_bytes``) before a byte is read.

Temp files: every atomic write's temp file is ``.NAME.xxxxxxxx.tmp`` beside ``NAME`` (``TEMP_RE``);
a process killed mid-write leaves it. ``remove_stale_temps`` deletes them, called by the holder of
the lock every writer of those files takes (structuring, library, case), so none is a live write's.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from hypograph.errors import HypographError

# The tool's own state files (ledgers, journals, caches, run records) are read through
# ``read_regular`` with at most this many bytes: a FIFO or device planted there is refused, never
# waited on, and a file grown beyond what the tool writes is refused unread.
STATE_MAX = 256 << 20
# The proximity files (embeddings, graph.json, graph.npz ...) grow with the input: a larger one is
# refused unread (10,000 nodes write well under 1 GB).
DATA_MAX = 8 << 30


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


TEMP_RE = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$", re.S)  # tempfile.mkstemp(prefix=".NAME.", suffix=".tmp")

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
    st = b.stat()
    if not stat.S_ISREG(st.st_mode) or a.stat().st_size != st.st_size:  # a FIFO is never opened
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


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a folder" if stat.S_ISDIR(mode) else "not a regular file"


def open_regular(path: Path, what: str | None = None, follow: bool = False) -> int:
    """A read-only descriptor of the regular file ``path``; FileNotFoundError if it is missing,
    one HypographError line naming ``what`` (default: ``path``) if it is a symlink (unless
    ``follow``), a FIFO, a device, a socket or a folder. ``O_NONBLOCK``: opening a FIFO returns at
    once; ``fstat`` on the open descriptor decides, so a swap after a check cannot slip a device in."""
    what = what or str(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise HypographError(f"{what}: {_link_problem(path, follow)}; not read") from None
        if isinstance(e, (FileNotFoundError, NotADirectoryError)):
            raise
        raise HypographError(f"{what}: cannot be read ({e.strerror or type(e).__name__})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise HypographError(f"{what}: is {_kind(mode)}, not a regular file; not read")
    return fd


def _link_problem(path: Path, follow: bool) -> str:
    """Why a link refused an open (ELOOP): a loop when links are followed, else the link itself."""
    if follow:
        return "a loop of symlinks"
    try:
        return f"is a symlink (-> {os.readlink(path)})"
    except OSError:
        return "is reached through a loop of symlinks"


def read_regular(path: Path, max_bytes: int, what: str | None = None, follow: bool = False) -> bytes:
    """The bytes of the regular file ``path`` (see ``open_regular``), at most ``max_bytes`` of
    them: a larger file is one HypographError line naming it, refused by its size before any byte
    is read (and if it grows meanwhile, after ``max_bytes + 1``). FileNotFoundError if missing."""
    what = what or str(path)
    fd = open_regular(path, what, follow)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fd).st_size
        data = fh.read(max_bytes + 1) if size <= max_bytes else b""
    if size > max_bytes or len(data) > max_bytes:
        raise HypographError(f"{what}: {max(size, len(data))} bytes, over the {max_bytes}-byte limit; not read")
    return data


def read_utf8(path: Path, max_bytes: int, what: str | None = None, follow: bool = True) -> str:
    """The text of ``path`` as ``read_regular`` reads it (a symlink followed unless ``follow`` is
    False), decoded as UTF-8; text that is not is one HypographError line naming ``what``."""
    what = what or str(path)
    try:
        return read_regular(path, max_bytes, what, follow).decode("utf-8")
    except UnicodeDecodeError as e:
        raise HypographError(f"{what}: not UTF-8 ({e.reason} at byte {e.start})") from None


def remove_stale_temps(root: Path, owned: Iterable[str]) -> list[str]:
    """Delete the temp files killed atomic writes left beside the files ``owned`` names: glob
    patterns relative to ``root`` (``hypotheses/**/*``: every file under ``hypotheses/``;
    ``.hypograph/carving.json``: that file's). Only ``.NAME.xxxxxxxx.tmp`` names (``TEMP_RE``) that
    are regular files, in folders reached without a symlink. Call it only holding the lock every
    writer of those files takes: then no temp file found belongs to a live write. Returns the
    removed paths, relative to ``root``."""
    root = Path(root)
    real = Path(os.path.realpath(root))
    gone = []
    for pattern in owned:
        folder, _, name = pattern.rpartition("/")
        for tmp in sorted(root.glob(f"{folder}/.{name}.*.tmp" if folder else f".{name}.*.tmp")):
            rel = tmp.relative_to(root)
            if not TEMP_RE.match(tmp.name) or tmp.is_symlink() or not tmp.is_file():
                continue
            if Path(os.path.realpath(tmp.parent)) != real / rel.parent:  # reached through a symlink
                continue
            tmp.unlink(missing_ok=True)
            gone.append(str(rel))
    return gone
