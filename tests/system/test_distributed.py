"""Issue 36: the sharded proximity job on a real distributed executor, as a team deploys it.

A Redis server (Debian's ``redis-server``, with a password) is the Celery broker and result
backend, two Celery workers started as deploy/systemd/hypograph-worker@.service starts them
(``celery -A pipelines.celery_worker``, deploy/celery.yaml as it is) are processes of their own,
and a Dagster daemon takes runs from the run queue (QueuedRunCoordinator) on a throwaway
instance; a run is submitted the way the Launchpad submits it (``dagster job launch``: the
instance's run coordinator, so the queue) and the daemon starts it. Every step is a Celery task;
the shards travel between workers as files under
``HYPOGRAPH_SHARD_STORAGE``. The proximity files must be byte-identical to an in-process run's,
also when a worker is killed during a shard step (its task is redelivered to the other worker
within 2 minutes: ``task_acks_late`` and the recipe's 60 s ``visibility_timeout``) and when the
broker restarts in the middle of a run. Issue 44: a broker down for 5 minutes leaves the workers up
and runs no step of an ended run; issue 47 item 12: a frozen broker is a socket error in seconds.

Every service runs in its own process group (``tests/support/services.py``) and is killed with its group
when the module ends, passed or failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
import services
import yaml
from cli_helper import hypograph
from conftest import REPO, VENV_BIN, execute, offline_env, write_json_hypothesis
from services import free_port

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")

WORKERS = ("w1", "w2")
SHARDS = 3
RECIPE = yaml.safe_load((REPO / "deploy" / "celery.yaml").read_text(encoding="utf-8"))["execution"]["config"]
# seconds before a dead worker's unacknowledged task goes back to the queue: the recipe's own
VISIBILITY = RECIPE["config_source"]["broker_transport_options"]["visibility_timeout"]
OUTAGE = 300  # seconds the broker is down in the outage test (issue 44: "a broker down for 5 minutes")
RUN_SECONDS = 420


def wait_for_port(
    port: int, process: subprocess.Popen, log: Path, seconds: float = 30, host: str = "127.0.0.1"
) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{log.name}: exited with {process.returncode}:\n{log.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                return
        time.sleep(0.2)
    pytest.fail(f"nothing listens on {port} after {seconds} s:\n{log.read_text()[-2000:]}")


def topic_texts(n: int, topics: int = 12, seed: int = 36) -> list[str]:
    """``n`` 14-word texts from ``topics`` 40-word vocabularies: many edges, so shards have work."""
    rng = random.Random(seed)
    vocab = [[f"w{t}x{k}" for k in range(40)] for t in range(topics)]
    return [" ".join(rng.choice(vocab[i % topics]) for _ in range(14)) for i in range(n)]


def write_corpus(root: Path, n: int) -> Path:
    for k, text in enumerate(topic_texts(n), start=1):
        write_json_hypothesis(root, f"H-{k}", title=f"hypothesis {k}", statement=text)
    return root


class Cluster:
    """Redis, two Celery workers and a daemon on one throwaway instance."""

    def __init__(self, base: Path):
        self.base = base
        self.home = base / "home"
        self.home.mkdir()
        (self.home / "dagster.yaml").write_text(
            "run_coordinator:\n  module: dagster._core.run_coordinator\n  class: QueuedRunCoordinator\n"
            "telemetry:\n  enabled: false\n",
            encoding="utf-8",
        )
        self.redis_port = free_port()
        self.redis_dir = base / "redis"
        self.redis_dir.mkdir()
        self.password = "t0p-" + os.urandom(6).hex()  # the broker's password, from the environment only
        self.env = {
            **offline_env(),
            "DAGSTER_HOME": str(self.home),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # the CLI starts `celery`
            "HYPOGRAPH_EXECUTOR": "celery",
            # the recipe's settings file as it is: the broker's URL comes from the environment
            "HYPOGRAPH_CELERY_CONFIG": str(REPO / "deploy" / "celery.yaml"),
            "HYPOGRAPH_CELERY_BROKER": f"redis://:{self.password}@127.0.0.1:{self.redis_port}/0",
            "HYPOGRAPH_SHARD_STORAGE": str(base / "shards"),
        }
        self.redis: subprocess.Popen | None = None
        self.workers: dict[str, subprocess.Popen] = {}
        self.daemon: subprocess.Popen | None = None

    def start_redis(self) -> None:
        log = self.base / "redis.log"
        args = ["redis-server", "--port", self.redis_port, "--bind", "127.0.0.1", "--dir", self.redis_dir]
        # the queue survives a restart: every write to the append-only file before it is acknowledged
        args += ["--appendonly", "yes", "--appendfsync", "always", "--save", "", "--requirepass", self.password]
        self.redis = services.start(args, log, self.env)
        wait_for_port(self.redis_port, self.redis, log)

    def start_worker(self, name: str, checkout: Path = REPO) -> None:
        """A worker started from ``checkout`` (its working directory, and its ``PYTHONPATH`` when it
        is not this repository: the code a worker of another host would have)."""
        log = self.base / f"worker-{name}.log"
        # as deploy/systemd/hypograph-worker@.service starts them: one step at a time, in the worker's
        # own process (free to fork), both queues
        args = [VENV_BIN / "celery", "-A", "pipelines.celery_worker", "worker", "--pool", "solo"]
        args += ["-Q", "dagster,shards", "-n", f"{name}@%h", "--loglevel", "INFO"]
        env = self.env if checkout == REPO else {**self.env, "PYTHONPATH": str(checkout)}
        self.workers[name] = services.start(args, log, env, cwd=checkout)

    def start(self) -> None:
        with self.instance() as instance:  # its SQLite storage made once, before four processes open it
            instance.get_runs(limit=1)
        self.start_redis()
        for name in WORKERS:
            self.start_worker(name)
        log = self.base / "daemon.log"
        self.daemon = services.start([VENV_BIN / "dagster-daemon", "run", "-w", "workspace.yaml"], log, self.env, REPO)

    def stop(self) -> None:
        for process in [self.daemon, *self.workers.values(), self.redis]:
            if process is not None:
                services.stop(process, seconds=20)

    def kill_worker(self, name: str) -> None:
        """SIGKILL to the worker's whole group (its ``celery`` process and a step's helpers)."""
        os.killpg(self.workers[name].pid, signal.SIGKILL)
        self.workers[name].wait(timeout=10)

    def celery_pid(self, name: str) -> int:
        """The worker's ``celery`` process, the one that runs its steps (``--pool solo``) and whose pid
        their events carry."""
        return self.workers[name].pid

    @contextlib.contextmanager
    def frozen(self):
        """Every live worker's ``celery`` process stopped (SIGSTOP, each thread seen stopped) in the
        block, so what the event log says about the steps they run holds until they are continued or
        killed; each still alive afterwards is continued. (Not the whole group: a step's log-tailing
        helpers, stopped between their fork and exec, would hold the worker in vfork forever.)"""
        live = [self.celery_pid(n) for n, p in self.workers.items() if p.poll() is None]
        try:
            for pid in live:
                os.kill(pid, signal.SIGSTOP)
            deadline = time.monotonic() + 30
            while not all(thread_states(pid) <= STOPPED for pid in live):
                if time.monotonic() > deadline:
                    pytest.fail(f"workers not stopped 30 s after SIGSTOP: {[thread_states(p) for p in live]}")
                time.sleep(0.001)
            yield
        finally:
            for pid in live:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(self.base.glob("*.log")))

    def add(self, root: Path) -> str:
        added = hypograph("add", root, env=self.env, timeout=120)
        assert added.returncode == 0, added.stderr
        return added.stdout.split(":")[0]

    def submit(self, key: str) -> str:
        """What the Launchpad's Materialize does: the proximity job on one partition, handed to the
        instance's run coordinator (the queue the daemon takes it from); the new run's id."""
        config = {"resources": {"proximity": {"config": {"shards": SHARDS}}}}
        launched = subprocess.run(
            [VENV_BIN / "dagster", "job", "launch", "-j", "proximity", "-w", "workspace.yaml"]
            + ["--tags", json.dumps({"dagster/partition": key}), "--config-json", json.dumps(config)],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,  # loading the code location takes minutes on a loaded 2-core machine
            check=False,
        )
        assert launched.returncode == 0, launched.stderr[-3000:]
        with self.instance() as instance:
            (run,) = [r for r in instance.get_runs() if r.tags.get("dagster/partition") == key]
        return run.run_id

    def instance(self):
        from dagster import DagsterInstance

        return DagsterInstance.from_config(str(self.home))

    def wait(self, run_id: str, seconds: float = RUN_SECONDS):
        """The finished run (its status one of SUCCESS, FAILURE, CANCELED)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self.instance() as instance:
                run = instance.get_run_by_id(run_id)
            if run.is_finished:
                return run
            time.sleep(1)
        pytest.fail(f"run {run_id} not finished in {seconds} s; logs:\n{self.logs()}")

    def failures(self, run_id: str) -> str:
        """The messages of the run's failure events and engine errors, one per line."""
        lines = []
        for e in self.events(run_id):
            event = e.dagster_event
            if event.event_type_value in ("STEP_FAILURE", "RUN_FAILURE", "PIPELINE_FAILURE") or (
                event.is_engine_event and event.engine_event_data and event.engine_event_data.error
            ):
                error = getattr(event.event_specific_data, "error", None)
                lines.append(f"{event.event_type_value} {e.step_key}: {event.message} {error.message if error else ''}")
        return "\n".join(lines)

    def events(self, run_id: str) -> list:
        with self.instance() as instance:
            return [e for e in instance.all_logs(run_id) if e.dagster_event is not None]


STOPPED = {"T", "t", "Z", "X"}  # /proc states of a thread that runs no more code: stopped, traced, dead


def thread_states(pid: int) -> set[str]:
    """The states of the process's threads (``/proc/<pid>/task/<tid>/stat``; none when it is gone)."""
    states = set()
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                stat = (task / "stat").read_text()
                states.add(stat[stat.rindex(")") + 2])
    return states


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux ``/proc``)."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (proc / "stat").read_text()
                if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                    out.append(int(proc.name))
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = Cluster(tmp_path_factory.mktemp("distributed"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The proximity files of an in-process, one-shard run of the same corpus, by relative path."""
    root = write_corpus(tmp_path_factory.mktemp("reference") / "corpus", 1200)
    assert execute(root, "proximity").success
    return proximity_files(root)


def proximity_files(root: Path) -> dict[str, bytes]:
    folder = root / "proximity"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def corpus_copy(tmp_path: Path, name: str) -> Path:
    return write_corpus(tmp_path / name, 1200)


def celery_hosts(events: list) -> dict[str, list[str]]:
    """step key -> the Celery workers that picked it up, in order."""
    out: dict[str, list[str]] = {}
    for e in events:
        if not e.dagster_event.is_engine_event:
            continue
        data = e.dagster_event.engine_event_data
        if data and "Celery worker" in data.metadata:
            out.setdefault(e.step_key, []).append(data.metadata["Celery worker"].value)
    return out


def assert_identical(root: Path, reference: dict[str, bytes]) -> None:
    got = proximity_files(root)
    assert sorted(got) == sorted(reference)
    different = [name for name in reference if got[name] != reference[name]]
    assert not different, f"not byte-identical to the in-process run: {different}"


def test_a_queued_sharded_run_on_two_celery_workers_writes_the_in_process_files(cluster, reference, tmp_path):
    root = corpus_copy(tmp_path, "celery")
    run_id = cluster.submit(cluster.add(root))
    run = cluster.wait(run_id)
    assert run.status.value == "SUCCESS", cluster.failures(run_id) + cluster.logs()
    assert_identical(root, reference)

    hosts = celery_hosts(cluster.events(run_id))
    shard_steps = [k for k in hosts if k.startswith("similarity_graph.similarity_shard[")]
    assert len(shard_steps) == SHARDS
    assert {h.split("@")[0] for hs in hosts.values() for h in hs} == set(WORKERS)  # both workers ran steps
    # the shards travelled between the workers through the shard storage...
    handled = {
        e.step_key
        for e in cluster.events(run_id)
        if e.dagster_event.event_type_value == "HANDLED_OUTPUT" and "shard_io_manager" in e.dagster_event.message
    }
    assert set(shard_steps) | {"similarity_graph.similarity_shards"} <= handled
    # ...and are removed once the run has succeeded (the daemon's shard_files_removed sensor)
    folder = Path(cluster.env["HYPOGRAPH_SHARD_STORAGE"]) / run_id
    deadline = time.monotonic() + 120
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(1)
    assert not folder.exists(), sorted(p.name for p in folder.iterdir())


def wait_for_step_start(cluster: Cluster, run_id: str, prefix: str, seconds: float = RUN_SECONDS) -> str:
    """The Celery worker that started the first step whose key starts with ``prefix``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        events = cluster.events(run_id)
        started = {e.step_key for e in events if e.dagster_event.event_type_value == "STEP_START"}
        for step, hosts in celery_hosts(events).items():
            if step.startswith(prefix) and step in started:
                return hosts[-1].split("@")[0]
        time.sleep(0.2)
    pytest.fail(f"no {prefix} step started in {seconds} s; logs:\n{cluster.logs()}")


def test_a_broker_restart_in_the_middle_of_a_run_resumes_it(cluster, reference, tmp_path):
    root = corpus_copy(tmp_path, "restart")
    run_id = cluster.submit(cluster.add(root))
    wait_for_step_start(cluster, run_id, "similarity_graph.similarity_shard[")
    services.stop(cluster.redis, seconds=20)  # SIGTERM: Redis writes its append-only file and exits
    time.sleep(2)
    cluster.start_redis()
    run = cluster.wait(run_id)
    assert run.status.value == "SUCCESS", cluster.failures(run_id) + cluster.logs()
    assert_identical(root, reference)


SHARD = "similarity_graph.similarity_shard["
STEP_ENDS = ("STEP_SUCCESS", "STEP_FAILURE", "STEP_SKIPPED")


def step_events(db: sqlite3.Connection) -> list | None:
    """The run's STEP_START and step-end events, read from its event log database (``db``); None
    when a stopped worker holds the database's lock (the look is inconclusive)."""
    from dagster import EventLogEntry, deserialize_value

    types = ("STEP_START", *STEP_ENDS)
    query = f"SELECT event FROM event_logs WHERE dagster_event_type IN ({', '.join('?' * len(types))}) ORDER BY id"
    try:
        rows = db.execute(query, types).fetchall()
    except sqlite3.OperationalError:  # "database is locked"
        return None
    return [deserialize_value(event, EventLogEntry) for (event,) in rows]


def wait_for_event_log(cluster: Cluster, run_id: str, deadline: float) -> Path:
    """The path of the run's event log database, once it exists (fails the test at ``deadline``)."""
    db_path = cluster.home / "history" / "runs" / f"{run_id}.db"
    while not db_path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"no event log {db_path} by the deadline")
        time.sleep(0.2)
    return db_path


def wait_for_fan_out(cluster: Cluster, db: sqlite3.Connection, deadline: float) -> None:
    """Return once the fan-out step has started (fails the test at ``deadline``)."""
    while not any(e.step_key == "similarity_graph.similarity_shards" for e in step_events(db) or []):
        if time.monotonic() > deadline:
            pytest.fail(f"the fan-out step did not start by the deadline; logs:\n{cluster.logs()}")
        time.sleep(0.2)


def shard_steps_open(events: list, seen: set, ended: set) -> dict[str, int]:
    """The shard steps started and not ended in ``events``, each with the pid that started it. Adds
    the shard steps seen starting to ``seen`` and every step seen ending to ``ended``."""
    ended |= {e.step_key for e in events if e.dagster_event.event_type_value in STEP_ENDS}
    starts = [e for e in events if e.dagster_event.event_type_value == "STEP_START"]
    starts = [e for e in starts if (e.step_key or "").startswith(SHARD)]
    seen |= {e.step_key for e in starts}
    return {e.step_key: e.dagster_event.pid for e in starts if e.step_key not in ended}


def kill_a_worker_seen_inside(cluster: Cluster, events: list, seen: set, ended: set) -> tuple[str, str] | None:
    """With the workers stopped: SIGKILL to a live worker whose process logged a shard STEP_START
    and no end of it in ``events``; (its name, the step's key), or None."""
    started = shard_steps_open(events, seen, ended)
    for name in WORKERS:
        if cluster.workers[name].poll() is not None:
            continue
        inside = sorted(k for k, pid in started.items() if pid == cluster.celery_pid(name))
        if inside:
            cluster.kill_worker(name)
            return name, inside[0]
    return None


def kill_a_worker_inside_a_shard_step(cluster: Cluster, run_id: str, seconds: float = RUN_SECONDS) -> tuple[str, str]:
    """SIGKILL to a worker that is inside a shard step: (its name, the step's key).

    A shard step of this corpus lasts about a tenth of a second, less than one look at the event
    log takes on a loaded machine, so a worker seen starting one has often finished it (and is idle:
    nothing to redeliver) when the kill arrives. So once the fan-out step has started, the workers
    run in short slices: between slices they are stopped (SIGSTOP) and the run's event log is read;
    a worker whose process logged a shard step's STEP_START and no end of it is killed there, still
    stopped, so inside the step and holding its unacknowledged task.

    The log is the run's SQLite database on this throwaway instance (Dagster's default layout), read
    through one connection held open throughout: a worker's connection is then never the last one,
    whose close takes an exclusive lock to checkpoint, so a stopped worker seldom holds a lock a
    read needs; a read that finds one locked anyway counts as no look (the slice goes on)."""
    deadline = time.monotonic() + seconds
    db_path = wait_for_event_log(cluster, run_id, deadline)
    with contextlib.closing(sqlite3.connect(db_path, timeout=1)) as db:
        wait_for_fan_out(cluster, db, deadline)
        seen: set[str] = set()
        ended: set[str] = set()
        while time.monotonic() < deadline:
            with cluster.frozen():
                killed = kill_a_worker_seen_inside(cluster, step_events(db) or [], seen, ended)
            if killed:
                return killed
            if len(seen) == SHARDS and seen <= ended:
                pytest.fail(f"every shard step ended between two looks at the event log: {sorted(seen)}")
            time.sleep(0.01)  # the workers' slice
    pytest.fail(f"no worker inside a shard step in {seconds} s; logs:\n{cluster.logs()}")


def test_a_worker_killed_during_a_shard_step_is_replaced_by_the_other(cluster, reference, tmp_path):
    root = corpus_copy(tmp_path, "killed")
    run_id = cluster.submit(cluster.add(root))
    victim, step = kill_a_worker_inside_a_shard_step(cluster, run_id)
    killed_at = time.time()
    (survivor,) = set(WORKERS) - {victim}
    survivor_pid = cluster.celery_pid(survivor)
    run = cluster.wait(run_id, RUN_SECONDS + VISIBILITY)
    cluster.start_worker(victim)  # as systemd's Restart=on-failure would, for the tests after this one
    assert run.status.value == "SUCCESS", cluster.failures(run_id) + cluster.logs()
    assert_identical(root, reference)
    assert_run_again_by(cluster.events(run_id), step, victim, survivor, survivor_pid, killed_at)


def assert_run_again_by(events: list, step: str, victim: str, survivor: str, survivor_pid: int, killed_at: float):
    """The killed step's task went back to the queue and the other worker ran the step again, to its
    end, within 2 minutes of the kill (issue 44: the recipe's settings, not a test-only timeout)."""
    assert [h.split("@")[0] for h in celery_hosts(events)[step]] == [victim, survivor], step
    kinds = [(e.dagster_event.event_type_value, e.dagster_event.pid) for e in events if e.step_key == step]
    assert [k for k, _ in kinds].count("STEP_START") == 2, kinds
    assert [pid for k, pid in kinds if k in STEP_ENDS] == [pid for k, pid in kinds if k == "STEP_SUCCESS"], kinds
    (success,) = [pid for k, pid in kinds if k == "STEP_SUCCESS"]
    assert success == survivor_pid, kinds
    retried = {k: h for k, h in celery_hosts(events).items() if len(h) > 1}
    assert all(h[0].split("@")[0] == victim and h[-1].split("@")[0] == survivor for h in retried.values()), retried
    assert_within_two_minutes(events, step, killed_at)


def assert_within_two_minutes(events: list, step: str, killed_at: float) -> None:
    """Issue 44: the killed step started again within 2 minutes, with the recipe's settings."""
    restarted = [e.timestamp for e in events if e.step_key == step and e.dagster_event.event_type_value == "STEP_START"]
    took = restarted[-1] - killed_at
    assert took < 120, f"the killed step ran again {took:.0f} s after the kill"


def run_end(events: list) -> float:
    # a run's end events keep their old names: PIPELINE_SUCCESS, PIPELINE_FAILURE
    ends = ("PIPELINE_SUCCESS", "PIPELINE_FAILURE")
    (end,) = [e.timestamp for e in events if e.dagster_event.event_type_value in ends]
    return end


def held_in_redis(cluster: Cluster, run_id: str) -> int:
    """How many of the run's step messages Redis holds: waiting in a queue, or taken and not
    acknowledged (kombu's ``unacked`` hash). A message's body names its run."""
    import base64

    import redis

    client = redis.Redis(port=cluster.redis_port, password=cluster.password)
    try:
        bodies = [json.loads(m)[0] for m in client.hvals("unacked")]
        for key in client.keys("dagster*") + client.keys("shards*"):  # a step's priority is in the key
            if client.type(key) == b"list":
                bodies += [json.loads(m) for m in client.lrange(key, 0, -1)]
    finally:
        client.close()
    return sum(run_id in base64.b64decode(b["body"]).decode("utf-8", "replace") for b in bodies)


def stop_redis_holding_a_step(cluster: Cluster, run_id: str, seconds: float = RUN_SECONDS) -> int:
    """Stop Redis (SIGTERM: it writes its append-only file and exits) at a moment it holds at least
    one step of the run, the workers held still meanwhile; how many it held."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with cluster.frozen():
            held = held_in_redis(cluster, run_id)
            if held:
                services.stop(cluster.redis, seconds=20)
                return held
        time.sleep(0.05)  # between two steps: none queued or taken just now
    pytest.fail(f"Redis held no step of run {run_id} in {seconds} s; logs:\n{cluster.logs()}")


def dropped(events: list) -> list[str]:
    """The worker's lines for the run's steps it took after the run had ended and did not execute."""
    return [e.message for e in events if "not executed: the run has ended" in (e.message or "")]


def wait_until_redis_holds_none(cluster: Cluster, run_id: str, seconds: float) -> None:
    """Return once Redis holds no step message of the run: each it kept was handed out again and
    acknowledged (dropped, or run); fails the test after ``seconds``."""
    deadline = time.monotonic() + seconds
    while held := held_in_redis(cluster, run_id):
        if time.monotonic() > deadline:
            pytest.fail(f"Redis still holds {held} step(s) of the run {seconds} s after it came back\n{cluster.logs()}")
        time.sleep(0.5)


def test_a_five_minute_broker_outage_leaves_the_workers_up_and_runs_no_step_of_an_ended_run(
    cluster, reference, tmp_path
):
    """Issue 44, with the recipe's settings: Redis down for 5 minutes in the middle of a run, then
    back. The workers stay up; the run ends (finished, or failed naming the lost connection); no
    step of it runs once it has ended, though Redis kept some of its steps (``appendonly``) and
    hands them out again: the worker that takes one drops it, in one line. A failed run's shard
    files stay (for its re-execution); a finished one's are removed.

    Redis is stopped while the workers are held still (SIGSTOP), so that it is known to keep at
    least one step of the run when it goes down (a shard step of this corpus lasts a tenth of a
    second: without the hold, Redis could go down between two steps holding none).

    Five real minutes (``OUTAGE``), in ``make test`` as the issue asks: most of it a sleep. The run
    gives up after about 3 minutes (seen 172 s and 190 s); a worker inside a step when Redis went
    down retries storing that step's result until Redis is back (its 72 tries, the run's, lasted
    148-152 s with 2 CPUs, and with 1 CPU a worker that used them up ended inside the 5 minutes:
    ``pipelines/celery_worker.py`` lifts the bound for workers). After it, no fixed wait: Redis is
    watched until it holds no step of the run, so every step it kept has been handed out and dropped
    (or run) when the run's events are read."""
    root = corpus_copy(tmp_path, "outage")
    run_id = cluster.submit(cluster.add(root))
    wait_for_step_start(cluster, run_id, SHARD)
    held = stop_redis_holding_a_step(cluster, run_id)
    time.sleep(OUTAGE)
    assert all(w.poll() is None for w in cluster.workers.values()), cluster.logs()
    cluster.start_redis()
    back = time.time()
    run = cluster.wait(run_id)
    # what Redis kept is handed out again: queued steps at once, taken ones once their last stamp is
    # older than the timeout (long past after the outage: within the restore interval)
    wait_until_redis_holds_none(cluster, run_id, 2 * VISIBILITY + 30)
    assert all(w.poll() is None for w in cluster.workers.values()), cluster.logs()
    events = cluster.events(run_id)
    end = run_end(events)
    late = [e.step_key for e in events if e.dagster_event.event_type_value == "STEP_START" and e.timestamp > end]
    assert not late, f"steps of the ended run executed after its end: {late}"
    shards = Path(cluster.env["HYPOGRAPH_SHARD_STORAGE"]) / run_id
    if run.status.value == "SUCCESS":
        assert_identical(root, reference)
        assert not shards.exists()  # the sensor's, 30 s at most after the success
        return
    failed = cluster.failures(run_id)
    # one line naming the broker's failure (the retries in deploy/celery.yaml used up)
    assert "failed to get meta" in failed or "Connection" in failed, f"{run.status}\n{failed}"
    assert any(p.is_file() for p in shards.rglob("*")), "the failed run's shard files were not kept"
    if end < back:  # the run ended during the outage: every step Redis kept was dropped when taken
        assert dropped(events), f"none of the {held} steps Redis kept was seen dropped\n{cluster.logs()}"
        assert all("\n" not in line for line in dropped(events))


def test_a_frozen_broker_is_a_socket_error_in_seconds_not_a_wait_for_ever(cluster, monkeypatch):
    """Issue 47 item 12: Redis stopped with SIGSTOP answers nothing and closes nothing. With the
    recipe's settings a read of the result backend (what the run does for each step) and a publish
    each give up after the socket timeout, and the retries around them are counted, so the run's
    wait is bounded (deploy/celery.yaml: at most about 25 minutes)."""
    import redis as redis_py

    for key in ("HYPOGRAPH_CELERY_CONFIG", "HYPOGRAPH_CELERY_BROKER"):
        monkeypatch.setenv(key, cluster.env[key])
    from pipelines.celery_worker import build_app

    options = RECIPE["config_source"]
    assert options["result_backend_max_retries"] and options["task_publish_retry_policy"]["max_retries"]
    app = build_app()
    os.kill(cluster.redis.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(redis_py.exceptions.TimeoutError):
            app.backend.client.get("celery-task-meta-none")
        took = time.monotonic() - started
        assert took < options["redis_socket_timeout"] + 5, took
    finally:
        os.kill(cluster.redis.pid, signal.SIGCONT)
