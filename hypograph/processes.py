"""Which process does something, and whether it still runs: a tag a process writes for itself that
another process of the same machine can check later, proof against a reused pid.

``this_process()`` -> ``"<host>/<boot id>/<pid>/<start>"`` (``start``: the process's start time in
clock ticks since boot, from ``/proc``). ``gone(tag)`` -> True when the tag names a process of this
machine that no longer runs: the machine restarted since (another boot id), or no process has that
pid, or the one that has it started at another time. False while it runs, and whenever it cannot
be told: another machine's tag, a malformed one, a system without ``/proc``.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from hypograph.atomic import read_regular
from hypograph.errors import HypographError

_PROC = "/proc"


def _read(path: str) -> str | None:
    try:
        return read_regular(Path(path), 4096).decode("ascii", "replace").strip()
    except (OSError, HypographError):
        return None


def _boot_id() -> str:
    return _read(f"{_PROC}/sys/kernel/random/boot_id") or ""


def _start(pid: int) -> str | None:
    """The process's start time (field 22 of ``/proc/<pid>/stat``), or None when there is none."""
    stat = _read(f"{_PROC}/{pid}/stat")
    if not stat or ")" not in stat:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces and ")"
    return fields[19] if len(fields) > 19 else None


def tag_of(pid: int) -> str:
    """The tag of process ``pid`` of this machine (``this_process`` for another pid)."""
    return f"{socket.gethostname()}/{_boot_id()}/{pid}/{_start(pid) or ''}"


def this_process() -> str:
    return tag_of(os.getpid())


def gone(tag: str) -> bool:
    """True when ``tag`` names a process of this machine that no longer runs (see the module)."""
    parts = tag.split("/")
    if len(parts) != 4 or not parts[2].isdigit() or not parts[1] or not parts[3]:
        return False
    host, boot, pid, start = parts
    if host != socket.gethostname() or not _boot_id():
        return False
    return boot != _boot_id() or _start(int(pid)) != start
