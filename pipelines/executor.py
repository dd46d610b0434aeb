"""The executor every job runs on, chosen by the deployment (``HYPOGRAPH_EXECUTOR``), not the code.

* ``in_process`` (default): one process per run, so a small run finishes in seconds from the UI as
  from the CLI;
* ``multiprocess``: one process per step, ``max_concurrent`` at a time (run config
  ``execution: config: max_concurrent``), so the shards of a sharded proximity run (resource
  ``proximity.shards``) run in parallel on this machine;
* ``k8s``: one Kubernetes job per step (``dagster-k8s``); ``celery``: one Celery task per step
  (``dagster-celery``). See ``deploy/README-deployment.md``.
"""

import os

from dagster import (
    ExecutorDefinition,
    FilesystemIOManager,
    InMemoryIOManager,
    in_process_executor,
    multiprocess_executor,
)

ENV = "HYPOGRAPH_EXECUTOR"
SHARD_STORAGE_ENV = "HYPOGRAPH_SHARD_STORAGE"


def job_executor() -> ExecutorDefinition:
    """The executor ``HYPOGRAPH_EXECUTOR`` names; raises ValueError, in one line, for another name or
    a missing package."""
    name = os.environ.get(ENV, "").strip() or "in_process"
    if name == "in_process":
        return in_process_executor
    if name == "multiprocess":
        return multiprocess_executor
    try:
        if name == "k8s":
            from dagster_k8s import k8s_job_executor

            return k8s_job_executor
        if name == "celery":
            from dagster_celery import celery_executor

            return celery_executor
    except ImportError:
        raise ValueError(f"{ENV}={name} needs the dagster-{name} package installed next to hypograph") from None
    raise ValueError(f"{ENV}={name!r}: choose in_process, multiprocess, k8s or celery")


def shard_io_manager():
    """Where the row ranges of a sharded step travel: in memory when the run is one process (nothing
    written), else pickles under ``HYPOGRAPH_SHARD_STORAGE`` (any UPath: ``s3://…``, ``gs://…``, a
    folder) or ``$DAGSTER_HOME/storage/<run id>/`` (delete a finished run's folder at will)."""
    if EXECUTOR is in_process_executor:
        return InMemoryIOManager()
    return FilesystemIOManager(base_dir=os.environ.get(SHARD_STORAGE_ENV) or None)


EXECUTOR = job_executor()
