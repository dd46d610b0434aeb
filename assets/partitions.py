"""Partitions: one set per kind of thing an asset can process, keyed by short, stable input ids.

``hypothesis_inputs``: every registered input with hypotheses to embed — run directories, vaults
and libraries — keyed by the input's id (``vault``, ``eggs1``, ``run-3fa2c1``; see
``hypograph/inputs.py``). The proximity assets are partitioned by it.

``vaults``: the registered vaults (a vault's key is the same id in both sets). Step 4 is
partitioned by it and reads its vault's proximity through the identity mapping.

``library_rounds``: ``<library id>/r0001``, one key per round a library has actually started.

``case_revisions``: ``<case id>/r0001``, one key per analysis revision of a case package.

Keys are added by ``hypograph add`` and every ``hypograph`` command on a new input, and by the
``inputs_discovered`` sensor (``SensorResult(dynamic_partitions_requests=…)``); never as a side
effect of evaluating a tick.
"""

from typing import NamedTuple

from dagster import DynamicPartitionsDefinition

from hypograph.errors import HypographError

HYPOTHESIS_INPUTS = "hypothesis_inputs"
VAULTS = "vaults"
ROUNDS = "library_rounds"
REVISIONS = "case_revisions"

hypothesis_inputs = DynamicPartitionsDefinition(name=HYPOTHESIS_INPUTS)
vaults = DynamicPartitionsDefinition(name=VAULTS)
library_rounds = DynamicPartitionsDefinition(name=ROUNDS)
case_revisions = DynamicPartitionsDefinition(name=REVISIONS)

# The partition sets an input of each kind belongs to (its own id as key).
SETS_OF_KIND = {"run-dir": [HYPOTHESIS_INPUTS], "vault": [HYPOTHESIS_INPUTS, VAULTS],
                "library": [HYPOTHESIS_INPUTS], "case": []}


class Sub(NamedTuple):
    """A round or revision key taken apart: the input's id and ``r0001``."""

    input: str
    sub: str


def sub_key(input_id: str, sub: str) -> str:
    """``vault-ab12`` + ``r0003`` -> ``vault-ab12/r0003`` (input ids never hold a ``/``)."""
    return f"{input_id}/{sub}"


def split_sub_key(key: str) -> Sub:
    """``lib/r0003`` -> (``lib``, ``r0003``); a one-line error for a key of another shape."""
    input_id, sep, sub = (key or "").rpartition("/")
    if not sep or not input_id or not sub:
        raise HypographError(f"partition {key!r}: expected <input id>/rNNNN")
    return Sub(input_id, sub)


def revision_key(revision: int) -> str:
    return f"r{revision:04d}"
