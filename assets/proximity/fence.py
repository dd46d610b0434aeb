"""Proximity's files are written only by the newest run of their partition.

``publish(instance, run_id, asset_key, root, write)`` asks the run fence (``io_managers/fleet.py``)
and writes under the input's ``PUBLISH_LOCK``, which every run's step takes before it writes
proximity's files: a newer run created after the question was answered writes after this step's
last ``os.replace``, never before it, so the newest run's files are the ones left.
``HypographIOManager`` writes every asset's files through it; a fenced step fails with the fence's
line and writes nothing.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

from hypograph.errors import HypographError
from hypograph.locks import file_lock
from hypograph.paths import state_dir
from io_managers.fleet import fence

PUBLISH_LOCK = "proximity.lock"  # in <input>/.hypograph/: held while a step asks the fence and writes
PUBLISH_WAIT = 600.0  # seconds a step waits for another's write (seconds long); longer is a frozen holder


def publish(instance, run_id: str, asset_key, root: Path, write: Callable[[], list[Path]]) -> list[Path]:
    """``write()`` (the asset's files into input ``root``) if run ``run_id`` may still write
    ``asset_key``, both under the input's publish lock; its paths. HypographError in one line when
    the run is fenced (``stale_run``: nothing written) or another holder keeps the lock over
    ``PUBLISH_WAIT`` seconds (naming it)."""
    lock = state_dir(root) / PUBLISH_LOCK
    owner = json.dumps({"run": run_id, "pid": os.getpid(), "host": socket.gethostname()})

    def busy(holder: str) -> HypographError:
        return HypographError(
            f"{lock}: held by {holder or 'another process'} for over {PUBLISH_WAIT:.0f} s; "
            f"{asset_key.to_user_string()} not written (run {run_id[:8]})"
        )

    with file_lock(lock, busy, wait=PUBLISH_WAIT, owner=owner):
        fence(instance, run_id, asset_key)
        return write()
