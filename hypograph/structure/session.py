"""One structuring at a time per vault, whatever interrupts it.

Step 4 is three domain functions run in order — ``run_dispositions`` (4a), ``run_clusters`` (4b),
``write_map`` — each holding the vault's structuring lock (``hypograph.vault.locking``) and reading
the vault under it. Two guarantees hold together:

* **Over the whole step**: ``structuring(root)`` holds the same lock (re-entrant) around a block,
  so a caller running the three in one process (``tests/support/structure_driver.py --whole`` does) keeps
  every other structuring and every reader out from 4a's first read to the map's write.
* **Between the steps**, when each runs in its own process (one Dagster step each): the marker
  ``.hypograph/structuring.json`` makes interleaving harmless. 4a writes it before its first
  change to the vault (``phase: "4a"``) and, once its decisions are on the ledger, records the
  hypotheses it judged (``phase: "4b"``, ``judged``). Until 4b has clustered them and removed the
  marker, every later 4a treats those hypotheses as judged — it asks about no new pair or topic
  among them, whatever its inputs (proximity recomputed on the half-structured vault finds pairs
  the first run never had) — and only applies the ledger again, which changes nothing: merge
  groups are closed over earlier merges. 4b refuses while a 4a is interrupted before its decisions
  were recorded (``phase: "4a"``), in one line naming that run. So a run killed anywhere, or a
  second run started meanwhile, ends as the uninterrupted run would have.

The map is derived from the vault and written under the lock, so the last one written is the vault's.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypograph.atomic import STATE_MAX, read_regular, write_json
from hypograph.errors import HypographError
from hypograph.ids import id_sort_key
from hypograph.paths import OURS
from hypograph.vault import locking
from hypograph.vault.vault import open_vault

MARKER = Path(OURS) / "structuring.json"
_index: dict[str, object] = {}  # vault root -> its Vault, while a ``structuring`` block holds the lock
_active: dict[str, int] = {}  # vault root -> depth of ``structuring`` blocks in this process


def read_marker(root: Path) -> dict | None:
    """The marker of a structuring in progress (or interrupted), or None."""
    path = Path(root) / MARKER
    try:
        data = json.loads(read_regular(path, STATE_MAX, follow=True))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError):
        raise HypographError(
            f"{path}: unreadable marker of an interrupted structuring; inspect and remove it"
        ) from None
    if (
        not isinstance(data, dict)
        or data.get("phase") not in ("4a", "4b")
        or not isinstance(data.get("judged", []), list)
    ):
        raise HypographError(f"{path}: unreadable marker of an interrupted structuring; inspect and remove it")
    return data


def who(marker: dict) -> str:
    return f"run {marker['run']}" if marker.get("run") else f"the run started {marker.get('since', '?')}"


def mark(
    root: Path,
    phase: str,
    judged: list[str] | set[str] | None = None,
    run: str | None = None,
    policy: str | None = None,
) -> None:
    """Write the marker (under the structuring lock). ``policy``: ``offline`` or ``model``, who judged;
    a 4a under the other kind starts afresh (its ``judged`` replaces the old)."""
    old = read_marker(root) or {}
    if policy and old.get("policy", policy) != policy:
        old = {}
    doc = {"phase": phase, "since": old.get("since") or _now()}
    if policy:
        doc["policy"] = policy
    label = run or locking._run_label.get(str(Path(root)))
    if label:
        doc["run"] = label
    doc["judged"] = sorted(set(old.get("judged", [])) | set(judged or ()), key=_key)
    write_json(Path(root) / MARKER, doc)


def clear(root: Path) -> None:
    (Path(root) / MARKER).unlink(missing_ok=True)


def refuse_if_4a_interrupted(root: Path) -> None:
    """4b cannot start from a vault whose 4a died before recording its decisions."""
    marker = read_marker(root)
    if marker and marker["phase"] == "4a":
        raise HypographError(
            f"{root}: 4a of {who(marker)} was interrupted before its decisions were recorded; "
            f"run step 4 again from 4a (`hypograph structure {root}`) before carving clusters"
        )


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(node_id: str):
    return id_sort_key(node_id)


@contextmanager
def structuring(root: Path | str, run: str | None = None) -> Iterator[None]:
    """Hold the vault's structuring lock over the block: 4a, 4b and the map inside it run with no
    other structuring, and no reader, in between. ``run``: how other runs refused meanwhile name
    this one (a Dagster run id, "hypograph structure", …). Waits for another structuring to end."""
    root = Path(root)
    key = str(root)
    before = locking._run_label.get(key)
    if run:
        locking._run_label[key] = run
    try:
        with locking.structuring_lock(root, run=run):
            _active[key] = _active.get(key, 0) + 1
            try:
                yield
            finally:
                _active[key] -= 1
                if not _active[key]:
                    del _active[key]
                    _index.pop(key, None)
    finally:
        if run:
            if before is None:
                locking._run_label.pop(key, None)
            else:
                locking._run_label[key] = before


def open_for_step(root: Path):
    """The vault a step works on, read under the structuring lock the caller holds: inside a
    ``structuring`` block, the index the step before left (read once for the whole of step 4)."""
    key = str(Path(root))
    if key in _active and key in _index:
        return _index[key]
    return open_vault(root)


def keep(vault) -> None:
    """Leave ``vault`` (its index up to date with what the step wrote) to the next step of the block."""
    key = str(vault.root)
    if key in _active:
        _index[key] = vault


def forget(root: Path) -> None:
    """Drop the kept index (after a write that did not go through it)."""
    _index.pop(str(Path(root)), None)
