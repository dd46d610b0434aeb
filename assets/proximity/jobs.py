"""The proximity job, the report job (the pictures, off proximity's critical path), and the
nightly schedule that re-runs proximity on every input."""

from dagster import (
    AssetSelection,
    AutomationConditionSensorDefinition,
    DefaultScheduleStatus,
    RunRequest,
    ScheduleEvaluationContext,
    define_asset_job,
    schedule,
)

from assets.groups import PROXIMITY, RUN_TAGS, described, launched
from assets.partitions import HYPOTHESIS_INPUTS, hypothesis_inputs
from hypograph.paths import WITH_HYPOTHESES
from hypograph.scans import registered
from resources import Inputs

REPORT = AssetSelection.assets("proximity_report")

proximity_job = define_asset_job(
    "proximity",
    run_tags=RUN_TAGS,
    metadata=launched(reads_input=True),
    selection=AssetSelection.groups(PROXIMITY) - REPORT,
    partitions_def=hypothesis_inputs,
    description="Observe the input's hypotheses, then embed, graph, cluster, list and adjudicate its "
    "near-duplicates and name its clusters (proximity/ in the input). Runs on any run directory, "
    "vault or library; a no-op on disk when nothing changed. The pictures are the report job's. "
    "Partitions: every registered run directory, vault and library (`hypograph add`, or the inputs_discovered "
    "sensor).",
)

report_job = define_asset_job(
    "report",
    run_tags=RUN_TAGS,
    selection=REPORT,
    partitions_def=hypothesis_inputs,
    description="The pictures of the input's proximity files (report.html, cluster-map.png, vault-map.png, "
    "thresholds.png): run by `hypograph report`, from here, or by `pictures_after_proximity`. Launched before "
    "the proximity job on an input, it ends without running and says so.",
)

pictures_after_proximity = AutomationConditionSensorDefinition(
    "pictures_after_proximity",
    target=REPORT,
    emit_backfills=False,
    description="Builds an input's pictures (the report job) once after each proximity run that "
    "materialized their inputs, in a run of its own. Off by default: `hypograph report` builds them on request.",
)


@described(schedule, job=proximity_job, cron_schedule="0 3 * * *", default_status=DefaultScheduleStatus.STOPPED)
def nightly_proximity(context: ScheduleEvaluationContext, inputs: Inputs):
    """Re-runs proximity on every registered run directory, vault and library at 03:00 (a no-op on
    disk when nothing changed). Turn it on when inputs change outside Hypograph's view. An input
    whose folder is gone is passed over, in one logged line."""
    present = {r.id for r in registered(inputs.registry(), WITH_HYPOTHESES, context.log.warning)}
    return [
        RunRequest(partition_key=key, run_key=f"{key}:{context.scheduled_execution_time:%Y-%m-%d}")
        for key in context.instance.get_dynamic_partitions(HYPOTHESIS_INPUTS)
        if key in present
    ]
