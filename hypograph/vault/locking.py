"""Who may read and write a vault when: one structuring at a time, and no reader in the middle of it.

* ``structuring_lock``: the exclusive lock of a structuring step (4a, 4b, the map, unmerge), on
  ``<vault>/.hypograph/structure.lock``; re-entrant in a thread, so ``hypograph.structure.session``
  can hold it over the whole of step 4 while each step takes it too. It waits for another writer.
  The holder writes who it is into the lock file (pid, host, start time, run), for the refusals below.
* ``reading_lock``: the shared form, held while a vault's files are read (``open_vault``, the
  hypothesis corpus of proximity): a reader never lists a file a writer then moves, nor the same
  node in two folders. It waits ``HYPOGRAPH_READ_WAIT`` seconds (``hypograph.environment``) for a
  structuring to end, then refuses in one line naming it. It creates no file: a vault never
  structured has no lock file, and a read of it takes none (nor does a read-only look at a vault
  that is not ours, like ``case from-vault``).

Bottom layer: imports only ``atomic``, ``locks``, ``journal``, ``environment`` and ``errors``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypograph import environment
from hypograph.atomic import remove_stale_temps
from hypograph.errors import NotDone
from hypograph.journal import Journal
from hypograph.locks import file_lock, held
from hypograph.paths import OURS

LOCK = Path(OURS) / "structure.lock"
MINT_LOCK = ".create_node.lock"  # the minting lock (``hypograph.vault.mint``), shared with the seed's script
# What only a structuring writes (its holder removes their stale temp files; ``atomic.remove_stale_temps``):
STRUCTURING_WRITES = (
    f"{OURS}/*.json",  # the 4a ledger, the carve, the marker, the step-3 baseline, the journal
    "agent-notes/**/*",
    f"{OURS}/traces/hypothesis_dispositions/**/*",
    f"{OURS}/traces/hypothesis_clusters/**/*",
)
MINTED = ("hypotheses/**/*", "hypothesis-clusters/**/*")  # nodes, written by minters too
_run_label: dict[str, str] = {}  # vault root -> the run label of this process's structuring


def owner_text(run: str | None = None) -> str:
    return json.dumps(
        {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            **({"run": run} if run else {}),
        }
    )


def describe(owner: str) -> str:
    """``run R (pid N on HOST, since T)`` from a lock file's owner text; ``another process`` if unreadable."""
    try:
        o = json.loads(owner)
        who = f"pid {o['pid']} on {o['host']}, since {o['since']}"
        return f"run {o['run']} ({who})" if o.get("run") else f"another structuring ({who})"
    except (ValueError, KeyError, TypeError):
        return "another structuring"


def busy_error(root: Path, doing: str = "reading it"):
    """The refusal of a reader (or second writer) while a structuring holds the lock, naming it:
    a ``NotDone`` (exit 2), as nothing is wrong with the vault; made from the lock's owner text."""
    return lambda owner: NotDone(
        f"{root}: {describe(owner)} is structuring this vault; not {doing} until it ends (try again then)"
    )


@contextmanager
def structuring_lock(root: Path, run: str | None = None, wait: float | None = None) -> Iterator[None]:
    """One structuring step (4a, 4b, the map, unmerge) at a time per vault: deciding which hypotheses
    to merge or carve must not race another run deciding the same. (Minting has its own lock.)
    Re-entrant in a thread. Waits for another holder (given ``wait``: that long, then refuses in
    one line naming it)."""
    root = Path(root)
    label = run or _run_label.get(str(root))
    busy = busy_error(root, "structuring it too") if wait is not None else None
    outermost = not holds_structuring(root)
    with file_lock(root / LOCK, busy, wait=wait, owner=owner_text(label), reentrant=True):
        if outermost:
            remove_structuring_temps(root)
        yield


class _Minting(Exception):
    """Someone holds the minting lock (create-node, batch --into): their temp files are live."""


def remove_structuring_temps(root: Path) -> list[str]:
    """Remove the temp files killed writes left in what a structuring writes
    (``STRUCTURING_WRITES``; the node folders, ``MINTED``, only while the minting lock's file exists
    and the lock is free too: minters write there); call it holding the structuring lock. Returns
    the removed paths, relative to ``root``."""
    gone = remove_stale_temps(root, STRUCTURING_WRITES)
    try:  # never created here (a lock file is a change); a vault never minted in has none
        with file_lock(Path(root) / MINT_LOCK, _Minting(), create=False) as locked:
            gone += remove_stale_temps(root, MINTED) if locked else []
    except _Minting:
        pass  # a minter is writing there now: the next structuring sweeps them
    return gone


def holds_structuring(root: Path) -> bool:
    """Whether this thread holds the vault's structuring lock."""
    return held(Path(root) / LOCK) == "ex"


@contextmanager
def reading_lock(root: Path, roll_forward: bool = True) -> Iterator[None]:
    """Read ``root`` while no structuring writes it (see the module docstring). With
    ``roll_forward``, a journal an interrupted run left is finished first, under the exclusive lock."""
    root = Path(root)
    if roll_forward and Journal(root).pending() and not holds_structuring(root):
        # a live writer finishes its own plan; a dead one's is ours to finish, alone
        with structuring_lock(root, wait=environment.current().read_wait):
            Journal(root).roll_forward()
            yield
        return
    if roll_forward and holds_structuring(root):
        Journal(root).roll_forward()
    wait = environment.current().read_wait  # seconds a reader waits for a structuring
    with file_lock(root / LOCK, busy_error(root), shared=True, wait=wait, create=False, reentrant=True):
        yield
