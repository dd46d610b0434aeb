"""The one Dagster instance every ``hypograph`` command and ``make ui`` share, and running a job on
one input partition of it.

The instance lives in ``$DAGSTER_HOME`` when set, else ``~/.hypograph/dagster``; one instance holds
the runs of every input, so one UI shows them all.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypograph.atomic import write_text
from hypograph.errors import HypographError
from hypograph.inputs import InputRecord, Kind, Registry
from hypograph.locks import file_lock

# Pools limit concurrent steps: library rounds generate one at a time (pool library_generation).
# python_logs: a run's console (the `hypograph ui` terminal) at INFO, not DEBUG, and the domain's
# stage lines (hypograph.progress) kept in each run's log at INFO.
INSTANCE_YAML = (
    "telemetry:\n  enabled: false\nconcurrency:\n  pools:\n    default_limit: 1\n"
    "python_logs:\n  python_log_level: INFO\n  managed_python_loggers:\n    - hypograph.progress\n"
)
OLD_INSTANCE_YAML = "telemetry:\n  enabled: false\nconcurrency:\n  pools:\n    default_limit: 1\n"
TAGS = {"hypograph/launched_by": "cli"}  # what tells a CLI run from a UI run in the Runs page


def dagster_home() -> Path:
    """``$DAGSTER_HOME`` if set, else ``~/.hypograph/dagster`` (created with telemetry off)."""
    from resources.inputs import dagster_home as _home

    home = _home()
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    if not path.exists() or path.read_text() == OLD_INSTANCE_YAML:  # ours, unedited: brought up to date
        write_text(path, INSTANCE_YAML)
    return home


def _fast_sqlite_commits() -> None:
    """This process's SQLite connections commit without waiting for the disk (``synchronous=OFF``).

    A run stores each of its ~130 events in its own transaction on a new connection, and every
    commit and close waited for an fsync: 2 to 4 s of a 30-hypothesis proximity run. SQLite stays
    consistent if the process dies; only an OS crash or power loss can cost the last events of
    run history (never an input file: those are written atomically by hypograph itself). The UI's
    and the daemon's processes keep SQLite's default."""
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if getattr(_fast_sqlite_commits, "done", False):
        return

    @event.listens_for(Engine, "connect")
    def _pragma(connection, _record) -> None:
        if isinstance(connection, sqlite3.Connection):
            connection.execute("PRAGMA synchronous=OFF")

    _fast_sqlite_commits.done = True


@contextmanager
def open_instance() -> Iterator:
    """The shared instance. Opening is serialized by a file lock: two commands creating a fresh
    storage at once would otherwise race on its schema migrations."""
    from dagster import DagsterInstance

    _fast_sqlite_commits()
    home = dagster_home()
    with file_lock(home / ".open.lock"):
        try:
            instance = DagsterInstance.from_config(str(home))
            instance.get_dynamic_partitions("vaults")  # touches the storage now, under the lock
        except Exception as e:  # noqa: BLE001 - any storage failure becomes one actionable line
            raise HypographError(
                f"Dagster storage in {home} is unreadable ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else 'no detail'}); move the folder aside "
                "and re-run (only run history is lost, no input file)"
            ) from None
    with instance:
        yield instance


def registry() -> Registry:
    """The input registry of the shared instance (``$DAGSTER_HOME/inputs.json``)."""
    from resources.inputs import REGISTRY_FILE

    return Registry(dagster_home() / REGISTRY_FILE)


def register(instance, root: Path, kind: Kind | None = None) -> InputRecord:
    """Record ``root`` in the registry and add its id to the partition sets of its kind, and a case
    package's revisions (idempotent); returns its record."""
    from pipelines.sensors import partition_requests

    record = registry().add(root, kind)
    for request in partition_requests(instance, [record]):
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return record


def _endpoint_from_environment() -> dict:
    """The model settings this process's environment names now (never the key, which the resource
    reads from its variable): a command runs with the model, deadline and concurrency its own
    environment sets, whatever the environment was when the definitions were first imported."""
    from hypograph.llm import LLMConfig
    from resources.llm import SETTINGS

    config = LLMConfig.from_env()
    return {k: getattr(config, k) for k in ("model", "base_url", *SETTINGS) if getattr(config, k) is not None}


def observe_case(root: Path) -> None:
    """Register a case package (its new revision becomes a partition) and record its version."""
    from assets.sources import observe

    with open_instance() as instance:
        record = register(instance, root, "case")
        from assets.partitions import revision_key
        from hypograph.casework.package import CasePackage
        from hypograph.inputs import sub_key

        observe(instance, record, sub_key(record.id, revision_key(CasePackage(root).manifest()["analysis_revision"])))


def run_config(
    resources: dict[str, dict] | None = None, offline: bool | None = None, log_level: str = "CRITICAL"
) -> dict:
    """Run config setting resources' fields (``{"proximity": {...}, "library": {...}}``; None values
    keep the defaults) and the LLM switch, as the Launchpad does; ``offline=None`` keeps its default."""
    config = {
        name: {"config": {k: v for k, v in fields.items() if v is not None}}
        for name, fields in (resources or {}).items()
    }
    llm = {**_endpoint_from_environment(), **({"offline": offline} if offline is not None else {})}
    if llm:
        config["llm"] = {"config": llm}
    loggers = {"console": {"config": {"log_level": log_level}}, "step_stages": {}}  # steps: the CLI's stage lines
    return {"resources": config, "loggers": loggers}


def execute(
    root: Path,
    job_name: str,
    resources: dict[str, dict] | None = None,
    offline: bool | None = None,
    sub: str | None = None,
    kind: Kind | None = None,
):
    """Register ``root`` and execute ``job_name`` on its partition: the input's id, or
    ``<id>/<sub>`` for a round or a revision (``sub="r0002"``, registered too). Returns the result."""
    from pipelines.definitions import defs

    with open_instance() as instance:
        record = register(instance, root, kind)
        key = record.id
        if sub is not None:
            from assets.partitions import REVISIONS, ROUNDS
            from hypograph.inputs import sub_key

            key = sub_key(record.id, sub)
            name = REVISIONS if record.kind == "case" else ROUNDS
            if not instance.has_dynamic_partition(name, key):
                instance.add_dynamic_partitions(name, [key])
        if job_name == "proximity" or job_name.startswith("case_"):  # the jobs that read a source
            from assets.sources import observe

            observe(instance, record, key)
        # Failures are reported by the caller in one line each; the UI keeps the full logs and traces.
        return defs.resolve_job_def(job_name).execute_in_process(
            instance=instance,
            partition_key=key,
            raise_on_error=False,
            run_config=run_config(resources, offline),
            tags=TAGS,
        )


def run_job(
    root: Path,
    job_name: str,
    resources: dict[str, dict] | None = None,
    offline: bool | None = None,
    sub: str | None = None,
    kind: Kind | None = None,
):
    """``execute``, with a failed run turned into one HypographError: the cause's own line first,
    then where to see the rest."""
    result = execute(root, job_name, resources, offline, sub, kind)
    if not result.success:
        raise HypographError(failed_line(job_name, result))
    return result


def failed_line(job_name: str, result) -> str:
    """``<cause>; <more causes> (proximity run 1a2b3c4d: the run's events in `make ui`)``."""
    return "; ".join(failures(result)) + f" ({job_name} run {result.run_id[:8]} failed: its events in `make ui`)"


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
