"""Jobs, each on the one partition set its assets are partitioned by (the executor is set once, on
``Definitions``)."""

from dagster import AssetSelection, define_asset_job

from assets.casework import batch_vault_nodes, case_interpretation, interpretation_draft
from assets.groups import CASEWORK, LIBRARY, PROXIMITY, STRUCTURE
from assets.library import hypothesis_library, round_scores
from assets.partitions import case_revisions, hypothesis_inputs, library_rounds, vaults

proximity_job = define_asset_job(
    "proximity",
    selection=AssetSelection.groups(PROXIMITY),
    partitions_def=hypothesis_inputs,
    description="Observe the input's hypotheses, then embed, graph, cluster, list and adjudicate its "
    "near-duplicates and name its clusters (proximity/ in the input). Runs on any run directory, "
    "vault or library; a no-op on disk when nothing changed.",
)

structure_job = define_asset_job(
    "structure",
    selection=AssetSelection.groups(STRUCTURE),
    partitions_def=vaults,
    description="Step 4 on a vault whose proximity is materialized: merge near-duplicates and drop the off-topic "
    "(4a), hypothesis clusters with residuals (4b), the structure map; the six blocking checks. "
    "Run proximity on the vault first, and again after (hypograph structure does both).",
)

library_round_job = define_asset_job(
    "library_round",
    selection=AssetSelection.groups(LIBRARY),
    partitions_def=library_rounds,
    description="One library round: generate behaviors and mechanisms, dedup them against the library by "
    "meaning, score impact and novelty, merge into hypothesis_library.json. Needs a model. New "
    "rounds come from `hypograph library` or the next_library_round sensor.",
)

rescore_job = define_asset_job(
    "library_rescore",
    selection=[round_scores, hypothesis_library],
    partitions_def=library_rounds,
    description="Re-score rounds (another model, web grounding on) without regenerating; ids unchanged. "
    "Backfill it over one library's rounds or all of them.",
)

DRAFT = AssetSelection.assets(interpretation_draft)

case_interpret_job = define_asset_job(
    "case_interpret",
    selection=[interpretation_draft],
    partitions_def=case_revisions,
    description="The model's draft interpretation of a case revision, saved unconfirmed (`hypograph case "
    "interpret`); with no model, a template. A person then confirms it (`hypograph case confirm`).",
)

case_confirmed_job = define_asset_job(
    "case_confirmed",
    selection=[case_interpretation],
    partitions_def=case_revisions,
    description="The interpretation a person confirmed, verified against the case files (`hypograph case "
    "confirm` runs it); fails while the revision is unconfirmed.",
)

case_batch_job = define_asset_job(
    "case_batch",
    selection=AssetSelection.groups(CASEWORK) - DRAFT - AssetSelection.assets(batch_vault_nodes),
    partitions_def=case_revisions,
    description="Observe the case package, then the initial hypothesis batch of one revision: the confirmed "
    "interpretation checked, the context frozen, one model round, hypotheses and registry published "
    "together. Needs a model unless the batch is already published.",
)

case_into_vault_job = define_asset_job(
    "case_batch_into_vault",
    selection=AssetSelection.groups(CASEWORK) - DRAFT,
    partitions_def=case_revisions,
    description="The case batch, then its hypotheses minted as step-3 H nodes into the vault the case names "
    "(made from it, or given to batch --into); skipped with its reason when it names none.",
)

JOBS = [
    proximity_job,
    structure_job,
    library_round_job,
    rescore_job,
    case_interpret_job,
    case_confirmed_job,
    case_batch_job,
    case_into_vault_job,
]
