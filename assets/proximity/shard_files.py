"""A run's shard files removed once it has succeeded (``shard_files_removed``, on by default).

In: a run that ended with SUCCESS. Out: its folder under the shard store (``HYPOGRAPH_SHARD_STORAGE``,
or ``$DAGSTER_HOME/storage/<run id>/``) emptied of the ranges its sharded steps wrote; the compute
logs Dagster keeps in the same folder on one machine stay. A failed run's files stay, so that
re-executing it from its failure finds them. A run of the ``in_process`` executor wrote none.
"""

import contextlib

import fsspec
from dagster import DagsterRunStatus, DefaultSensorStatus, RunStatusSensorContext, run_status_sensor

from assets.proximity.shard_io import shard_storage

KEEP = {"compute_logs"}  # LocalComputeLogManager's folder beside the shards on one machine


def remove_run_shards(base: str, run_id: str) -> list[str]:
    """Remove the files under ``<base>/<run_id>/`` but ``KEEP``'s, then the folders they leave (on a
    file system; an object store has none); the files removed, in no particular order."""
    fs, root = fsspec.core.url_to_fs(base)
    folder = f"{root.rstrip('/')}/{run_id}"
    fs.invalidate_cache()
    entries = fs.find(folder, withdirs=True, detail=True)
    kept = [p for p in entries if KEEP & set(p[len(folder) :].split("/"))]
    files = [p for p, info in entries.items() if info["type"] != "directory" and p not in kept]
    # One call per file: a step's key holds brackets (``similarity_shard[rows_0_245]``), which ``rm``
    # reads as a glob, matching nothing; on S3 every range's file was left behind that way.
    for path in files:
        fs.rm_file(path)
    folders = [p for p, info in entries.items() if info["type"] == "directory" and p not in kept]
    for path in sorted(folders, key=len, reverse=True):  # the deepest first; the run's own folder last
        with contextlib.suppress(OSError):  # one that holds a kept folder is not empty: it stays
            fs.rmdir(path)
    fs.invalidate_cache()
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
