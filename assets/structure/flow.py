"""The ``hypotheses_changed`` sensor: keeps each registered input's proximity and step 4 current,
one job per tick, as ``assets/structure/next_job.py`` plans them (the plan ``hypograph structure`` follows)."""

from __future__ import annotations

from dagster import DefaultSensorStatus, RunRequest, SensorEvaluationContext, SensorResult, SkipReason, sensor

from assets.active_runs import has_active_run
from assets.groups import described
from assets.partitions import HYPOTHESIS_INPUTS
from assets.proximity.jobs import proximity_job
from assets.sources import observed
from assets.structure.jobs import structure_job
from assets.structure.next_job import latest, next_job, version_of
from hypograph.inputs import fingerprint
from hypograph.paths import WITH_HYPOTHESES
from hypograph.scans import BAD_INPUT, registered, skip_line
from resources import Inputs


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
        if r.id not in known or not r.path.is_dir() or has_active_run(context.instance, r.id):
            continue
        try:  # one input that cannot be read is skipped, saying so; the others are still looked at
            version = fingerprint(r.path, r.kind)
        except BAD_INPUT as e:
            context.log.warning(skip_line(f"{r.id}: {r.path}", e))
            continue
        if version_of(latest(context.instance, "hypotheses", r.id, observation=True)) != version:
            events.append(observed(r.id, version))  # what next_job reads once the tick is committed
            job = proximity_job.name
        else:
            job = next_job(context.instance, r, version)
        if job is not None:
            # "step4:" is the structure job's run-key prefix as stored: a new one would request each vault again
            step = "" if job == proximity_job.name else "step4:"
            requests.append(RunRequest(run_key=f"{r.id}:{step}{version}", partition_key=r.id, job_name=job))
    if not events and not requests:
        return SkipReason("no input changed")
    return SensorResult(run_requests=requests, asset_events=events)
