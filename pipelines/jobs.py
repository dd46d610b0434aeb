"""Jobs: proximity on any input, structure (proximity then step 4) on a vault; one partition each."""

from dagster import AssetSelection, define_asset_job, in_process_executor

from assets.groups import PROXIMITY, STRUCTURE
from assets.partitions import inputs

# One process per run, not one per step: a small run finishes in seconds from the UI as from the CLI.
proximity_job = define_asset_job(
    "proximity", selection=AssetSelection.groups(PROXIMITY), partitions_def=inputs, executor_def=in_process_executor,
    description="Embed, graph, cluster, list and adjudicate near-duplicates of the input's hypotheses (seed 003).",
)

structure_job = define_asset_job(
    "structure", selection=AssetSelection.groups(PROXIMITY, STRUCTURE), partitions_def=inputs,
    executor_def=in_process_executor,
    description="Proximity, then step 4 on a vault: merge/drop, clusters with residuals, the structure map, "
                "and proximity refreshed for the structured vault (seed 000).",
)
