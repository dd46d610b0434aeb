"""Sensors and schedules: inputs discovered under a workspace folder, runs requested on change."""

from __future__ import annotations

import json
from pathlib import Path

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterRunStatus,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)

from assets.partitions import INPUTS, REVISIONS, ROUNDS, case_revision_keys, revision_partition, round_partition
from assets.partitions import inputs as input_partitions
from assets.partitions import revisions as revision_partitions
from hypograph.casework.dispatch import due_retries
from hypograph.casework.package import MANIFEST
from hypograph.hypotheses import input_fingerprint
from hypograph.library.run import next_round, pending_rounds
from hypograph.library.schema import library_path
from hypograph.library.state import round_keys
from hypograph.paths import detect_kind
from pipelines.jobs import case_batch_job, library_round_job, proximity_job, structure_job
from resources import Inputs

FINGERPRINT = "hypotheses_fingerprint"  # metadata: the input_fingerprint a run left
FINGERPRINT_ASSET = {"vault": "structured_proximity", "run-dir": "hypothesis_texts"}
ACTIVE = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
          DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]


def looks_like_input(path: Path) -> bool:
    """A run directory or vault (``hypotheses/``), a library, or a case package."""
    return path.is_dir() and ((path / "hypotheses").is_dir() or library_path(path).exists()
                              or (path / MANIFEST).is_file())


@sensor(minimum_interval_seconds=30, default_status=DefaultSensorStatus.RUNNING)
def inputs_discovered(context: SensorEvaluationContext, inputs: Inputs):
    """Register every input folder under ``Inputs.workspace`` (``$HYPOGRAPH_WORKSPACE``) as a partition,
    and each case package's analysis revisions."""
    if not inputs.workspace:
        return SkipReason("no workspace folder configured (set HYPOGRAPH_WORKSPACE to discover inputs)")
    if not Path(inputs.workspace).is_dir():
        return SkipReason(f"workspace folder {inputs.workspace} does not exist (HYPOGRAPH_WORKSPACE)")
    known = set(context.instance.get_dynamic_partitions(INPUTS))
    found = [p.resolve() for p in sorted(Path(inputs.workspace).iterdir()) if looks_like_input(p)]
    new = [str(p) for p in found if str(p) not in known]
    known_revisions = set(context.instance.get_dynamic_partitions(REVISIONS))
    revisions = sorted({k for p in found for k in case_revision_keys(p)} - known_revisions)
    if not new and not revisions:
        return SkipReason(f"no new input under {inputs.workspace}")
    requests = [input_partitions.build_add_request(new)] if new else []
    requests += [revision_partitions.build_add_request(revisions)] if revisions else []
    return SensorResult(dynamic_partitions_requests=requests)



@sensor(jobs=[proximity_job, structure_job], minimum_interval_seconds=30, default_status=DefaultSensorStatus.STOPPED)
def hypotheses_changed(context: SensorEvaluationContext):
    """Request a run for each registered input whose ``hypotheses/`` changed since the last tick:
    structure for a vault, proximity for a run directory. The cursor maps input -> fingerprint.

    An input is unchanged if its fingerprint is the cursor's or the one its last run left (a
    structure run rewrites ``hypotheses/`` itself: states, backlinks); while a run of it is queued
    or running it is looked at again on a later tick."""
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    requests = []
    for key in context.instance.get_dynamic_partitions(INPUTS):
        root = Path(key)
        if not (root / "hypotheses").is_dir() or _has_active_run(context.instance, key):
            continue
        fingerprint = input_fingerprint(root)
        if seen.get(key) == fingerprint:
            continue
        kind = detect_kind(root)
        seen[key] = fingerprint
        if fingerprint == _left_by_last_run(context.instance, key, kind):
            continue
        job = structure_job if kind == "vault" else proximity_job
        requests.append(RunRequest(run_key=f"{key}:{fingerprint}", partition_key=key, job_name=job.name))
    context.update_cursor(json.dumps(seen, sort_keys=True))
    return requests or SkipReason("no input changed")


def _has_active_run(instance, key: str) -> bool:
    """A run of input ``key`` is queued or in progress (its own writes are not a change yet)."""
    return bool(instance.get_run_ids(RunsFilter(tags={"dagster/partition": key}, statuses=ACTIVE), limit=1))


def _left_by_last_run(instance, key: str, kind: str) -> str | None:
    """The ``hypotheses/`` fingerprint the latest run of ``key`` recorded (structure's last asset for
    a vault, proximity's first for a run directory, whose run never writes ``hypotheses/``)."""
    asset = AssetKey(FINGERPRINT_ASSET[kind])
    records = instance.fetch_materializations(AssetRecordsFilter(asset_key=asset, asset_partitions=[key]),
                                              limit=1).records
    if not records or records[0].asset_materialization is None:
        return None
    value = records[0].asset_materialization.metadata.get(FINGERPRINT)
    return value.value if value is not None else None


@schedule(job=proximity_job, cron_schedule="0 3 * * *", default_status=DefaultScheduleStatus.STOPPED)
def nightly_proximity(context: ScheduleEvaluationContext):
    """Re-run proximity on every registered input each night (a no-op on disk when nothing changed)."""
    return [RunRequest(partition_key=key, run_key=f"{key}:{context.scheduled_execution_time:%Y-%m-%d}")
            for key in context.instance.get_dynamic_partitions(INPUTS)]


@schedule(job=library_round_job, cron_schedule="0 4 * * *", default_status=DefaultScheduleStatus.STOPPED)
def next_library_round(context: ScheduleEvaluationContext):
    """For each registered library, add its next round partition (or its unfinished one) and run it
    with the previous round's settings."""
    requests = []
    for key in context.instance.get_dynamic_partitions(INPUTS):
        root = Path(key)
        if not (library_path(root).exists() or round_keys(root)):
            continue
        pending = pending_rounds(root)
        round_key = pending[0] if pending else next_round(root)
        if not context.instance.has_dynamic_partition(ROUNDS, round_key):
            context.instance.add_dynamic_partitions(ROUNDS, [round_key])
        requests.append(RunRequest(partition_key=round_partition(key, round_key),
                                   run_key=f"{key}|{round_key}"))
    return requests


@sensor(job=case_batch_job, minimum_interval_seconds=60, default_status=DefaultSensorStatus.STOPPED)
def case_retries_due(context: SensorEvaluationContext):
    """Re-dispatch each registered case whose RETRY_PENDING due time has passed (a dispatch never
    sleeps: this sensor is how a retry happens). One request per case, revision and failed round."""
    requests = []
    for key in context.instance.get_dynamic_partitions(INPUTS):
        root = Path(key)
        if not (root / MANIFEST).is_file():
            continue
        for due in due_retries(root.parent):
            if due.case_id == root.name:
                requests.append(RunRequest(partition_key=revision_partition(key, due.analysis_revision),
                                           run_key=f"{key}|{due.analysis_revision}|{due.attempt_id}|{due.due_at}"))
    return requests or SkipReason("no case retry is due")
