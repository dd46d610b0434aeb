"""Proximity -> step 4 -> proximity, written once: ``next_job`` says which job brings an input's
results up to date next, from Dagster's own records. The ``hypotheses_changed`` sensor requests it
one job per tick; ``hypograph structure`` (``pipelines/launch.py``) runs it until it says none.

An edit to a vault thus runs proximity (its texts were read before the latest version), step 4
(the hypotheses are not at the version step 4 last left), then proximity again when step 4
rewrote them (its structure map reports the version it left, a new observation), then nothing.
"""

from __future__ import annotations

from dagster import (
    AssetKey,
    AssetRecordsFilter,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)
from dagster._core.definitions.data_version import DATA_VERSION_TAG

from assets.groups import described
from assets.partitions import HYPOTHESIS_INPUTS, VAULTS
from assets.proximity.jobs import proximity_job
from assets.sources import observed
from assets.structure.jobs import structure_job
from hypograph.inputs import WITH_HYPOTHESES, InputRecord, fingerprint
from hypograph.skips import BAD_INPUT, registered, skip_line
from resources import Inputs

FLOW = (proximity_job.name, structure_job.name)  # a vault's; other inputs have proximity only

ACTIVE = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]


def next_job(instance, record: InputRecord, version: str, ran: tuple[str, ...] | None = None) -> str | None:
    """The job that brings ``record``'s results up to date with its hypotheses at ``version`` (its
    fingerprint now), or None when they are current. ``ran``: a command asked for the whole flow
    and has run these jobs so far (each job of the flow then runs at least once, in order, whatever
    the records say: its settings may differ from the last run's)."""
    flow = FLOW if record.kind == "vault" and record.id in instance.get_dynamic_partitions(VAULTS) else FLOW[:1]
    if ran is not None:
        due = [job for job in flow if job not in ran]
        if due:
            return due[0]
    seen = _latest(instance, "hypotheses", record.id, observation=True)
    texts = _latest(instance, "hypothesis_texts", record.id)
    if _version(seen) != version or texts is None or texts.storage_id < seen.storage_id:
        return proximity_job.name  # the texts were read before the latest version (or never)
    if structure_job.name in flow and _left_by_step4(instance, record.id) != version:
        return structure_job.name
    return None


def _version(record) -> str | None:
    return record.asset_observation.tags.get(DATA_VERSION_TAG) if record is not None else None


def _has_active_run(instance, key: str) -> bool:
    """A run of partition ``key`` is queued or in progress (its own writes are not a change yet)."""
    return bool(instance.get_run_ids(RunsFilter(tags={"dagster/partition": key}, statuses=ACTIVE), limit=1))


def _latest(instance, asset: str, partition: str, observation: bool = False):
    filter_ = AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[partition])
    fetch = instance.fetch_observations if observation else instance.fetch_materializations
    records = fetch(filter_, limit=1).records
    return records[0] if records else None


def _left_by_step4(instance, key: str) -> str | None:
    """The version of a vault's hypotheses its last structure map recorded (what step 4 left)."""
    record = _latest(instance, "structure_map", key)
    if record is None or record.asset_materialization is None:
        return None
    value = record.asset_materialization.metadata.get("hypotheses_version")
    return value.value if value is not None else None


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
    events, requests = [], []
    for r in registered(inputs.registry(), WITH_HYPOTHESES, context.log.warning):
        if r.id not in known or not r.path.is_dir() or _has_active_run(context.instance, r.id):
            continue
        try:  # one input that cannot be read is skipped, saying so; the others are still looked at
            version = fingerprint(r.path, r.kind)
        except BAD_INPUT as e:
            context.log.warning(skip_line(f"{r.id}: {r.path}", e))
            continue
        if _version(_latest(context.instance, "hypotheses", r.id, observation=True)) != version:
            events.append(observed(r.id, version))  # what next_job reads once the tick is committed
            job = proximity_job.name
        else:
            job = next_job(context.instance, r, version)
        if job is not None:
            step = "" if job == proximity_job.name else "step4:"
            requests.append(RunRequest(run_key=f"{r.id}:{step}{version}", partition_key=r.id, job_name=job))
    if not events and not requests:
        return SkipReason("no input changed")
    return SensorResult(run_requests=requests, asset_events=events)
