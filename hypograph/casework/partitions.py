"""Partition keys for a Dagster layer: one partition per case and analysis revision.

A key is ``<case_id>@r<NNNN>`` (``sourdough@r0002``): readable in the UI and sortable;
``parse_key`` splits at the last ``@r``, so any directory name works as a case id.
"""

from __future__ import annotations

import re

from hypograph.errors import HypographError
from hypograph.casework.package import CaseStore

KEY_RE = re.compile(r"^(?P<case>.+)@r(?P<rev>\d{4,})$")


def partition_key(case_id: str, revision: int) -> str:
    return f"{case_id}@r{revision:04d}"


def parse_key(key: str) -> tuple[str, int]:
    """(case id, analysis revision) of a partition key."""
    m = KEY_RE.match(key)
    if not m:
        raise HypographError(f"partition key {key!r}: not <case_id>@rNNNN")
    return m.group("case"), int(m.group("rev"))


def case_partitions(store: CaseStore) -> list[str]:
    """A key for every revision of every case package in ``store`` (what a sensor registers)."""
    return [partition_key(case_id, rev) for case_id in store.cases() for rev in store.package(case_id).revisions()]
