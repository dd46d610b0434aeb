"""Issue 47, items 2, 3 and 5: runs own their outputs, run on one version of the code, and shard
files are data, never code.

* 2: a step of a run that is no longer the newest of its partition (a newer run succeeded since),
  or of a run that has ended (failed during a broker outage, its step delivered later), writes
  nothing into the input: it fails with one line.
* 3: a worker started from another copy of the code (one source file changed, on its
  ``PYTHONPATH``) refuses the steps of a run made by this code, in one line naming both versions,
  and writes nothing.
* 5: a pickle planted in the shard storage between two steps of a sharded run on the multiprocess
  executor (steps in processes of their own, ranges passed as files: what Celery workers do) is
  refused in one line, and what it would have run does not run.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EXAMPLE_VAULT, REPO, VENV_BIN, build_run_dir, copy_tree, execute, offline_env, snapshot

from hypograph.code_version import code_version

RUN_TAGS_KEY = "hypograph/code_version"


def local_instance(path: Path):
    from dagster import DagsterInstance

    path.mkdir(parents=True, exist_ok=True)
    (path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    return DagsterInstance.from_config(str(path))


def proximity_run(instance, root: Path, **settings):
    """A proximity run of ``root``'s partition created (as the Launchpad or a command creates one)
    and not started: (job, run)."""
    from hypograph.proximity.settings import ProximitySettings
    from pipelines.definitions import defs
    from pipelines.instance import register
    from pipelines.launch import run_config

    key = register(instance, root).id
    job = defs.resolve_job_def("proximity")
    config = run_config({"proximity": ProximitySettings(**settings)}, offline=True)
    run = instance.create_run_for_job(job, run_config=config, tags={"dagster/partition": key})
    return job, run


def step_failures(instance, run_id: str) -> dict[str, str]:
    """step key -> its failure's innermost line."""
    from dagster import DagsterEventType

    from pipelines.launch import error_line

    out = {}
    for record in instance.all_logs(run_id, of_type=DagsterEventType.STEP_FAILURE):
        data = record.dagster_event.step_failure_data
        user = data.user_failure_data
        out[record.step_key] = user.description if user is not None and user.description else error_line(data.error)
    return out


def proximity_files(root: Path) -> dict:
    return snapshot(root / "proximity")


# -- 2. a step of a run that is not the newest never writes into the input --------------------------


def test_item02_stale_run_step_never_publishes(tmp_path):
    """Run A is created, then run B of the same partition runs and succeeds; A's steps execute
    afterwards (as a delayed Celery task does) with other settings: nothing of A is written."""
    from dagster import AssetKey
    from dagster._core.definitions.job_base import InMemoryJob
    from dagster._core.execution.api import execute_run

    root = build_run_dir(tmp_path / "run")
    with local_instance(tmp_path / "home") as instance:
        job, older = proximity_run(instance, root, graph_threshold=0.5, dupe_threshold=0.5)
        newer = execute(root, "proximity", instance=instance)  # the default thresholds: 0.3 and 0.8
        assert newer.success
        before = proximity_files(root)
        texts = (root / ".hypograph" / "assets" / "hypothesis_texts.json").stat().st_mtime_ns

        result = execute_run(InMemoryJob(job), instance.get_run_by_id(older.run_id), instance)

        assert not result.success
        failures = step_failures(instance, older.run_id)
        assert list(failures) == ["hypothesis_texts"], failures  # its first write: nothing after it ran
        (line,) = failures.values()
        assert "\n" not in line and "no longer the newest" in line and newer.run_id[:8] in line, line
        assert proximity_files(root) == before  # same bytes, same mtimes
        assert (root / ".hypograph" / "assets" / "hypothesis_texts.json").stat().st_mtime_ns == texts
        for asset in ("hypothesis_texts", "similarity_graph", "duplicate_pairs"):
            latest = instance.get_latest_materialization_event(AssetKey(asset))
            assert latest.run_id == newer.run_id, asset  # the newer run stays the latest producer


def test_item02_a_failed_run_s_step_delivered_late_writes_nothing(tmp_path):
    """A run failed (its broker went away); later one of its steps is delivered to a worker, which
    executes it as a Celery worker does (``dagster_celery.tasks``: the step's plan, then
    ``execute_plan_iterator``): the step fails with one line and the input keeps its files."""
    from dagster import DagsterRunStatus
    from dagster._core.definitions.job_base import InMemoryJob
    from dagster._core.execution.api import create_execution_plan, execute_plan_iterator

    root = build_run_dir(tmp_path / "run")
    with local_instance(tmp_path / "home") as instance:
        assert execute(root, "proximity", instance=instance).success  # dupes at 0.8
        job, failed = proximity_run(instance, root, dupe_threshold=0.3)  # more pairs, if it were written
        instance.report_run_failed(failed, message="the broker was unreachable")
        before = proximity_files(root)

        run = instance.get_run_by_id(failed.run_id)
        assert run.status == DagsterRunStatus.FAILURE
        plan = create_execution_plan(InMemoryJob(job), run.run_config, step_keys_to_execute=["duplicate_pairs"])
        events = list(execute_plan_iterator(plan, InMemoryJob(job), run, instance=instance, run_config=run.run_config))

        kinds = [e.event_type_value for e in events if e.step_key == "duplicate_pairs"]
        assert "STEP_FAILURE" in kinds and "ASSET_MATERIALIZATION" not in kinds, kinds
        (line,) = step_failures(instance, failed.run_id).values()
        assert "\n" not in line and "ended (FAILURE)" in line and "not written" in line, line
        assert proximity_files(root) == before


# -- 2. the fence's window: the answer and the move under the input's publish lock ------------------


def lock_opens(pid: int, lock: Path) -> int:
    """How many descriptors of process ``pid`` have ``lock`` open (Linux ``/proc``): a step at the
    publish lock has it open, waiting or holding."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += os.readlink(fd) == str(lock)
        except OSError:  # closed since it was listed
            continue
    return count


def wait_until(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not seen in {seconds} s")
        time.sleep(0.01)


EXECUTE_RUN = """
import sys
from dagster import DagsterInstance
from dagster._core.definitions.job_base import InMemoryJob
from dagster._core.execution.api import execute_run
from pipelines.definitions import defs

with DagsterInstance.from_config(sys.argv[1]) as instance:
    run = instance.get_run_by_id(sys.argv[2])
    print(execute_run(InMemoryJob(defs.resolve_job_def(run.job_name)), run, instance).success)
"""


def test_item02_a_newer_run_created_while_the_older_step_waits_to_publish_fences_it(tmp_path, monkeypatch):
    """Run A's first step has its value and is at its publish point; the lock is held (here by the
    test, as a newer run's step holds it while it writes). Run B of the same partition is created
    in that moment. When the lock is free, A's step asks the fence under it: refused, nothing of A
    written (before the fix, A asked, then wrote, without a lock: it wrote)."""
    from assets.proximity.fence import PUBLISH_LOCK
    from hypograph.locks import file_lock

    root = build_run_dir(tmp_path / "run")
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # the input registry the step reads
    lock = root / ".hypograph" / PUBLISH_LOCK
    with local_instance(home) as instance:
        _, older = proximity_run(instance, root)
    env = {**offline_env(), "DAGSTER_HOME": str(home), "PYTHONPATH": str(REPO)}
    with file_lock(lock):
        step = subprocess.Popen(
            [sys.executable, "-c", EXECUTE_RUN, str(home), older.run_id],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(lambda: step.poll() is not None or lock_opens(step.pid, lock) > 0, 600, "A at the lock")
            assert step.poll() is None, step.communicate()
            with local_instance(home) as instance:
                _, newer = proximity_run(instance, root)
        except BaseException:
            step.kill()
            raise
    out, err = step.communicate(timeout=600)
    assert out.split() == ["False"], err[-3000:]
    with local_instance(home) as instance:
        failures = step_failures(instance, older.run_id)
    assert list(failures) == ["hypothesis_texts"], failures
    (line,) = failures.values()
    assert "\n" not in line and "no longer the newest" in line and newer.run_id[:8] in line, line
    assert not (root / "proximity").exists() and not (root / ".hypograph" / "assets").exists()


def test_item02_a_newer_run_s_write_waits_for_the_older_step_s_move(tmp_path):
    """The other order: run A's step has been answered "still the newest" and holds the lock; run B
    is created and B's step comes to publish before A's files are moved into place. B waits on the
    lock until A's move is done, then writes: B's file is the one left, and B wrote after A."""
    import threading

    from dagster import AssetKey, DagsterRunStatus

    from assets.proximity.fence import PUBLISH_LOCK, publish

    root = build_run_dir(tmp_path / "run")
    target = root / "proximity" / "graph.json"
    lock = root / ".hypograph" / PUBLISH_LOCK
    key = AssetKey("similarity_graph")
    order: list[str] = []
    newer_step: dict = {}

    def write(who: str) -> list[Path]:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(who, encoding="utf-8")
        order.append(who)
        return [target]

    def newer_publishes(instance, run_id: str) -> None:
        try:
            newer_step["paths"] = publish(instance, run_id, key, root, lambda: write("newer"))
        except BaseException as e:  # noqa: BLE001 - reported by the test's thread below
            newer_step["error"] = e

    with local_instance(tmp_path / "home") as instance:
        _, older = proximity_run(instance, root)
        instance.handle_run_event(older.run_id, _started(older))

        def older_write() -> list[Path]:  # between the fence's answer and the move
            _, newer = proximity_run(instance, root)
            instance.handle_run_event(newer.run_id, _started(newer))
            thread = threading.Thread(target=newer_publishes, args=(instance, newer.run_id))
            thread.start()
            newer_step["thread"] = thread
            wait_until(lambda: lock_opens(os.getpid(), lock) == 2, 60, "B at the lock")  # A's and B's
            assert not target.exists() and order == []  # B waits: nothing of it written
            return write("older")

        publish(instance, older.run_id, key, root, older_write)
        newer_step["thread"].join(60)
        assert "error" not in newer_step, newer_step
        assert order == ["older", "newer"] and target.read_text(encoding="utf-8") == "newer"
        assert instance.get_run_by_id(older.run_id).status == DagsterRunStatus.STARTED


def _started(run):
    """The event that marks ``run`` started (what the run worker reports when it begins)."""
    from dagster import DagsterEvent, DagsterEventType

    return DagsterEvent(event_type_value=DagsterEventType.RUN_START.value, job_name=run.job_name)


# -- 2. step 4 behind the same fence: a stale structure run never writes into the vault ------------


def structure_run(instance, root: Path):
    """A structure run of vault ``root``'s partition created (as the Launchpad or the sensor creates
    one) and not started: (job, run)."""
    from pipelines.definitions import defs
    from pipelines.instance import register
    from pipelines.launch import run_config

    key = register(instance, root).id
    job = defs.resolve_job_def("structure")
    run = instance.create_run_for_job(job, run_config=run_config(offline=True), tags={"dagster/partition": key})
    return job, run


def proximity_done(tmp_path: Path, instance) -> Path:
    """A copy of examples/vault, its proximity made (step 4's inputs), not structured."""
    root = copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
    assert execute(root, "proximity", instance=instance).success
    return root


def vault_files(root: Path) -> dict:
    """Every file of the vault, bytes and mtime, but the lock file (a fenced step takes the lock to ask)."""
    return {k: v for k, v in snapshot(root).items() if k != ".hypograph/structure.lock"}


def test_item02_a_stale_structure_run_writes_nothing_into_the_vault(tmp_path):
    """Structure run A is created, then run B of the same vault; A's steps execute first (a
    delayed Celery task, a run the queue held): 4a fails with the fence's line and the vault keeps
    every byte (before, A structured it: 4a, 4b and the map written by a run no longer the newest).
    B then structures it."""
    from dagster._core.definitions.job_base import InMemoryJob
    from dagster._core.execution.api import execute_run

    with local_instance(tmp_path / "home") as instance:
        root = proximity_done(tmp_path, instance)
        job, older = structure_run(instance, root)
        _, newer = structure_run(instance, root)
        before = vault_files(root)

        result = execute_run(InMemoryJob(job), instance.get_run_by_id(older.run_id), instance)

        assert not result.success
        failures = step_failures(instance, older.run_id)
        assert list(failures) == ["hypothesis_dispositions"], failures  # 4a; 4b and the map never ran
        (line,) = failures.values()
        assert "\n" not in line and "no longer the newest" in line and newer.run_id[:8] in line, line
        assert vault_files(root) == before
        assert execute_run(InMemoryJob(job), instance.get_run_by_id(newer.run_id), instance).success, step_failures(
            instance, newer.run_id
        )
        assert (root / "agent-notes" / "structure.md").exists() and vault_files(root) != before


def test_item02_a_failed_structure_run_s_step_delivered_late_writes_nothing(tmp_path):
    """A structure run failed (its broker went away); later its 4a is delivered to a worker, which
    executes it as a Celery worker does: one line, and the vault is not structured."""
    from dagster._core.definitions.job_base import InMemoryJob
    from dagster._core.execution.api import create_execution_plan, execute_plan_iterator

    with local_instance(tmp_path / "home") as instance:
        root = proximity_done(tmp_path, instance)
        job, failed = structure_run(instance, root)
        instance.report_run_failed(failed, message="the broker was unreachable")
        before = vault_files(root)

        run = instance.get_run_by_id(failed.run_id)
        plan = create_execution_plan(InMemoryJob(job), run.run_config, step_keys_to_execute=["hypothesis_dispositions"])
        events = list(execute_plan_iterator(plan, InMemoryJob(job), run, instance=instance, run_config=run.run_config))

        kinds = [e.event_type_value for e in events if e.step_key == "hypothesis_dispositions"]
        assert "STEP_FAILURE" in kinds and "ASSET_MATERIALIZATION" not in kinds, kinds
        (line,) = step_failures(instance, failed.run_id).values()
        assert "\n" not in line and "ended (FAILURE)" in line and "not written" in line, line
        assert vault_files(root) == before


def test_item02_a_structure_step_asks_the_fence_under_the_vault_s_lock(tmp_path, monkeypatch):
    """Run A's 4a waits for the vault's structuring lock (held here by the test, as another run's
    step holds it while it writes); run B of the vault is created in that moment. When the lock is
    free, A's 4a asks the fence under it: refused, nothing of A written. (Asked before the lock, the
    answer would have been "still the newest", and A would have written after B's files.)"""
    from hypograph.vault.locking import LOCK, structuring_lock

    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # the input registry the step reads
    with local_instance(home) as instance:
        root = proximity_done(tmp_path, instance)
        _, older = structure_run(instance, root)
    before = vault_files(root)
    env = {**offline_env(), "DAGSTER_HOME": str(home), "PYTHONPATH": str(REPO)}
    lock = root / LOCK
    with structuring_lock(root):
        step = subprocess.Popen(
            [sys.executable, "-c", EXECUTE_RUN, str(home), older.run_id],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(lambda: step.poll() is not None or lock_opens(step.pid, lock) > 0, 600, "A at the lock")
            assert step.poll() is None, step.communicate()
            with local_instance(home) as instance:
                _, newer = structure_run(instance, root)
        except BaseException:
            step.kill()
            raise
    out, err = step.communicate(timeout=600)
    assert out.split() == ["False"], err[-3000:]
    with local_instance(home) as instance:
        failures = step_failures(instance, older.run_id)
    assert list(failures) == ["hypothesis_dispositions"], failures
    (line,) = failures.values()
    assert "\n" not in line and "no longer the newest" in line and newer.run_id[:8] in line, line
    assert vault_files(root) == before


# -- 3. a worker of another code version refuses the run's steps --------------------------------------


WORKER = """
import sys
from dagster import DagsterInstance
from dagster._core.definitions.job_base import InMemoryJob
from dagster._core.execution.api import execute_run
from pipelines.definitions import defs
from hypograph.code_version import code_version

instance = DagsterInstance.from_config(sys.argv[1])
run = instance.get_run_by_id(sys.argv[2])
result = execute_run(InMemoryJob(defs.resolve_job_def(run.job_name)), run, instance)
print(code_version(), result.success)
"""


# The other side of a rolling update: the graph's plan made at 0.2 above the threshold asked for
# (graph.json still says the threshold asked for: the "missing edges, threshold 0.3").
OLD_GRAPH_CODE = ("float(threshold), int(cap)", "float(threshold) + 0.2, int(cap)")


def other_code(tmp_path: Path, old: str = "", new: str = "") -> Path:
    """A copy of the code location's packages (a checkout of its own, as on another host); with
    ``old`` given, the graph module's ``old`` text replaced by ``new`` (one source file changed: a
    rolling update's other side)."""
    copy = tmp_path / "other-code"
    for package in ("hypograph", "resources", "io_managers", "assets", "pipelines"):
        shutil.copytree(REPO / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    if old:
        graph = copy / "hypograph" / "proximity" / "similarity.py"
        text = graph.read_text(encoding="utf-8")
        assert text.count(old) == 1, old
        graph.write_text(text.replace(old, new), encoding="utf-8")
    return copy


def test_item03_worker_of_another_code_version_refuses_the_step(tmp_path, monkeypatch):
    root = build_run_dir(tmp_path / "run")
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # the input registry the worker reads
    with local_instance(home) as instance:
        job, run = proximity_run(instance, root)
        instance.add_run_tags(run.run_id, {RUN_TAGS_KEY: code_version()})  # as the launcher tags it
    copy = other_code(tmp_path, *OLD_GRAPH_CODE)
    env = {**offline_env(), "PYTHONPATH": str(copy), "DAGSTER_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(home), run.run_id],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    worker_version, success = done.stdout.split()
    assert worker_version != code_version() and success == "False", done.stdout

    with local_instance(home) as instance:
        failures = step_failures(instance, run.run_id)
    assert list(failures) == ["hypothesis_texts"], failures  # the first step; no other ran
    (line,) = failures.values()
    assert "\n" not in line and code_version() in line and worker_version in line and "refused" in line, line
    assert not (root / "proximity").exists() and not (root / ".hypograph" / "assets").exists()


def test_item03_commands_tag_their_runs_with_the_code_version(tmp_path):
    root = build_run_dir(tmp_path / "run")
    with local_instance(tmp_path / "home") as instance:
        result = execute(root, "proximity", instance=instance)
        assert result.success
        assert instance.get_run_by_id(result.run_id).tags[RUN_TAGS_KEY] == code_version()


# -- 5. the shard store carries data, never code ----------------------------------------------------


class _Planted:
    """Unpickling this creates the file ``path`` (what a planted pickle could do, harmlessly)."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


SHARDED = """
import json, sys
from dagster import AssetKey, DagsterInstance, ReexecutionOptions, execute_job, reconstructable
from fleet_jobs import proximity

instance = DagsterInstance.get()
config = {"resources": {"proximity": {"config": {"shards": 3}}}, "execution": {"config": {"max_concurrent": 2}}}
if sys.argv[1] == "run":  # the graph and what it needs, its shards each in a process
    tags = {"dagster/partition": sys.argv[2]}
    graph = [AssetKey(k) for k in ("hypothesis_texts", "hypothesis_embeddings", "similarity_graph")]
    result = execute_job(reconstructable(proximity), instance, run_config=config, tags=tags, asset_selection=graph)
else:  # the merge step again, on the first run's shard files
    options = ReexecutionOptions(sys.argv[2], step_selection=["similarity_graph.merge_similarity_shards"])
    tags = {"dagster/partition": sys.argv[3]}
    result = execute_job(reconstructable(proximity), instance, reexecution_options=options, tags=tags)
print(json.dumps({"run": result.run_id, "success": result.success}))
"""

JOBS = """
def proximity():
    from pipelines.definitions import defs
    return defs.resolve_job_def("proximity")
"""


def test_item05_planted_pickle_in_shard_storage_is_refused(tmp_path, monkeypatch):
    from dagster import DagsterInstance

    root = build_run_dir(tmp_path / "run")
    home, storage, scripts = tmp_path / "home", tmp_path / "shards", tmp_path / "scripts"
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # the input registry the steps read
    home.mkdir()
    scripts.mkdir()
    (scripts / "fleet_jobs.py").write_text(JOBS, encoding="utf-8")
    env = {
        **offline_env(),
        "DAGSTER_HOME": str(home),
        "HYPOGRAPH_EXECUTOR": "multiprocess",
        "HYPOGRAPH_SHARD_STORAGE": str(storage),
        "PYTHONPATH": os.pathsep.join([str(REPO), str(scripts)]),
    }
    with local_instance(home) as instance:
        from pipelines.instance import register

        key = register(instance, root).id

    def driver(*args):
        done = subprocess.run(
            [sys.executable, "-c", SHARDED, *args],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = driver("run", key)
    assert first["success"]
    shard_files = sorted((storage / first["run"]).glob("similarity_graph.similarity_shard[[]*/result"))
    assert len(shard_files) >= 2
    written = [f.read_bytes() for f in shard_files[1:]]
    before = proximity_files(root)

    marker = tmp_path / "ran-as-code"
    shard_files[0].write_bytes(pickle.dumps(_Planted(str(marker))))
    again = driver("again", first["run"], key)

    assert not again["success"]
    assert not marker.exists()  # the pickle was never unpickled
    with DagsterInstance.from_config(str(home)) as instance:
        failures = step_failures(instance, again["run"])
    (line,) = failures.values()
    assert "\n" not in line and str(shard_files[0]) in line and "not a shard file" in line, line
    assert proximity_files(root) == before  # the graph stays the first run's
    assert all(data.startswith(b"PK") for data in written)  # the steps wrote npz archives, not pickles


def test_item05_shard_values_come_back_bit_for_bit():
    """Every kind a shard step returns, written and read back: the same arrays, dtypes, fields."""
    import io

    import numpy as np

    from hypograph.proximity import shard_values, shards
    from hypograph.proximity.embed import embed
    from hypograph.proximity.graph import plan_graph

    ids = [f"H-{k}" for k in range(40)]
    texts = [f"mites virus colony {k % 5} winter {k % 3}" for k in range(40)]
    sparse = embed(ids, texts)
    dense = embed(ids, texts)
    dense.rows = dense.rows.toarray().astype(np.float32)
    for emb in (sparse, dense):
        back = shard_values.load(io.BytesIO(shard_values.dump(emb)), "x")
        assert back.ids == emb.ids and back.vocabulary == emb.vocabulary and back.backend == emb.backend
        a, b = (back.rows, emb.rows) if isinstance(emb.rows, np.ndarray) else (back.rows.data, emb.rows.data)
        assert a.dtype == b.dtype and np.array_equal(a, b)
    block, info = shards.range_edges(plan_graph(sparse.rows, 0.3, 0), 0, 40)
    back, back_info = shard_values.load(io.BytesIO(shard_values.dump((block, info))), "x")
    assert back_info == info and (back.start, back.stop, back.capped) == (block.start, block.stop, block.capped)
    for name in ("rows", "cols", "sims"):
        assert getattr(back, name).dtype == getattr(block, name).dtype
        assert np.array_equal(getattr(back, name), getattr(block, name))
    assert shard_values.load(io.BytesIO(shard_values.dump((3, 9))), "x") == (3, 9)


# -- on Celery, as the two items were found: Redis, a daemon and dagster-celery workers started here --

celery = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")


@pytest.fixture
def broker(tmp_path):
    """Redis and a daemon taking runs from the queue, on ``test_distributed``'s ``Cluster`` (its
    instance, Celery settings file and environment); no worker started yet."""
    import services
    from test_distributed import Cluster

    (tmp_path / "cluster").mkdir()
    cluster = Cluster(tmp_path / "cluster")
    try:
        with cluster.instance() as instance:  # its storage made once, before other processes open it
            instance.get_runs(limit=1)
        cluster.start_redis()
        daemon = [VENV_BIN / "dagster-daemon", "run", "-w", "workspace.yaml"]
        cluster.daemon = services.start(daemon, cluster.base / "daemon.log", cluster.env, REPO)
        yield cluster
    finally:
        cluster.stop()


def launch(cluster, key: str, **proximity) -> str:
    """The proximity job on partition ``key`` queued as the Launchpad queues it; the run's id."""
    config = {"resources": {"proximity": {"config": proximity}}} if proximity else {}
    done = subprocess.run(
        [VENV_BIN / "dagster", "job", "launch", "-j", "proximity", "-w", "workspace.yaml"]
        + ["--tags", json.dumps({"dagster/partition": key}), "--config-json", json.dumps(config)],
        cwd=REPO,
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with cluster.instance() as instance:
        return instance.get_runs(limit=1)[0].run_id


def queued(cluster, seconds: float = 300) -> None:
    """Return once a step waits in the Celery queue ``dagster``."""
    import redis

    client = redis.Redis(port=cluster.redis_port, password=cluster.password)
    deadline = time.monotonic() + seconds
    while not any(client.llen(k) for k in client.keys("dagster*")):  # a step's priority is in the key
        if time.monotonic() > deadline:
            pytest.fail(f"no step queued in {seconds} s; logs:\n{cluster.logs()}")
        time.sleep(0.2)


@celery
def test_item02_celery_step_of_a_failed_run_runs_late_and_writes_nothing(broker, tmp_path):
    """Run A queues its first step while no worker is up; its run worker dies and the run is failed
    (what a long broker outage ends in); run B follows. The worker that comes up takes A's step
    first: fenced, in one line, and B's files are the input's."""
    from dagster import AssetKey, DagsterEventType

    root = build_run_dir(tmp_path / "run")
    key = broker.add(root)
    older = launch(broker, key, graph_threshold=0.5)
    queued(broker)
    with broker.instance() as instance:
        (start,) = instance.all_logs(older, of_type=DagsterEventType.RUN_START)
        os.kill(start.dagster_event.pid, signal.SIGKILL)  # the run's own process (the daemon started it)
        instance.report_run_failed(instance.get_run_by_id(older), message="the broker was unreachable")
    newer = launch(broker, key)
    broker.start_worker("w1")
    run = broker.wait(newer)
    assert run.status.value == "SUCCESS", broker.failures(newer) + broker.logs()

    with broker.instance() as instance:
        failures = step_failures(instance, older)
        # the worker drops the late step of an ended run before running it (pipelines/celery_worker.py);
        # a step that does run is fenced before it writes (assets/proximity/fence.py): either way, one line
        assert list(failures) in ([], ["hypothesis_texts"]), failures
        for line in failures.values():
            assert "\n" not in line and "ended (FAILURE)" in line, line
        assert not instance.all_logs(older, of_type=DagsterEventType.ASSET_MATERIALIZATION)
        for asset in ("hypothesis_texts", "similarity_graph"):
            assert instance.get_latest_materialization_event(AssetKey(asset)).run_id == newer
    assert json.loads((root / "proximity" / "graph.json").read_bytes())["threshold"] == 0.3


def version_of(checkout: Path) -> str:
    """The code version a process started from ``checkout`` computes."""
    done = subprocess.run(
        [sys.executable, "-c", "from hypograph.code_version import code_version; print(code_version())"],
        env={**offline_env(), "PYTHONPATH": str(checkout)},
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def wait_ready(cluster, name: str, seconds: float = 600) -> None:
    """Return once worker ``name`` says it is ready (Celery's ``ready.`` line: its app and code loaded)."""
    log = cluster.base / f"worker-{name}.log"
    wait_until(lambda: log.exists() and " ready." in log.read_text(errors="replace"), seconds, f"worker {name} ready")


def assert_refused_by_the_old_worker(broker, key: str, root: Path, new: str, old: str) -> None:
    """A run of partition ``key`` launched by the code of version ``new`` fails at its first step, in
    one line naming ``new`` and the worker's ``old``, and writes nothing into ``root``."""
    refused = launch(broker, key)
    run = broker.wait(refused)
    assert run.status.value == "FAILURE", broker.failures(refused) + broker.logs()
    with broker.instance() as instance:
        assert instance.get_run_by_id(refused).tags[RUN_TAGS_KEY] == new
        failures = step_failures(instance, refused)
    assert list(failures) == ["hypothesis_texts"], failures  # the first step; no other ran
    (line,) = failures.values()
    assert "\n" not in line and f"run {refused[:8]} is of code version {new}" in line, line
    assert f"runs code version {old}; step refused, nothing written" in line, line
    assert not (root / "proximity").exists() and not (root / ".hypograph" / "assets").exists()


@celery
def test_item03_celery_worker_updated_in_place_refuses_the_new_code_s_steps(broker, tmp_path):
    """A rolling update as it happens on a host: a worker runs from its checkout (the old code: the
    graph's threshold comparison changed in one source file), the checkout is updated in place to
    the new code (as ``git pull`` does; the worker is not restarted yet) and the new code queues a
    run. The old worker takes its first step and refuses it in one line naming both versions:
    nothing is written, the run fails. A worker of the new code then writes the graph the new code
    writes in process. (Before the fix the worker took its version from the files at its first
    step, the new ones, while it still held the old graph module it had imported at start: the run
    succeeded with a graph missing edges.)"""
    root = build_run_dir(tmp_path / "run")
    reference = build_run_dir(tmp_path / "reference")
    assert execute(reference, "proximity").success
    key = broker.add(root)

    checkout = other_code(tmp_path, *OLD_GRAPH_CODE)
    old = version_of(checkout)
    broker.start_worker("old", checkout)
    wait_ready(broker, "old")
    updated = other_code(tmp_path / "update")  # the new code, written over the old worker's files
    shutil.copytree(updated, checkout, dirs_exist_ok=True)
    new = code_version()
    assert version_of(checkout) == new != old

    assert_refused_by_the_old_worker(broker, key, root, new, old)

    broker.kill_worker("old")
    broker.start_worker("new")
    accepted = launch(broker, key)
    run = broker.wait(accepted)
    assert run.status.value == "SUCCESS", broker.failures(accepted) + broker.logs()
    assert proximity_files(root).keys() == proximity_files(reference).keys()
    for name in ("graph.json", "dupes.json", "clusters.json"):
        assert (root / "proximity" / name).read_bytes() == (reference / "proximity" / name).read_bytes(), name
    graph = json.loads((root / "proximity" / "graph.json").read_bytes())
    sims = [e["similarity"] for node in graph["nodes"].values() for e in node["edges"]]
    assert any(0.3 <= x < 0.5 for x in sims), sims  # edges the old code would have left out
