"""The one Dagster instance every ``hypograph`` command and ``make ui`` share, and running a job on
one input partition of it.

The instance lives in ``$DAGSTER_HOME`` when set, else ``~/.hypograph/dagster``; one instance holds
the runs of every input, so one UI shows them all.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypograph.errors import HypographError
from hypograph.inputs import InputRecord, Kind, Registry
from hypograph.locks import file_lock
from resources.inputs import REGISTRY_FILE
from resources.inputs import dagster_home as _home

# Pools limit concurrent steps: library rounds generate one at a time (pool library_generation).
INSTANCE_YAML = "telemetry:\n  enabled: false\nconcurrency:\n  pools:\n    default_limit: 1\n"


def dagster_home() -> Path:
    """``$DAGSTER_HOME`` if set, else ``~/.hypograph/dagster`` (created with telemetry off)."""
    home = _home()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(INSTANCE_YAML)
    return home


@contextmanager
def open_instance() -> Iterator:
    """The shared instance. Opening is serialized by a file lock: two commands creating a fresh
    storage at once would otherwise race on its schema migrations."""
    from dagster import DagsterInstance

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
    return {"resources": config, "loggers": {"console": {"config": {"log_level": log_level}}}}


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
            instance=instance, partition_key=key, raise_on_error=False, run_config=run_config(resources, offline)
        )


def run_job(
    root: Path,
    job_name: str,
    resources: dict[str, dict] | None = None,
    offline: bool | None = None,
    sub: str | None = None,
    kind: Kind | None = None,
):
    """``execute``, with a failed run turned into one HypographError."""
    result = execute(root, job_name, resources, offline, sub, kind)
    if not result.success:
        raise HypographError(f"{job_name} run {result.run_id[:8]} failed: " + "; ".join(failures(result)))
    return result


def failures(result) -> list[str]:
    """One line per failed step (its innermost error) and per failed asset check."""
    out = []
    for e in result.all_events:
        if e.is_step_failure:
            error = e.step_failure_data.error
            while error is not None and error.cause is not None:
                error = error.cause
            message = error.message.strip().splitlines()[-1] if error else "failed"
            out.append(f"{e.step_key}: {message.split(': ', 1)[-1] if 'Error: ' in message else message}")
    for check in result.get_asset_check_evaluations():
        if not check.passed:
            count = check.metadata.get("violations")
            out.append(f"check {check.check_name} failed ({count.value if count else '?'} violations)")
    return out or ["see the run in the UI"]
