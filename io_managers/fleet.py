"""Every run runs on one version of the code, whatever worker executes a step (the fence that lets
only the newest run of a partition write proximity's files: ``assets/proximity/fence.py``).

Every run carries ``VERSION_TAG``, the ``hypograph.code_version`` of the process that created it
(``pipelines/launch.py`` for commands; ``assets.groups.RUN_TAGS`` on every job for runs the UI,
sensors and schedules create); a run created without it (a Launchpad materialization of hand-picked
assets, ``dagster job launch``) is given its own process's version by the Celery and k8s executors
before they send a step (``pipelines.executor.versioned``), else (one machine) the version of the
process that runs its first step. ``other_version`` -> a line naming both versions when this process
runs another version than the step's run: the step is refused before it does anything
(``assets.errors.project_errors``), as it is when the source files this process loaded have changed
on disk since (``code_version.changed_on_disk``).
"""

from __future__ import annotations

import os
import socket

from hypograph.code_version import changed_on_disk, code_version

VERSION_TAG = "hypograph/code_version"


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
