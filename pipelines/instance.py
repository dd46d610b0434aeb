"""The one Dagster instance every ``hypograph`` command and ``make ui`` share, and running a job on
one input partition of it.

The instance lives in ``$DAGSTER_HOME`` when set, else ``~/.hypograph/dagster``; one instance holds
the runs of every input, so one UI shows them all.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypograph.atomic import read_utf8, write_text
from hypograph.errors import HypographError
from hypograph.inputs import InputRecord, Registry
from hypograph.locks import file_lock
from hypograph.paths import Kind

# Pools limit concurrent steps: library rounds generate one at a time (pool library_generation).
# python_logs: a run's console (the `hypograph ui` terminal) at INFO, not DEBUG, and the domain's
# stage lines (hypograph.progress) kept in each run's log at INFO. The daemon looks at the run queue
# every second, not every five: a run launched from the UI starts about as soon as a command's.
_POOLS = "telemetry:\n  enabled: false\nconcurrency:\n  pools:\n    default_limit: 1\n"
_LOGS = "python_logs:\n  python_log_level: INFO\n  managed_python_loggers:\n    - hypograph.progress\n"
_QUEUE = (
    "run_coordinator:\n  module: dagster.core.run_coordinator\n  class: QueuedRunCoordinator\n"
    "  config:\n    dequeue_interval_seconds: 1\n"
)
INSTANCE_YAML = _POOLS + _LOGS + _QUEUE
OLD_INSTANCE_YAMLS = (_POOLS, _POOLS + _LOGS)  # what earlier versions wrote


def dagster_home() -> Path:
    """``$DAGSTER_HOME`` if set, else ``~/.hypograph/dagster`` (created with telemetry off)."""
    from resources.inputs import dagster_home as _home

    home = _home()
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    if not path.exists() or read_utf8(path, 1 << 20) in OLD_INSTANCE_YAMLS:  # ours, unedited: updated
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


# A command's runs capture no stdout/stderr files: the command prints its own lines, and every event
# is still stored. Capturing spawns two `tail` and two Python watchers per run, which Ctrl-C in the
# terminal reaches too (each printed a KeyboardInterrupt traceback). Runs the daemon launches keep
# dagster.yaml's capture.
_COMMAND_OVERRIDES = {
    "compute_logs": {"module": "dagster._core.storage.noop_compute_log_manager", "class": "NoOpComputeLogManager"}
}


@contextmanager
def _loading_dagster() -> Iterator[None]:
    """Dagster and its storage load (at a process's first opening) with Python's cyclic garbage
    collector paused, and are then frozen out of its reach (``gc.freeze``): their ~180k objects
    live as long as the process, and the collector's passes over them cost a command about 1 s of
    CPU, half while importing and half at exit (benchmarks/README.md). Nothing is left
    uncollected but the garbage cycles of the loading itself; later collections run as usual."""
    if getattr(_loading_dagster, "done", False) or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
        _loading_dagster.done = True


@contextmanager
def open_instance() -> Iterator:
    """The shared instance. Opening is serialized by a file lock: two commands creating a fresh
    storage at once would otherwise race on its schema migrations."""
    home = dagster_home()
    with _loading_dagster():
        from dagster import DagsterInstance
        from dagster._core.instance import InstanceRef  # its overrides: not exported (dagster is pinned <1.14)

        _fast_sqlite_commits()
        with file_lock(home / ".open.lock"):
            try:
                instance = DagsterInstance.from_ref(InstanceRef.from_dir(str(home), overrides=_COMMAND_OVERRIDES))
                instance.get_dynamic_partitions("vaults")  # touches the storage now, under the lock
            except Exception as e:  # noqa: BLE001 - any storage failure becomes one actionable line
                raise HypographError(
                    f"Dagster storage in {home} is unreadable ({type(e).__name__}: "
                    f"{str(e).splitlines()[0] if str(e) else 'no detail'}); move the folder aside "
                    "and re-run (only run history is lost, no input file)"
                ) from None
    with instance:
        from assets.active_runs import end_orphaned_runs

        end_orphaned_runs(instance)  # a command killed mid-run left its run STARTED: ended here, saying why
        yield instance


def registry(instance) -> Registry:
    """The input registry kept in ``instance`` (``resources/inputs.py``)."""
    from resources.inputs import instance_registry

    return instance_registry(instance)


def register(instance, root: Path, kind: Kind | None = None) -> InputRecord:
    """Record ``root`` in the registry and add its id to the partition sets of its kind, and a case
    package's revisions (idempotent); returns its record."""
    from assets.partitions import new_keys  # not the definitions: registering loads no code location

    record = registry(instance).add(root, kind)
    if record.note:  # the id file it carried was not taken (a copy): said once, on stderr
        print(f"hypograph: {record.note}", file=sys.stderr)
    for name, keys in new_keys(instance, [record]).items():
        instance.add_dynamic_partitions(name, keys)
    return record


def observe_case(root: Path) -> None:
    """Register a case package (its new revision becomes a partition) and record its version."""
    from assets.sources import observe

    with open_instance() as instance:
        record = register(instance, root, "case")
        from hypograph.case.package import CasePackage
        from hypograph.ids import numbered_key
        from hypograph.inputs import sub_key

        observe(instance, record, sub_key(record.id, numbered_key(CasePackage(root).manifest()["analysis_revision"])))
