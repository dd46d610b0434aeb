"""Partitions: one deployment serves every input a user works on.

``inputs``: one partition per input folder (a prox run directory or a vault), keyed by its absolute
path, so a run launched for one input can only ever read and write that folder. Partitions are
added by ``hypograph add PATH``, by any ``hypograph`` command run on a new path, and by the
``inputs_discovered`` sensor for folders under ``$HYPOGRAPH_WORKSPACE``.
"""

from dagster import DynamicPartitionsDefinition

INPUTS = "inputs"

inputs = DynamicPartitionsDefinition(name=INPUTS)
