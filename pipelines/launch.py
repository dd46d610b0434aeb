"""Launching a job: the one place every front door that runs a job in this process goes through
(``hypograph`` commands and the tests; the UI, sensors and backfills launch the same jobs through
Dagster's daemon). It knows no product: a job, an input's partition, the settings models of the
resources it configures, and what the job declares in its metadata (``assets.groups.launched``:
whose sub-keys its partitions are, whether it reads the input); a failed run becomes one error line
(``run_error``). The products' command flows are their commands', in ``hypograph_cli``.

``execute`` runs one job on one input's partition; ``run_job`` raises for a failed run;
``latest_metadata`` reads what an asset's latest run on an input recorded.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pydantic import BaseModel

from hypograph.errors import HypographError, Interrupted, NotDone
from pipelines.instance import open_instance, register

TAGS = {"hypograph/launched_by": "cli"}  # what tells a command's run from a UI run in the Runs page


def run_config(settings: dict[str, BaseModel] | None = None, offline: bool | None = None, log_level: str = "CRITICAL"):
    """Run config setting each product's settings resource (``{"proximity": ProximitySettings(…)}``;
    fields left None keep the resource's default) and the LLM switch, as the Launchpad does;
    ``offline=None`` keeps what the environment configures."""
    config = {
        name: {"config": {k: getattr(model, k) for k in type(model).model_fields if getattr(model, k) is not None}}
        for name, model in (settings or {}).items()
    }
    if offline is not None:  # else the environment's (resources/llm.py reads it when a step runs)
        config["llm"] = {"config": {"offline": offline}}
    loggers = {"console": {"config": {"log_level": log_level}}, "step_stages": {}}  # steps: the CLI's stage lines
    return {"resources": config, "loggers": loggers}


def execute(
    root: Path,
    job_name: str,
    settings: dict[str, BaseModel] | None = None,
    offline: bool | None = None,
    *,
    sub: str | None = None,
    instance=None,
):
    """Register ``root`` and execute ``job_name`` on its partition: the input's id, or
    ``<id>/<sub>`` (``sub="r0002"``, added to the job's partition set; the input registered as the
    kind the job declares), on ``instance`` (default: the shared one); an input the job reads is
    observed first. Returns the result; never raises for a failed run. A
    run that skipped a step because its partition cannot run yet (``assets.errors.Skip``: not
    confirmed, superseded, no round settings) raises ``NotDone`` (exit 2) with the skip's line."""
    if instance is None:
        with open_instance() as shared:
            return execute(root, job_name, settings, offline, sub=sub, instance=shared)
    from assets.active_runs import PROCESS_TAG
    from assets.errors import REFUSED
    from assets.groups import READS_INPUT, SUB_KEYS_OF
    from assets.sources import observe
    from hypograph.code_version import code_version
    from hypograph.processes import this_process
    from io_managers.fleet import VERSION_TAG
    from pipelines.definitions import defs

    job = defs.resolve_job_def(job_name)
    declared = {name: getattr(value, "value", value) for name, value in job.metadata.items()}
    record = register(instance, root, None if sub is None else declared.get(SUB_KEYS_OF))
    key = record.id
    if sub is not None:
        from hypograph.inputs import sub_key

        key = sub_key(record.id, sub)
        if not instance.has_dynamic_partition(job.partitions_def.name, key):
            instance.add_dynamic_partitions(job.partitions_def.name, [key])
    if declared.get(READS_INPUT):
        observe(instance, record, key)
    # A step that ended with no output (assets.errors.step) leaves its blocking checks without a
    # result, which Dagster warns of on its module logger (Python's last-resort handler: raw on the
    # terminal); the skip's own line says why, once.
    logging.getLogger("dagster._core.execution.plan.active").setLevel(logging.ERROR)
    # Failures are reported by the caller in one line each; the UI keeps the full logs and traces.
    result = job.execute_in_process(
        instance=instance,
        partition_key=key,
        raise_on_error=False,
        run_config=run_config(settings, offline),
        # a later command ends the run if this process dies; workers of other code refuse its steps
        tags={**TAGS, PROCESS_TAG: this_process(), VERSION_TAG: code_version()},
    )
    lines = skips(result)
    if result.success and lines:  # the run did what it could: the rest is not done yet (or refused)
        refused = any(status == REFUSED for _, _, status in _skip_records(result))
        why = "; ".join(lines) + f" ({job_name} run {result.run_id[:8]} skipped it: its events in `make ui`)"
        raise (HypographError if refused else NotDone)(why)
    return result


def run_job(root: Path, job_name: str, settings: dict[str, BaseModel] | None = None, offline: bool | None = None, **kw):
    """``execute``, with a failed run turned into one HypographError: the cause's own line first,
    then where to see the rest."""
    result = execute(root, job_name, settings, offline, **kw)
    if not result.success:
        raise run_error(job_name, result)
    return result


def latest_metadata(root: Path, asset: str) -> dict:
    """The plain metadata values of ``asset``'s latest materialization on ``root``'s partition, as
    the instance recorded it ({} when it has none)."""
    from dagster import AssetKey, AssetRecordsFilter

    with open_instance() as instance:
        key = register(instance, root).id
        found = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[key]), limit=1
        ).records
    if not found:
        return {}
    materialization = found[0].event_log_entry.asset_materialization
    return {k: v.value for k, v in materialization.metadata.items()}


def failed_line(job_name: str, result) -> str:
    """``<cause>; <more causes> (proximity run 1a2b3c4d: the run's events in `make ui`)``."""
    return "; ".join(failures(result)) + f" ({job_name} run {result.run_id[:8]} failed: its events in `make ui`)"


def run_error(job_name: str, result) -> HypographError:
    """A failed run as the error a command raises, on ``failed_line``: a ``NotDone`` (exit 2) when
    every failed step failed for something not done yet (its ``Failure`` status ``NOT_DONE``: a
    model outage, a busy vault) and no check failed; ``Interrupted`` (exit 130) when a step was
    interrupted (Ctrl-C, SIGTERM); else a HypographError (exit 1)."""
    from assets.errors import NOT_DONE as NOT_DONE_STATUS

    if _interrupted(result):
        return Interrupted(
            f"interrupted: {job_name} run {result.run_id[:8]} ended as failed; the files it had not finished "
            "were never put in place: run the command again"
        )
    failed = [e.step_failure_data.user_failure_data for e in result.all_events if e.is_step_failure]
    statuses = {getattr(f.metadata.get("status"), "value", None) if f else None for f in failed}
    checks_failed = any(not c.passed for c in result.get_asset_check_evaluations())
    not_done = statuses == {NOT_DONE_STATUS} and not checks_failed
    return (NotDone if not_done else HypographError)(failed_line(job_name, result))


def _interrupted(result) -> bool:
    """A step, or the run between two steps, was interrupted (Dagster turns SIGINT and SIGTERM into
    this error while a run goes on)."""
    errors = (getattr(e.event_specific_data, "error", None) for e in result.all_events)
    return any(error is not None and error.cls_name == "DagsterExecutionInterruptedError" for error in errors)


def skips(result) -> list[str]:
    """``step: reason`` of each step that ended with no output because its partition cannot run
    yet or never will: the ``skipped`` observations ``assets.errors`` records."""
    return [f"{step}: {line}" for step, line, _ in _skip_records(result)]


def _skip_records(result) -> list[tuple[str, str, str]]:
    """(step, line, status) of each skip the run's steps recorded."""
    out = []
    for e in result.all_events:
        metadata = e.event_specific_data.asset_observation.metadata if e.event_type_value == "ASSET_OBSERVATION" else {}
        if "skipped" in metadata:
            out.append((e.step_key, metadata["skipped"].value, metadata["status"].value))
    return out


def failures(result) -> list[str]:
    """One line per failed step (its innermost error: a ``Failure``'s description, a pydantic error's
    field and reason), per failed resource, per failed asset check; else the run's own error."""
    out = []
    for e in result.all_events:
        if e.is_step_failure:
            user = e.step_failure_data.user_failure_data
            line = user.description if user is not None and user.description else error_line(e.step_failure_data.error)
            if "blocking asset check" not in line:  # the check's own line below names what failed
                out.append(f"{e.step_key}: {line}")
        elif e.event_type_value == "RESOURCE_INIT_FAILURE":
            out.append(error_line(getattr(e.event_specific_data, "error", None)))
    for check in result.get_asset_check_evaluations():
        if not check.passed:
            out.append(check_line(check))
    if not out:
        for e in result.all_events:
            if e.event_type_value == "PIPELINE_FAILURE":
                out.append(error_line(getattr(e.event_specific_data, "error", None)))
    return out or ["failed"]


def check_line(check) -> str:
    """A failed asset check: its name and each violation its table names (``node: reason``)."""
    count = check.metadata["violations"].value if "violations" in check.metadata else "?"
    table = check.metadata.get("violation_list")
    rows = [r.data for r in getattr(table, "records", None) or []]
    head = f"check {check.check_name} failed ({count} violation{'s' * (count != 1)})"
    return head + "".join(f"\n  {r.get('id')}: {r.get('reason')}" for r in rows)


def error_line(error) -> str:
    """The innermost cause of a serialized error as one line, without its class path; a pydantic
    ValidationError as ``Model.field: reason (got value)`` for each field."""
    while error is not None and error.cause is not None:
        error = error.cause
    if error is None:
        return "failed"
    message = error.message.strip()
    if error.cls_name == "ValidationError":
        return _validation_line(message)
    first = message.splitlines()[0] if message else error.cls_name
    prefix, _, rest = first.partition(": ")
    return rest if rest and prefix.split(".")[-1] == error.cls_name else first


def _validation_line(message: str) -> str:
    """``1 validation error for ProximitySettings\\ngraph_threshold\\n  Input should be ... [type=...,
    input_value=30.0, ...]`` as ``ProximitySettings.graph_threshold: Input should be ... (got 30.0)``."""
    lines = message.splitlines()
    model = lines[0].rsplit(" for ", 1)[-1] if lines else "settings"
    out, field = [], None
    for line in lines[1:]:
        if not line.startswith(" "):
            field = line.strip()
        elif line.startswith("  ") and not line.startswith("    ") and field is not None:
            reason, _, details = line.strip().partition(" [")
            got = details.split("input_value=", 1)[1].split(",", 1)[0] if "input_value=" in details else None
            out.append(f"{model}.{field}: {reason}" + (f" (got {got})" if got else ""))
    return "; ".join(out) or lines[0]
