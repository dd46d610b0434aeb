"""The proximity job, and the nightly schedule that re-runs it on every input."""

from dagster import (
    AssetSelection,
    DefaultScheduleStatus,
    RunRequest,
    ScheduleEvaluationContext,
    define_asset_job,
    schedule,
)

from assets.groups import PROXIMITY, described
from assets.partitions import HYPOTHESIS_INPUTS, hypothesis_inputs

proximity_job = define_asset_job(
    "proximity",
    selection=AssetSelection.groups(PROXIMITY),
    partitions_def=hypothesis_inputs,
    description="Observe the input's hypotheses, then embed, graph, cluster, list and adjudicate its "
    "near-duplicates and name its clusters (proximity/ in the input). Runs on any run directory, "
    "vault or library; a no-op on disk when nothing changed.",
)


@described(schedule, job=proximity_job, cron_schedule="0 3 * * *", default_status=DefaultScheduleStatus.STOPPED)
def nightly_proximity(context: ScheduleEvaluationContext):
    """Re-runs proximity on every registered run directory, vault and library at 03:00 (a no-op on
    disk when nothing changed). Turn it on when inputs change outside Hypograph's view."""
    return [
        RunRequest(partition_key=key, run_key=f"{key}:{context.scheduled_execution_time:%Y-%m-%d}")
        for key in context.instance.get_dynamic_partitions(HYPOTHESIS_INPUTS)
    ]
