"""Runs own their outputs and run on one version of the code, whatever worker executes a step.

* **Fencing.** ``stale_run(instance, run_id, asset_key)`` -> a line when the run may no longer
  write into its input: it has ended (a step of a run failed during a broker outage, executed when
  the broker returns), or a newer run of its partition, of the same job or selecting the same
  asset, has been created since (its files are the newest's to write). ``HypographIOManager``
  asks immediately before it writes an asset's files; a fenced step fails with that line and
  writes nothing. Newer means created later: the run storage's own order (``storage_id``).
  ``publish(instance, run_id, asset_key, root, write)`` asks and writes under the input's
  ``PUBLISH_LOCK``, which every run's step takes before it writes proximity's files: a newer run
  created after the question was answered writes after this step's last ``os.replace``, never
  before it, so the newest run's files are the ones left (there is no moment between the answer
  and the move where another run's files can land). Step 4's assets, which write the vault
  through its journal, ask ``fence`` under the vault's structuring lock, held to their last write.
* **Code version.** Every run carries ``VERSION_TAG``, the ``hypograph.code_version`` of the
  process that created it (``pipelines/launch.py`` for commands; ``assets.groups.RUN_TAGS`` on
  every job for runs the UI, sensors and schedules create); a run created without it (a Launchpad
  materialization of hand-picked assets, ``dagster job launch``) is given its own process's version
  by the Celery and k8s executors before they send a step (``pipelines.executor.versioned``), else
  (one machine) the version of the process that runs its first step. ``other_version``
  -> a line naming both versions when this process runs another version than the step's run: the
  step is refused before it does anything (``assets.errors.project_errors``), as it is when the
  source files this process loaded have changed on disk since (``code_version.changed_on_disk``).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

from dagster import DagsterRunStatus, RunsFilter

from hypograph.code_version import changed_on_disk, code_version
from hypograph.errors import HypographError
from hypograph.locks import file_lock
from hypograph.paths import state_dir

VERSION_TAG = "hypograph/code_version"
PARTITION_TAG = "dagster/partition"
RUNNING = (DagsterRunStatus.STARTING, DagsterRunStatus.STARTED)
NEWER_RUNS_LOOKED_AT = 100  # runs of one partition created after a step's run: a handful, never thousands
PUBLISH_LOCK = "proximity.lock"  # in <input>/.hypograph/: held while a step asks the fence and writes
PUBLISH_WAIT = 600.0  # seconds a step waits for another's write (seconds long); longer is a frozen holder


def publish(instance, run_id: str, asset_key, root: Path, write: Callable[[], list[Path]]) -> list[Path]:
    """``write()`` (the asset's files into input ``root``) if run ``run_id`` may still write
    ``asset_key``, both under the input's publish lock; its paths. HypographError in one line when
    the run is fenced (``stale_run``: nothing written) or another holder keeps the lock over
    ``PUBLISH_WAIT`` seconds (naming it)."""
    lock = state_dir(root) / PUBLISH_LOCK
    owner = json.dumps({"run": run_id, "pid": os.getpid(), "host": socket.gethostname()})

    def busy(holder: str) -> HypographError:
        return HypographError(
            f"{lock}: held by {holder or 'another process'} for over {PUBLISH_WAIT:.0f} s; "
            f"{asset_key.to_user_string()} not written (run {run_id[:8]})"
        )

    with file_lock(lock, busy, wait=PUBLISH_WAIT, owner=owner):
        fence(instance, run_id, asset_key)
        return write()


def fence(instance, run_id: str, asset_key) -> None:
    """HypographError with ``stale_run``'s line when run ``run_id`` may no longer write
    ``asset_key``'s files. Ask it holding the lock every writer of those files takes, and keep it
    until the last move: ``publish`` for proximity's files, the vault's structuring lock for step 4's
    (``assets/structure/assets.py``)."""
    fenced = stale_run(instance, run_id, asset_key)
    if fenced:
        raise HypographError(fenced)


def stale_run(instance, run_id: str, asset_key) -> str | None:
    """Why run ``run_id`` may not write ``asset_key``'s files any more, in one line; None when it may
    (see the module docstring). A run the instance does not know (a test's ephemeral one) may."""
    run = instance.get_run_by_id(run_id)
    if run is None:
        return None
    unwritten = f"{asset_key.to_user_string()} not written"
    if run.status not in RUNNING:
        return f"run {run_id[:8]} ended ({run.status.value}) before this step finished; {unwritten}"
    partition = run.tags.get(PARTITION_TAG)
    if partition is None:
        return None
    newer = instance.get_run_records(
        RunsFilter(tags={PARTITION_TAG: partition}), limit=NEWER_RUNS_LOOKED_AT, ascending=True, cursor=run_id
    )
    for record in newer:
        other = record.dagster_run
        if other.job_name == run.job_name or asset_key in (other.asset_selection or ()):
            return (
                f"run {run_id[:8]} is no longer the newest of partition {partition} ({other.job_name} run "
                f"{other.run_id[:8]}, {other.status.value}, came after it); {unwritten}"
            )
    return None


def stamp_version(instance, run) -> None:
    """Give ``run`` this process's code version if it carries none yet (the run's own process, before
    it sends any step: ``pipelines.executor.versioned``)."""
    if run.tags.get(VERSION_TAG) is None:
        current = instance.get_run_by_id(run.run_id)
        if current is None or current.tags.get(VERSION_TAG) is None:
            instance.add_run_tags(run.run_id, {VERSION_TAG: code_version()})


def other_version(instance, run) -> str | None:
    """One line when this process runs another code version than ``run`` carries; None when the
    same. A run carrying none is given this process's (the first step to run decides)."""
    mine = code_version()
    theirs = run.tags.get(VERSION_TAG)
    if theirs is None:
        current = instance.get_run_by_id(run.run_id)
        theirs = current.tags.get(VERSION_TAG) if current is not None else None
        if theirs is None:
            instance.add_run_tags(run.run_id, {VERSION_TAG: mine})
            return None
    if theirs == mine:
        if changed_on_disk():  # updated in place under this process: what it imports next is other code
            return (
                f"this worker ({socket.gethostname()}, pid {os.getpid()}) loaded code version {mine} and its "
                f"source files have changed since; step of run {run.run_id[:8]} refused, nothing written "
                "(restart the worker)"
            )
        return None
    return (
        f"run {run.run_id[:8]} is of code version {theirs}, this worker ({socket.gethostname()}, pid "
        f"{os.getpid()}) runs code version {mine}; step refused, nothing written (run it on workers of "
        f"version {theirs}, or launch it again)"
    )
