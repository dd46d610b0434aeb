"""Proximity -> step 4 -> proximity, written once: ``next_job`` says which job brings an input's
results up to date next, from Dagster's own records. The ``hypotheses_changed`` sensor
(``assets/structure/flow.py``) requests it one job per tick; ``hypograph structure``
(``hypograph_cli/structure.py``) runs it until it says none, each job at least once whose settings differ
from its last run's (``settings_changed``), so a second command on an unchanged vault with the same
settings starts no run.

An edit to a vault thus runs proximity (its texts were read before the latest version), step 4
(the hypotheses are not at the version step 4 last left), then proximity again when step 4
rewrote them (its structure map reports the version it left, a new observation), then nothing.

It imports no asset module itself; it lives beside the sensor that asks it (``flow.py``), the one owner of the flow.
"""

from __future__ import annotations

from dagster import AssetKey, AssetRecordsFilter, DagsterRunStatus, RunsFilter
from dagster._core.definitions.data_version import DATA_VERSION_TAG

from assets.partitions import VAULTS
from hypograph.inputs import InputRecord

FLOW = ("proximity", "structure")  # a vault's; other inputs have proximity only


def next_job(instance, record: InputRecord, version: str, rerun: dict[str, str] | None = None) -> str | None:
    """The job that brings ``record``'s results up to date with its hypotheses at ``version`` (its
    fingerprint now), or None when they are current (``next_step``'s job)."""
    step = next_step(instance, record, version, rerun)
    return step[0] if step else None


def next_step(instance, record: InputRecord, version: str, rerun: dict[str, str] | None = None):
    """(job, why) of the job that brings ``record``'s results up to date, or None: the first job
    of the flow that ``rerun`` names (job -> why: a command's settings differ from that job's last
    run, ``settings_changed``) or that Dagster's records say is due (or whose files are gone from
    the input). ``why`` is the reason that decided, said as it happened."""
    flow = FLOW if record.kind == "vault" and record.id in instance.get_dynamic_partitions(VAULTS) else FLOW[:1]
    for job in flow:
        why = (rerun or {}).get(job) or _due(instance, record, job, version)
        if why:
            return job, why
    return None


# What each job of the flow leaves on disk: when one is gone (a person deleted it), the job is due.
WRITES = {
    "proximity": ("proximity/graph.json", "proximity/clusters.json", "proximity/dupes.json", "proximity/verdicts.json"),
    "structure": ("agent-notes/structure.md",),
}


def _due(instance, record: InputRecord, job: str, version: str) -> str | None:
    """Why ``job`` is due on ``record`` at ``version``, or None when it is not."""
    gone = [rel for rel in WRITES[job] if not (record.path / rel).is_file()]
    if gone:
        return f"{gone[0]} was gone" + (f", and {len(gone) - 1} more of its files" if len(gone) > 1 else "")
    if job == FLOW[0]:  # the texts were read before the latest version (or never)
        seen = latest(instance, "hypotheses", record.id, observation=True)
        texts = latest(instance, "hypothesis_texts", record.id)
        if version_of(seen) != version:
            return "the hypotheses changed since they were last observed"
        if texts is None or texts.storage_id < seen.storage_id:
            return "it had not read the hypotheses at their current version"
        return None
    if _left_by_structure(instance, record.id) != version:
        return "the hypotheses are not at the version step 4 last left"
    return None


def settings_changed(instance, key: str, resources: dict) -> dict[str, str]:
    """The jobs of the flow whose last successful run on partition ``key`` was configured with
    other resources than ``resources`` (a run config's ``resources``), or that never succeeded,
    each with why: a command runs them again even when the records say the results are current."""
    changed = {}
    for job in FLOW:
        runs = instance.get_runs(
            RunsFilter(job_name=job, tags={"dagster/partition": key}, statuses=[DagsterRunStatus.SUCCESS]), limit=1
        )
        if not runs:
            changed[job] = "it had never succeeded on this input"
            continue
        theirs = runs[0].run_config.get("resources") or {}
        if theirs != resources:
            run = runs[0]
            by = "a UI backfill" if "dagster/backfill" in run.tags else "the UI or a sensor"
            by = "a command" if run.tags.get("hypograph/launched_by") == "cli" else by  # pipelines/launch.py's TAGS
            changed[job] = (
                f"its last successful run, {run.run_id[:8]} (launched by {by}), had other settings: "
                + ", ".join(_differ(theirs, resources))
            )
    return changed


def _differ(a, b, at: str = "") -> list[str]:
    """The dotted paths at which two run configs differ (``proximity.config.graph_threshold``)."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return [at or "resources"] if a != b else []
    keys = sorted({*a, *b})
    return [p for k in keys for p in _differ(a.get(k), b.get(k), f"{at}.{k}" if at else k)]


def version_of(record) -> str | None:
    return record.asset_observation.tags.get(DATA_VERSION_TAG) if record is not None else None


def latest(instance, asset: str, partition: str, observation: bool = False):
    filter_ = AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[partition])
    fetch = instance.fetch_observations if observation else instance.fetch_materializations
    records = fetch(filter_, limit=1).records
    return records[0] if records else None


def _left_by_structure(instance, key: str) -> str | None:
    """The version of a vault's hypotheses its last structure map recorded (what step 4 left)."""
    record = latest(instance, "structure_map", key)
    if record is None or record.asset_materialization is None:
        return None
    value = record.asset_materialization.metadata.get("hypotheses_version")
    return value.value if value is not None else None
