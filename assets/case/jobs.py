"""The case jobs (draft, confirm, batch, batch into a vault), and the sensor that re-dispatches due retries."""

from dagster import (
    AssetSelection,
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SkipReason,
    define_asset_job,
    sensor,
)

from assets.case.assets import batch_vault_nodes, case_interpretation, interpretation_draft
from assets.groups import CASE, RUN_TAGS, described, launched
from assets.partitions import case_revisions
from hypograph.case.dispatch import due_retry
from hypograph.case.package import CasePackage
from hypograph.ids import numbered_key
from hypograph.inputs import sub_key
from hypograph.scans import BAD_INPUT, registered, skip_line
from resources import Inputs

DRAFT = AssetSelection.assets(interpretation_draft)
CASE_RUN = launched(sub_keys_of="case", reads_input=True)  # every case job: a revision's, reading the package
# What every case job's partitions are, and why a cell stays grey.
REVISIONS = (
    " Partitions: <case id>/r0001, … — each analysis revision of a registered case (`hypograph case new`/`add`, "
    "or the inputs_discovered sensor). A revision not yet confirmed, or superseded by a later `case add`, ends "
    "without running and stays grey (Missing), its reason on the run (tag hypograph/reason) and on the "
    "partition's page."
)

case_interpret_job = define_asset_job(
    "case_interpret",
    run_tags=RUN_TAGS,
    metadata=CASE_RUN,
    selection=[interpretation_draft],
    partitions_def=case_revisions,
    description="The model's draft interpretation of a case revision, saved unconfirmed (`hypograph case "
    "interpret`); with no model, a template. A person then confirms it (`hypograph case confirm`)." + REVISIONS,
)

case_confirmed_job = define_asset_job(
    "case_confirmed",
    run_tags=RUN_TAGS,
    metadata=CASE_RUN,
    selection=[case_interpretation],
    partitions_def=case_revisions,
    description="The interpretation a person confirmed, verified against the case files (`hypograph case "
    "confirm` runs it); while the revision is unconfirmed it ends without running, saying so." + REVISIONS,
)

case_batch_job = define_asset_job(
    "case_batch",
    run_tags=RUN_TAGS,
    metadata=CASE_RUN,
    selection=AssetSelection.groups(CASE) - DRAFT - AssetSelection.assets(batch_vault_nodes),
    partitions_def=case_revisions,
    description="Observe the case package, then the initial hypothesis batch of one revision: the confirmed "
    "interpretation checked, the context frozen, one model round, hypotheses and registry published "
    "together. Needs a model unless the batch is already published." + REVISIONS,
)

case_into_vault_job = define_asset_job(
    "case_batch_into_vault",
    run_tags=RUN_TAGS,
    metadata=CASE_RUN,
    selection=AssetSelection.groups(CASE) - DRAFT,
    partitions_def=case_revisions,
    description="The case batch, then its hypotheses minted as step-3 H nodes into the vault the case names "
    "(made from it, or given to batch --into); skipped with its reason when it names none." + REVISIONS,
)


@described(sensor, job=case_batch_job, minimum_interval_seconds=60, default_status=DefaultSensorStatus.STOPPED)
def case_retries_due(context: SensorEvaluationContext, inputs: Inputs):
    """Re-dispatches each registered case whose RETRY_PENDING due time has passed (a dispatch never
    sleeps: this sensor is how a retry happens). Turn it on when a model endpoint may be down. Reads
    only registered cases; one that cannot be read is skipped with one logged line."""
    requests = []
    for r in registered(inputs.registry(), ("case",), context.log.warning):
        try:
            due = due_retry(CasePackage(r.path))
        except BAD_INPUT as e:
            context.log.warning(skip_line(f"{r.id}: {r.path}", e))
            continue
        if due is not None:
            key = sub_key(r.id, numbered_key(due.analysis_revision))
            requests.append(RunRequest(partition_key=key, run_key=f"{key}|{due.attempt_id}|{due.due_at}"))
    return requests or SkipReason("no case retry is due")


JOBS = [case_interpret_job, case_confirmed_job, case_batch_job, case_into_vault_job]
