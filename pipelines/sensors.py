"""Sensors and schedules: inputs discovered under a workspace folder, runs requested on change."""

from __future__ import annotations

import json
from pathlib import Path

from dagster import (
    DefaultScheduleStatus, DefaultSensorStatus, RunRequest, ScheduleEvaluationContext, SensorEvaluationContext,
    SensorResult, SkipReason, schedule, sensor,
)

from assets.partitions import INPUTS
from assets.partitions import inputs as input_partitions
from hypograph.hypotheses import detect_kind, input_fingerprint
from pipelines.jobs import proximity_job, structure_job
from resources import Inputs


@sensor(minimum_interval_seconds=30, default_status=DefaultSensorStatus.RUNNING)
def inputs_discovered(context: SensorEvaluationContext, inputs: Inputs):
    """Register every input folder under ``Inputs.workspace`` (``$HYPOGRAPH_WORKSPACE``) as a partition."""
    if not inputs.workspace:
        return SkipReason("no workspace folder configured (set HYPOGRAPH_WORKSPACE to discover inputs)")
    known = set(context.instance.get_dynamic_partitions(INPUTS))
    found = sorted(str(p.resolve()) for p in Path(inputs.workspace).iterdir() if (p / "hypotheses").is_dir())
    new = [key for key in found if key not in known]
    if not new:
        return SkipReason(f"no new input under {inputs.workspace}")
    return SensorResult(dynamic_partitions_requests=[input_partitions.build_add_request(new)])



@sensor(jobs=[proximity_job, structure_job], minimum_interval_seconds=30, default_status=DefaultSensorStatus.STOPPED)
def hypotheses_changed(context: SensorEvaluationContext):
    """Request a run for each registered input whose ``hypotheses/`` changed since the last tick:
    structure for a vault, proximity for a run directory. The cursor maps input -> fingerprint."""
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    requests = []
    for key in context.instance.get_dynamic_partitions(INPUTS):
        root = Path(key)
        if not (root / "hypotheses").is_dir():
            continue
        fingerprint = input_fingerprint(root)
        if seen.get(key) == fingerprint:
            continue
        seen[key] = fingerprint
        job = structure_job if detect_kind(root) == "vault" else proximity_job
        requests.append(RunRequest(run_key=f"{key}:{fingerprint}", partition_key=key, job_name=job.name))
    context.update_cursor(json.dumps(seen, sort_keys=True))
    return requests or SkipReason("no input changed")


@schedule(job=proximity_job, cron_schedule="0 3 * * *", default_status=DefaultScheduleStatus.STOPPED)
def nightly_proximity(context: ScheduleEvaluationContext):
    """Re-run proximity on every registered input each night (a no-op on disk when nothing changed)."""
    return [RunRequest(partition_key=key, run_key=f"{key}:{context.scheduled_execution_time:%Y-%m-%d}")
            for key in context.instance.get_dynamic_partitions(INPUTS)]
