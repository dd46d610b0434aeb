"""Partitions: one deployment serves every input a user works on.

``inputs``: one partition per input folder (a prox run directory, a vault, a library directory),
keyed by its absolute path, so a run launched for one input can only ever read and write that
folder. Partitions are added by ``hypograph add PATH``, by any ``hypograph`` command run on a new
path, and by the ``inputs_discovered`` sensor for folders under ``$HYPOGRAPH_WORKSPACE``.

``library_rounds``: input x round (``r0001``, ...): one partition per round of one library, the
unit a schedule adds and a backfill re-runs.

``case_revisions``: input x analysis revision (``r0001``, ...) of a case package: one initial
hypothesis batch per revision.
"""

from pathlib import Path
from typing import NamedTuple

from dagster import DynamicPartitionsDefinition, MultiPartitionKey, MultiPartitionsDefinition

from hypograph.casework.package import MANIFEST, CasePackage

INPUTS = "inputs"
ROUNDS = "library_rounds"
REVISIONS = "case_revisions"

inputs = DynamicPartitionsDefinition(name=INPUTS)
rounds = DynamicPartitionsDefinition(name=ROUNDS)
library_rounds = MultiPartitionsDefinition({"input": inputs, "round": rounds})
revisions = DynamicPartitionsDefinition(name=REVISIONS)
case_revisions = MultiPartitionsDefinition({"input": inputs, "revision": revisions})
SUB_PARTITIONS = {"round": ROUNDS, "revision": REVISIONS}  # second dimension -> its dynamic set


class Where(NamedTuple):
    """A partition key taken apart: the input folder's key, and the round or revision (or None)."""

    input: str | None
    sub: str | None


def input_partition(key: str | None) -> Where:
    """``/path`` -> (``/path``, None); a multi-partition key ``/path|r0001`` -> (``/path``, ``r0001``)."""
    if isinstance(key, MultiPartitionKey):
        dims = key.keys_by_dimension
        return Where(dims["input"], dims.get("round") or dims.get("revision"))
    return Where(key, None)


def round_partition(root: str, key: str) -> MultiPartitionKey:
    return MultiPartitionKey({"input": root, "round": key})


def revision_key(revision: int) -> str:
    return f"r{revision:04d}"


def revision_partition(root: str, revision: int) -> MultiPartitionKey:
    return MultiPartitionKey({"input": root, "revision": revision_key(revision)})


def case_revision_keys(root: Path) -> list[str]:
    """The revision partition keys (``r0001``…) of a case package; none for another kind of input."""
    return [revision_key(r) for r in CasePackage(root).revisions()] if (root / MANIFEST).is_file() else []
