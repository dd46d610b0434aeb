"""Which runs are active, and which of them only look so. A command runs its job in itself
(``pipelines/launch.py``), so a command killed mid-run (kill -9, out of memory, the machine
restarted) leaves its run STARTED for ever, and the ``hypotheses_changed`` sensor would skip that
input for good. Each such run carries ``PROCESS_TAG`` (``hypograph.processes``); the next command
(``open_instance``) and the sensor (``has_active_run``) end it as failed, saying why. Runs the
daemon launched carry no such tag and are left to it.
"""

from __future__ import annotations

from dagster import DagsterRunStatus, RunsFilter

from hypograph.processes import gone

ACTIVE = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]


def has_active_run(instance, key: str) -> bool:
    """A run of partition ``key`` is queued or in progress (its own writes are not a change yet).
    A command's run whose process is gone is not: it is marked failed here (``end_if_orphaned``),
    or one kill -9 would keep the sensor off the input for good."""
    runs = instance.get_runs(RunsFilter(tags={"dagster/partition": key}, statuses=ACTIVE), limit=20)
    return any(not end_if_orphaned(instance, run) for run in runs)


# The process that runs a command's job in itself (``pipelines/launch.py``), as ``this_process`` tags it.
PROCESS_TAG = "hypograph/process"


def end_orphaned_runs(instance) -> list[str]:
    """Mark failed every unfinished run whose process (``PROCESS_TAG``) is gone; the ids of the runs
    so ended."""
    runs = instance.get_runs(RunsFilter(statuses=ACTIVE), limit=100)
    return [run.run_id for run in runs if end_if_orphaned(instance, run)]


def end_if_orphaned(instance, run) -> bool:
    """Mark ``run`` failed, saying why, if the process its ``PROCESS_TAG`` names is gone. True when
    the run is no longer active: ended here, or meanwhile by another command or tick."""
    tag = run.tags.get(PROCESS_TAG)
    if not tag or not gone(tag):
        return False
    current = instance.get_run_by_id(run.run_id)
    if current is None or current.status not in ACTIVE:
        return True
    pid = tag.split("/")[2]
    instance.report_run_failed(
        current,
        message=f"the hypograph process that ran it (pid {pid}) ended without finishing it: killed, or the "
        "machine restarted; nothing it left half-written is used (files are replaced whole)",
    )
    return True
