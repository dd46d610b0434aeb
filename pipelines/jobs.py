"""Jobs: proximity on any input, structure (proximity then step 4) on a vault; one partition each."""

from dagster import AssetSelection, define_asset_job

from assets.casework import batch_vault_nodes, case_context, case_interpretation, hypothesis_batch
from assets.groups import PROXIMITY, STRUCTURE
from assets.library import hypothesis_library, round_candidates, round_dedup, round_persisted, round_scores
from assets.partitions import case_revisions, inputs, library_rounds
from pipelines.executor import EXECUTOR

# The deployment picks the executor (HYPOGRAPH_EXECUTOR, pipelines/executor.py): one process per run by default.
proximity_job = define_asset_job(
    "proximity", selection=AssetSelection.groups(PROXIMITY), partitions_def=inputs, executor_def=EXECUTOR,
    description="Embed, graph, cluster, list and adjudicate near-duplicates of the input's hypotheses (seed 003).",
)

structure_job = define_asset_job(
    "structure", selection=AssetSelection.groups(PROXIMITY, STRUCTURE), partitions_def=inputs,
    executor_def=EXECUTOR,
    description="Proximity, then step 4 on a vault: merge/drop, clusters with residuals, the structure map, "
                "and proximity refreshed for the structured vault (seed 000).",
)

library_round_job = define_asset_job(
    "library_round", selection=[round_candidates, round_dedup, round_scores, round_persisted],
    partitions_def=library_rounds, executor_def=EXECUTOR,
    description="One library round (seed 001): generate, dedup against the library, score, persist.",
)

rescore_job = define_asset_job(
    "library_rescore", selection=[round_scores, round_persisted], partitions_def=library_rounds,
    executor_def=EXECUTOR,
    description="Re-score rounds (another model, web grounding on) without regenerating; ids unchanged.",
)

library_job = define_asset_job(
    "library", selection=[hypothesis_library], partitions_def=inputs, executor_def=EXECUTOR,
    description="hypothesis_library.json as the rounds left it, validated, with the Phase-7 report.",
)

case_batch_job = define_asset_job(
    "case_batch", selection=[case_interpretation, case_context, hypothesis_batch], partitions_def=case_revisions,
    executor_def=EXECUTOR,
    description="The initial hypothesis batch of one case revision (seed 004): context, one model round, publication.",
)

case_into_vault_job = define_asset_job(
    "case_batch_into_vault", selection=[case_interpretation, case_context, hypothesis_batch, batch_vault_nodes],
    partitions_def=case_revisions, executor_def=EXECUTOR,
    description="The case batch, then its hypotheses minted into the configured vault as step-3 H nodes.",
)
