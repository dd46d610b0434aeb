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

from dagster import DynamicPartitionsDefinition

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

# The partition sets an input of each kind belongs to (its own id as key).
SETS_OF_KIND = {
    "run-dir": [HYPOTHESIS_INPUTS],
    "vault": [HYPOTHESIS_INPUTS, VAULTS],
    "library": [HYPOTHESIS_INPUTS, LIBRARIES],
    "case": [],
}
