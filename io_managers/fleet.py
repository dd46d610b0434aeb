"""Every run writes only while it is the newest of its partition, and runs on one version of the
code, whatever worker executes a step. Shared by every product that writes into its input.

* **Fencing.** ``stale_run(instance, run_id, asset_key)`` -> a line when the run may no longer
  write into its input: it has ended (a step of a run failed during a broker outage, executed when
  the broker returns), or a newer run of its partition, of the same job or selecting the same
  asset, has been created since (its files are the newest's to write). Newer means created later:
  the run storage's own order (``storage_id``). ``fence`` raises that line; ask it holding the
  lock every writer of those files takes, and keep the lock until the last move, so a newer run's
  files can never land between the answer and the move: proximity's ``publish``
  (``assets/proximity/fence.py``, under ``proximity.lock``), step 4's assets (under the vault's
  structuring lock, ``assets/structure/assets.py``). A fenced step writes nothing.
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

import os
import socket

from dagster import DagsterRunStatus, RunsFilter

from hypograph.code_version import changed_on_disk, code_version
from hypograph.errors import HypographError

VERSION_TAG = "hypograph/code_version"
PARTITION_TAG = "dagster/partition"
RUNNING = (DagsterRunStatus.STARTING, DagsterRunStatus.STARTED)
NEWER_RUNS_LOOKED_AT = 100  # runs of one partition created after a step's run: a handful, never thousands


def fence(instance, run_id: str, asset_key) -> None:
    """HypographError with ``stale_run``'s line when run ``run_id`` may no longer write
    ``asset_key``'s files (see the module docstring for the lock to hold)."""
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
