"""Sensors and schedules. Each reads the input registry and Dagster's own records, and changes
nothing while it is evaluated: new partitions and observations travel in its ``SensorResult``,
which Dagster applies only when the tick is committed."""

from __future__ import annotations

import inspect
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
from dagster._core.definitions.data_version import DATA_VERSION_TAG

from assets.partitions import (
    HYPOTHESIS_INPUTS,
    REVISIONS,
    ROUNDS,
    SETS_OF_KIND,
    VAULTS,
    case_revisions,
    hypothesis_inputs,
    library_rounds,
    revision_key,
    vaults,
)
from assets.sources import observed
from hypograph.casework.dispatch import due_retry
from hypograph.casework.package import CasePackage
from hypograph.errors import HypographError
from hypograph.inputs import WITH_HYPOTHESES, InputRecord, fingerprint, input_kind, sub_key
from hypograph.library.run import next_round, pending_rounds, settings_for_round
from pipelines.jobs import case_batch_job, library_round_job, proximity_job, structure_job
from resources import Inputs


def described(decorator, **kwargs):
    """``decorator(**kwargs)`` with the function's docstring as the description the UI shows."""
    return lambda fn: decorator(description=inspect.cleandoc(fn.__doc__), **kwargs)(fn)


ACTIVE = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]


def partition_requests(instance, records: list[InputRecord]) -> list:
    """The add requests that would put each record's id in the partition sets of its kind (and a
    case's current revision in ``case_revisions``), for those not there yet."""
    defs = {HYPOTHESIS_INPUTS: hypothesis_inputs, VAULTS: vaults, REVISIONS: case_revisions}
    wanted: dict[str, list[str]] = {name: [] for name in defs}
    for r in records:
        for name in SETS_OF_KIND[r.kind]:
            wanted[name].append(r.id)
        if r.kind == "case":
            wanted[REVISIONS] += [sub_key(r.id, revision_key(n)) for n in CasePackage(r.path).revisions()]
    requests = []
    for name, keys in wanted.items():
        known = set(instance.get_dynamic_partitions(name))
        new = sorted(set(keys) - known)
        if new:
            requests.append(defs[name].build_add_request(new))
    return requests


@described(sensor, minimum_interval_seconds=30, default_status=DefaultSensorStatus.RUNNING)
def inputs_discovered(context: SensorEvaluationContext, inputs: Inputs):
    """Registers each input folder under the workspace folder (``HYPOGRAPH_WORKSPACE``) and adds its
    partitions: run directories, vaults, libraries, case packages and their revisions. Leave it on
    if you keep your inputs in one folder; without a workspace it skips, saying so."""
    if not inputs.workspace:
        return SkipReason("no workspace folder configured (set HYPOGRAPH_WORKSPACE to discover inputs)")
    workspace = Path(inputs.workspace)
    if not workspace.is_dir():
        return SkipReason(f"workspace folder {workspace} does not exist (HYPOGRAPH_WORKSPACE)")
    found = []
    for path in sorted(p for p in workspace.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            found.append((path, input_kind(path)))
        except HypographError:
            continue  # not an input: an unrelated folder in the workspace
    records = inputs.registry().add_all(found)
    requests = partition_requests(context.instance, records)
    if not requests:
        return SkipReason(f"no new input under {workspace}")
    return SensorResult(dynamic_partitions_requests=requests)


def _has_active_run(instance, key: str) -> bool:
    """A run of partition ``key`` is queued or in progress (its own writes are not a change yet)."""
    return bool(instance.get_run_ids(RunsFilter(tags={"dagster/partition": key}, statuses=ACTIVE), limit=1))


def _latest(instance, asset: str, partition: str, observation: bool = False):
    filter_ = AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[partition])
    fetch = instance.fetch_observations if observation else instance.fetch_materializations
    records = fetch(filter_, limit=1).records
    return records[0] if records else None


@described(
    sensor, jobs=[proximity_job, structure_job], minimum_interval_seconds=30, default_status=DefaultSensorStatus.STOPPED
)
def hypotheses_changed(context: SensorEvaluationContext, inputs: Inputs):
    """Observes each registered input's hypotheses and keeps its results current, from Dagster's
    data versions: proximity when its texts were materialized before the latest observed version;
    for a vault whose proximity is current, step 4 when the hypotheses are not at the version the
    last step 4 left. An edit to a vault thus runs proximity, step 4, proximity (as `hypograph
    structure` does), then nothing. Turn it on to have edits picked up within a minute."""
    known = set(context.instance.get_dynamic_partitions(HYPOTHESIS_INPUTS))
    vault_keys = set(context.instance.get_dynamic_partitions(VAULTS))
    events, requests = [], []
    for r in inputs.registry().of_kind(*WITH_HYPOTHESES):
        if r.id not in known or not r.path.is_dir() or _has_active_run(context.instance, r.id):
            continue
        version = fingerprint(r.path, r.kind)
        seen = _latest(context.instance, "hypotheses", r.id, observation=True)
        changed = seen is None or seen.asset_observation.tags.get(DATA_VERSION_TAG) != version
        if changed:
            events.append(observed(r.id, version))
        texts = _latest(context.instance, "hypothesis_texts", r.id)
        if changed or texts is None or texts.storage_id < seen.storage_id:  # texts read before the latest version
            requests.append(RunRequest(run_key=f"{r.id}:{version}", partition_key=r.id, job_name=proximity_job.name))
        elif r.kind == "vault" and r.id in vault_keys and _left_by_step4(context.instance, r.id) != version:
            requests.append(
                RunRequest(run_key=f"{r.id}:step4:{version}", partition_key=r.id, job_name=structure_job.name)
            )
    if not events and not requests:
        return SkipReason("no input changed")
    return SensorResult(run_requests=requests, asset_events=events)


def _left_by_step4(instance, key: str) -> str | None:
    """The version of a vault's hypotheses its last structure map recorded (what step 4 left)."""
    record = _latest(instance, "structure_map", key)
    if record is None or record.asset_materialization is None:
        return None
    value = record.asset_materialization.metadata.get("hypotheses_version")
    return value.value if value is not None else None


@described(schedule, job=proximity_job, cron_schedule="0 3 * * *", default_status=DefaultScheduleStatus.STOPPED)
def nightly_proximity(context: ScheduleEvaluationContext):
    """Re-runs proximity on every registered run directory, vault and library at 03:00 (a no-op on
    disk when nothing changed). Turn it on when inputs change outside Hypograph's view."""
    return [
        RunRequest(partition_key=key, run_key=f"{key}:{context.scheduled_execution_time:%Y-%m-%d}")
        for key in context.instance.get_dynamic_partitions(HYPOTHESIS_INPUTS)
    ]


@described(
    sensor, job=library_round_job, minimum_interval_seconds=24 * 3600, default_status=DefaultSensorStatus.STOPPED
)
def next_library_round(context: SensorEvaluationContext, inputs: Inputs):
    """Once a day, runs each registered library's next round (or finishes its interrupted one) with
    the previous round's settings, adding the round's partition. A library with no round yet is
    skipped (its first round needs a topic: `hypograph library DIR --topic …`). Needs a model."""
    known = set(context.instance.get_dynamic_partitions(ROUNDS))
    new, requests = [], []
    for r in inputs.registry().of_kind("library"):
        if not r.path.is_dir():
            continue
        pending = pending_rounds(r.path)
        round_key = pending[0] if pending else next_round(r.path)
        try:
            settings_for_round(r.path, round_key, None)
        except HypographError as e:
            context.log.info(f"{r.id}: skipped: {e}")
            continue
        key = sub_key(r.id, round_key)
        if key not in known:
            new.append(key)
        requests.append(RunRequest(partition_key=key, run_key=key))
    if not requests:
        return SkipReason("no library has a round to run")
    add = [library_rounds.build_add_request(new)] if new else []
    return SensorResult(run_requests=requests, dynamic_partitions_requests=add)


@described(sensor, job=case_batch_job, minimum_interval_seconds=60, default_status=DefaultSensorStatus.STOPPED)
def case_retries_due(context: SensorEvaluationContext, inputs: Inputs):
    """Re-dispatches each registered case whose RETRY_PENDING due time has passed (a dispatch never
    sleeps: this sensor is how a retry happens). Turn it on when a model endpoint may be down. Reads
    only registered cases; one that cannot be read is skipped with one logged line."""
    requests = []
    for r in inputs.registry().of_kind("case"):
        try:
            due = due_retry(CasePackage(r.path))
        except (HypographError, OSError, KeyError, TypeError, ValueError) as e:
            context.log.warning(f"{r.id}: {r.path}: skipped: {e}")
            continue
        if due is not None:
            key = sub_key(r.id, revision_key(due.analysis_revision))
            requests.append(RunRequest(partition_key=key, run_key=f"{key}|{due.attempt_id}|{due.due_at}"))
    return requests or SkipReason("no case retry is due")


SENSORS = [inputs_discovered, hypotheses_changed, next_library_round, case_retries_due]
SCHEDULES = [nightly_proximity]
