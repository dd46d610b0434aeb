"""Partitions: one set per kind of thing an asset can process, keyed by short, stable input ids.

``hypothesis_inputs``: every registered input with hypotheses to embed — run directories, vaults
and libraries — keyed by the input's id (``vault``, ``eggs1``, ``run-3fa2c1``; see
``hypograph/inputs.py``). The proximity assets are partitioned by it.

``vaults``: the registered vaults (a vault's key is the same id in both sets). Step 4 is
partitioned by it and reads its vault's proximity through the identity mapping.

``libraries``: the registered libraries (the same id as in ``hypothesis_inputs``). The library
file as it is on disk (``library_file``, observed with its checks) is partitioned by it.

``library_rounds``: ``<library id>/r0001``, one key per round a library has actually started.

``case_revisions``: ``<case id>/r0001``, one key per analysis revision of a case package.

Keys are added by ``hypograph add`` and every ``hypograph`` command on a new input, and by the
``inputs_discovered`` sensor (``SensorResult(dynamic_partitions_requests=…)``); never as a side
effect of evaluating a tick.
"""

from __future__ import annotations

from dagster import DynamicPartitionsDefinition

from hypograph.ids import numbered_key
from hypograph.inputs import InputRecord, sub_key
from hypograph.scans import BAD_INPUT, skip_line

HYPOTHESIS_INPUTS = "hypothesis_inputs"
VAULTS = "vaults"
LIBRARIES = "libraries"
ROUNDS = "library_rounds"
REVISIONS = "case_revisions"

hypothesis_inputs = DynamicPartitionsDefinition(name=HYPOTHESIS_INPUTS)
vaults = DynamicPartitionsDefinition(name=VAULTS)
libraries = DynamicPartitionsDefinition(name=LIBRARIES)
library_rounds = DynamicPartitionsDefinition(name=ROUNDS)
case_revisions = DynamicPartitionsDefinition(name=REVISIONS)
PARTITION_SETS = {
    HYPOTHESIS_INPUTS: hypothesis_inputs,
    VAULTS: vaults,
    LIBRARIES: libraries,
    ROUNDS: library_rounds,
    REVISIONS: case_revisions,
}

# The partition sets an input of each kind belongs to (its own id as key).
SETS_OF_KIND = {
    "run-dir": [HYPOTHESIS_INPUTS],
    "vault": [HYPOTHESIS_INPUTS, VAULTS],
    "library": [HYPOTHESIS_INPUTS, LIBRARIES],
    "case": [],
}


def model_configured() -> bool:
    """A model is named and not switched off where this process runs (the daemon's, a command's)."""
    from hypograph import environment

    return not environment.llm_config(offline=environment.current().offline).offline


def offered_round(record: InputRecord) -> str | None:
    """``<library id>/rNNNN``: the round the library runs next, when a model is configured."""
    if record.kind != "library" or not model_configured():
        return None
    from hypograph.library.run import round_to_run  # the library modules only for a library

    return sub_key(record.id, round_to_run(record.path))


def new_keys(instance, records: list[InputRecord], log=None) -> dict[str, list[str]]:
    """Partition set name -> the keys ``records`` belong under that ``instance`` lacks (sorted; sets
    lacking none left out): each id in the sets of its kind, a case's revisions in ``case_revisions``,
    a library's next round in ``library_rounds`` where a model is configured. A case whose revisions,
    or a library whose round, cannot be read is skipped there, ``log`` (default ``print``) saying so.

    Dagster's storage alone: ``hypograph add`` registers without loading the code location."""
    wanted: dict[str, list[str]] = {name: [] for name in PARTITION_SETS}
    for r in records:
        if r.kind == "case":
            from hypograph.case.package import CasePackage  # the case modules only for a case

            try:  # a case whose revisions cannot be listed is skipped, saying so; the others are added
                wanted[REVISIONS] += [sub_key(r.id, numbered_key(n)) for n in CasePackage(r.path).revisions()]
            except BAD_INPUT as e:
                (log or print)(skip_line(f"{r.id}: {r.path}", e))
                continue
        for name in SETS_OF_KIND[r.kind]:
            wanted[name].append(r.id)
        try:  # a library's next round, where a model could run it
            wanted[ROUNDS] += [key] if (key := offered_round(r)) else []
        except BAD_INPUT as e:
            (log or print)(skip_line(f"{r.id}: {r.path}", e))
    new = {
        name: sorted(set(keys) - set(instance.get_dynamic_partitions(name))) for name, keys in wanted.items() if keys
    }
    return {name: keys for name, keys in new.items() if keys}
