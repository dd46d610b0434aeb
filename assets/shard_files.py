"""A run's shard files removed once it has succeeded (``shard_files_removed``, on by default).

In: a run that ended with SUCCESS. Out: its folder under the shard store (``HYPOGRAPH_SHARD_STORAGE``,
or ``$DAGSTER_HOME/storage/<run id>/``) emptied of the ranges its sharded steps wrote; the compute
logs Dagster keeps in the same folder on one machine stay. A failed run's files stay, so that
re-executing it from its failure finds them. A run of the ``in_process`` executor wrote none.
"""

import contextlib

import fsspec
from dagster import DagsterRunStatus, DefaultSensorStatus, RunStatusSensorContext, run_status_sensor

from io_managers.shards import shard_storage

KEEP = {"compute_logs"}  # LocalComputeLogManager's folder beside the shards on one machine


def remove_run_shards(base: str, run_id: str) -> list[str]:
    """Remove the files under ``<base>/<run_id>/`` but ``KEEP``'s (and the folders they leave, on a
    file system); the files removed. An object store has no folders: its files are listed whole
    (``find``) and removed in one call."""
    fs, root = fsspec.core.url_to_fs(base)
    folder = f"{root.rstrip('/')}/{run_id}"
    fs.invalidate_cache()
    files = [p for p in fs.find(folder) if not KEEP & set(p[len(folder) :].split("/"))]
    if files:
        fs.rm(files)
    fs.invalidate_cache()
    for entry in fs.ls(folder, detail=False) if fs.isdir(folder) else []:
        if entry.rstrip("/").rsplit("/", 1)[-1] not in KEEP:
            with contextlib.suppress(FileNotFoundError):
                fs.rm(entry, recursive=True)
    with contextlib.suppress(OSError):  # the run's folder itself once empty (an object store has none)
        if fs.isdir(folder) and not fs.ls(folder, detail=False):
            fs.rmdir(folder)
    return files


@run_status_sensor(
    run_status=DagsterRunStatus.SUCCESS,
    name="shard_files_removed",
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.RUNNING,
    description="Removes a succeeded run's shard files (the row ranges between the steps of a sharded asset).",
)
def shard_files_removed(context: RunStatusSensorContext) -> None:
    base = shard_storage(context.instance)
    removed = remove_run_shards(base, context.dagster_run.run_id)
    if removed:
        context.log.info(f"run {context.dagster_run.run_id}: {len(removed)} shard files removed from {base}")
