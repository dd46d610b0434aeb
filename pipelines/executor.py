"""The executor every job runs on, chosen by the deployment (``HYPOGRAPH_EXECUTOR``), not the code.

* ``in_process`` (default): one process per run, so a small run finishes in seconds from the UI as
  from the CLI;
* ``multiprocess``: one process per step, ``max_concurrent`` at a time (run config
  ``execution: config: max_concurrent``), so the shards of a sharded proximity run (resource
  ``proximity.shards``) run in parallel on this machine;
* ``celery``: one Celery task per step (``dagster-celery``), on workers anywhere that read the same
  broker, instance and shard storage; its settings (broker, result backend, Celery's own) are the
  YAML file ``HYPOGRAPH_CELERY_CONFIG`` names, the file the workers start with
  (``dagster-celery worker start -y FILE``), so both sides agree;
* ``k8s``: one Kubernetes job per step (``dagster-k8s``). See ``deploy/README-deployment.md``.

Every process that imports the code location chooses again from its own environment: the web
server, the daemon, each run and each Celery worker must be given the same variables. The
variables are parsed and bounded in ``hypograph/environment.py`` (a bad one was refused there).
"""

from pathlib import Path

from dagster import Executor, ExecutorDefinition, in_process_executor, multiprocess_executor

from hypograph import environment
from hypograph.atomic import read_utf8
from hypograph.errors import HypographError
from io_managers.fleet import stamp_version

ENV = "HYPOGRAPH_EXECUTOR"
CELERY_CONFIG_ENV = "HYPOGRAPH_CELERY_CONFIG"
CELERY_CONFIG_MAX = 1 << 20  # the workers' YAML is a few hundred bytes; a larger file is refused unread


def job_executor() -> ExecutorDefinition:
    """The executor ``HYPOGRAPH_EXECUTOR`` names (one of four: ``hypograph.environment`` refused
    another); raises HypographError, in one line, for a missing package or an unreadable Celery
    settings file."""
    name = environment.current().executor
    if name == "in_process":
        return in_process_executor
    if name == "multiprocess":
        return multiprocess_executor
    try:
        if name == "k8s":
            from dagster_k8s import k8s_job_executor

            return versioned(k8s_job_executor)
        if name == "celery":
            from dagster_celery import celery_executor

            return versioned(celery_executor.configured(celery_settings(), name="celery"))
    except ImportError:
        raise HypographError(f"{ENV}={name} needs the dagster-{name} package installed next to hypograph") from None
    raise AssertionError(name)  # unreachable: Environment.executor has the four names above


def versioned(defn: ExecutorDefinition) -> ExecutorDefinition:
    """``defn`` (an executor whose steps run elsewhere: Celery workers, Kubernetes pods) whose run
    process first gives the run its own code version when the run carries none, before any step is
    sent. A job's runs carry it from their creation (``assets.groups.RUN_TAGS``), but not every door
    applies a job's run tags (``dagster job launch`` and the Launchpad's launch merge the job's
    definition tags only; the asset graph's Materialize makes a run of no named job): without this,
    the first worker to take a step gave the run its own version, whatever code it runs."""
    inner = defn.executor_creation_fn

    def create(init_context) -> Executor:
        return _Versioned(inner(init_context))

    return ExecutorDefinition(
        name=defn.name,
        config_schema=defn.config_schema,
        requirements=defn.get_requirements,
        executor_creation_fn=create,
        description=defn.description,
    )


class _Versioned(Executor):
    """An executor that tags the run with this process's code version, then hands it to ``inner``
    (which reads its own settings from the run's executor, this one: they are passed through)."""

    def __init__(self, inner: Executor):
        self.inner = inner

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    @property
    def retries(self):
        return self.inner.retries

    @property
    def step_dependency_config(self):
        return self.inner.step_dependency_config

    def execute(self, plan_context, execution_plan):
        stamp_version(plan_context.instance, plan_context.dagster_run)
        yield from self.inner.execute(plan_context, execution_plan)


def celery_settings() -> dict:
    """The ``execution: config:`` block of the YAML file ``HYPOGRAPH_CELERY_CONFIG`` names (broker,
    backend, config_source, retries: ``celery_executor``'s config), read bounded (a regular file
    of at most 1 MiB: a FIFO never blocks the import); HypographError in one line naming the file
    and what is wrong."""
    import yaml

    path = config_path()
    if not path:
        raise HypographError(
            f"{ENV}=celery needs {CELERY_CONFIG_ENV}: the YAML file the Celery workers start with "
            "(deploy/celery.yaml shows one)"
        )
    try:
        data = yaml.safe_load(read_utf8(Path(path), CELERY_CONFIG_MAX, f"{CELERY_CONFIG_ENV}={path}")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise HypographError(f"{CELERY_CONFIG_ENV}={path}: cannot be read ({type(exc).__name__})") from None
    config = data.get("execution", {}).get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict) or not config.get("broker"):
        raise HypographError(f"{path}: execution.config.broker: missing (the broker's URL, e.g. redis://host:6379/0)")
    return config


def config_path() -> str:
    """The path ``HYPOGRAPH_CELERY_CONFIG`` names ("" when unset): the Celery workers'
    (``pipelines/celery_worker.py``) and the runs' settings file."""
    return (environment.current().celery_config or "").strip()


EXECUTOR = job_executor()
