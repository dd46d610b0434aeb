"""Issue 44: a team's deployment across machines, simulated on this one.

Machine A runs the Dagster daemon and the one worker that serves the queue ``dagster`` (the steps
that read or write the input folder, which only A mounts). Machines B and C each run a worker that
serves only ``shards`` (the per-range steps). The three share nothing but three network services the
test starts: Redis (broker, with a password), PostgreSQL (the instance: runs, events, the input
registry) and an S3-compatible object store (``moto_server``, moto's server mode: the shards between
steps and every step's stdout/stderr through Dagster's ``S3ComputeLogManager``). Each machine has
its own ``DAGSTER_HOME`` (a copy of the same ``dagster.yaml``) and its own working folder; no local
path holds shards or logs for another. The code is installed alike on each (the virtualenv), as an
image would be. Every setting is the recipe's: deploy/dagster.yaml and deploy/celery.yaml as they
are, the variables of deploy/README-deployment.md.

Where this machine allows it (root, ``ip netns add`` works: ``tests/support/netns.py``), B and C are each a
network namespace the test makes, joined to the host by a veth pair on a bridge holding a private
10.44.N.0/24: the services listen on the bridge's address only, and every process (A's too) reaches
them by that address; B and C have no route but the /24's, so nothing leaves this machine. The
namespaces, veths and bridge are removed when the module ends, passed or failed. Elsewhere all runs
on 127.0.0.1 and the namespace test is skipped, saying why.

The sharded proximity job, queued as the Launchpad queues it, writes files byte-identical to an
in-process run; the shard steps ran on B and C; their logs are in the object store; the run's
shard files are gone from it once the run has succeeded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import netns
import pytest
import services
from cli_helper import hypograph
from conftest import REPO, VENV_BIN, execute, offline_env
from services import free_port
from test_distributed import assert_identical, celery_hosts, proximity_files, wait_for_port, write_corpus
from test_postgres import server_bindir

SHARDS = 3
BUCKET = "team-bucket"
RUN_SECONDS = 600

pytestmark = [
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed"),
    pytest.mark.skipif(server_bindir() is None, reason="no PostgreSQL server (apt-get install postgresql)"),
    pytest.mark.skipif(not (VENV_BIN / "moto_server").exists(), reason="moto[server] is not installed"),
]


def start_postgres(host: str, clients: str) -> tuple[dict[str, str], callable]:
    """A PostgreSQL server listening on ``host`` only, with a database ``hypograph``, that takes
    password logins from the network ``clients`` (a CIDR) besides loopback; (DAGSTER_PG_* variables,
    stop)."""
    import tempfile

    bindir = server_bindir()
    root = Path(tempfile.mkdtemp(prefix="hypograph-pg-"))  # the server refuses root: owned by postgres
    owner = "postgres" if os.geteuid() == 0 else None
    password = "pg-" + os.urandom(6).hex()
    (root / "pw").write_text(password + "\n")
    if owner:
        for p in (root, root / "pw"):
            shutil.chown(p, owner, owner)
    as_owner = {"user": owner, "group": owner} if owner else {}
    port = free_port(host)
    run = dict(capture_output=True, cwd=root, **as_owner)
    subprocess.run(
        [bindir / "initdb", "-D", root / "data", "-U", "dagster", "--pwfile", root / "pw"]
        + ["--auth", "scram-sha-256", "-E", "UTF8", "--no-sync"],
        check=True,
        **run,
    )
    with open(root / "data" / "pg_hba.conf", "a") as hba:  # initdb's lets in loopback only
        hba.write(f"host all all {clients} scram-sha-256\n")
    subprocess.run(
        [bindir / "pg_ctl", "-D", root / "data", "-l", root / "server.log", "-w", "-t", "60"]
        + ["-o", f"-h {host} -p {port} -k {root} -c fsync=off -c max_connections=200", "start"],
        check=True,
        **run,
    )

    def stop() -> None:
        subprocess.run([bindir / "pg_ctl", "-D", root / "data", "-m", "fast", "-w", "stop"], check=False, **run)
        shutil.rmtree(root, ignore_errors=True)

    try:
        subprocess.run(
            [bindir / "createdb", "-h", host, "-p", str(port), "-U", "dagster", "hypograph"],
            check=True,
            capture_output=True,
            env={**os.environ, "PGPASSWORD": password},
        )
    except BaseException:
        stop()
        raise
    env = {
        "DAGSTER_PG_HOST": host,
        "DAGSTER_PG_PORT": str(port),
        "DAGSTER_PG_USER": "dagster",
        "DAGSTER_PG_PASSWORD": password,
        "DAGSTER_PG_DB": "hypograph",
    }
    return env, stop


def instance_yaml(s3_endpoint: str) -> str:
    """deploy/dagster.yaml as it is, with the queue's coordinator polling each second and the step
    logs on the object store (deploy/README-deployment.md, "Step logs"), staged in the machine's own
    ``DAGSTER_HOME``: a worker runs a step with the settings of the run's instance (dagster-celery sends
    them along), so a path written here would be machine A's on every machine; ``{env: …}`` is read
    where the step runs. (The default, /tmp, would be a local path the machines share.)"""
    recipe = (REPO / "deploy" / "dagster.yaml").read_text(encoding="utf-8")
    return recipe + (
        "\nrun_coordinator:\n  module: dagster._core.run_coordinator\n  class: QueuedRunCoordinator\n"
        "  config:\n    dequeue_interval_seconds: 1\n"
        "compute_logs:\n  module: dagster_aws.s3.compute_log_manager\n  class: S3ComputeLogManager\n"
        f"  config:\n    bucket: {BUCKET}\n    prefix: hypograph/logs\n    endpoint_url: {s3_endpoint}\n"
        "    use_ssl: false\n    local_dir: {env: DAGSTER_HOME}\n"
    )


class Machines:
    """The services, machine A (daemon, worker serving ``dagster``) and B, C (workers serving
    ``shards``), each of B and C in a network namespace of its own where this machine allows
    (``tests/support/netns.py``; else all on 127.0.0.1, ``self.network`` None)."""

    def __init__(self, base: Path, remote: tuple[str, ...] = ("b", "c")):
        self.base = base
        self.remote = remote  # the machines whose worker serves only `shards`
        self.processes: list[subprocess.Popen] = []
        self.workers: dict[str, subprocess.Popen] = {}
        self.stops = []
        self.password = "redis-" + os.urandom(6).hex()
        self.network = None if netns.unavailable() else netns.Network(list(remote))
        # where the services listen and everyone reaches them: the bridge's address, or loopback
        self.host = self.network.host if self.network else "127.0.0.1"

    def start(self) -> None:
        if self.network:
            self.stops.append(self.network.delete)  # run last, once the processes inside have stopped
            self.network.create()
        clients = str(self.network.subnet) if self.network else "127.0.0.1/32"
        pg, stop_pg = start_postgres(self.host, clients)
        self.stops.insert(0, stop_pg)
        redis_port, s3_port = free_port(self.host), free_port(self.host)
        redis_dir = self.base / "redis"
        redis_dir.mkdir()
        self.redis = self.service(
            ["redis-server", "--port", redis_port, "--bind", self.host, "--dir", redis_dir, "--save", ""]
            + ["--appendonly", "yes", "--requirepass", self.password],
            "redis",
            {"PATH": os.environ.get("PATH", "")},
        )
        wait_for_port(redis_port, self.redis, self.base / "redis.log", host=self.host)
        self.s3_endpoint = f"http://{self.host}:{s3_port}"
        self.s3 = self.service([VENV_BIN / "moto_server", "-H", self.host, "-p", s3_port], "s3", dict(os.environ))
        wait_for_port(s3_port, self.s3, self.base / "s3.log", host=self.host)
        self.shared = {
            **pg,
            "HYPOGRAPH_EXECUTOR": "celery",
            "HYPOGRAPH_CELERY_CONFIG": str(REPO / "deploy" / "celery.yaml"),
            "HYPOGRAPH_CELERY_BROKER": f"redis://:{self.password}@{self.host}:{redis_port}/0",
            "HYPOGRAPH_SHARD_STORAGE": f"s3://{BUCKET}/hypograph/shards",
            "AWS_ACCESS_KEY_ID": "hypograph-test",
            "AWS_SECRET_ACCESS_KEY": "hypograph-test-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.s3_endpoint,
        }
        self.s3_client().create_bucket(Bucket=BUCKET)
        self.env = {name: self.machine_env(name) for name in ("a", *self.remote)}
        with self.instance() as instance:  # the tables made once, before four processes open them
            instance.get_runs(limit=1)
        self.service([VENV_BIN / "dagster-daemon", "run", "-w", "workspace.yaml"], "daemon-a", self.env["a"], REPO)
        for name, queues in (("a", "dagster"), *((r, "shards") for r in self.remote)):
            inside = self.network.prefix(name) if self.network and name in self.remote else []
            args = [*inside, VENV_BIN / "celery", "-A", "pipelines.celery_worker", "worker", "--pool", "solo"]
            args += ["-Q", queues, "-n", f"{name}@%h", "--loglevel", "INFO"]
            self.workers[name] = self.service(args, f"worker-{name}", self.env[name], self.base / name / "work")

    def machine_env(self, name: str) -> dict[str, str]:
        """One machine's environment: its own DAGSTER_HOME and working folder, the shared variables."""
        home = self.base / name / "home"
        home.mkdir(parents=True)
        (self.base / name / "work").mkdir()
        (home / "dagster.yaml").write_text(instance_yaml(self.s3_endpoint), encoding="utf-8")
        return {**offline_env(), **self.shared, "DAGSTER_HOME": str(home), "PATH": f"{VENV_BIN}:/usr/bin:/bin"}

    def service(self, args: list, name: str, env: dict, cwd: Path | None = None) -> subprocess.Popen:
        process = services.start(args, self.base / f"{name}.log", env, cwd=cwd)
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.processes):
            services.stop(process, seconds=20)
        for stop in self.stops:
            stop()

    def s3_client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.s3_endpoint,
            aws_access_key_id=self.shared["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.shared["AWS_SECRET_ACCESS_KEY"],
            region_name="us-east-1",
        )

    def keys(self, prefix: str) -> list[str]:
        pages = self.s3_client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def instance(self):
        from dagster import DagsterInstance

        old = {k: os.environ.get(k) for k in self.shared}
        os.environ.update(self.shared)  # deploy/dagster.yaml reads DAGSTER_PG_* from the environment
        try:
            return DagsterInstance.from_config(self.env["a"]["DAGSTER_HOME"])
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(self.base.glob("*.log")))

    def wait(self, run_id: str):
        deadline = time.monotonic() + RUN_SECONDS
        while time.monotonic() < deadline:
            with self.instance() as instance:
                run = instance.get_run_by_id(run_id)
            if run.is_finished:
                return run
            time.sleep(2)
        pytest.fail(f"run {run_id} not finished in {RUN_SECONDS} s; logs:\n{self.logs()}")


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    machines = Machines(tmp_path_factory.mktemp("hosts"))
    try:
        machines.start()
        yield machines
    finally:
        machines.stop()


def test_a_sharded_run_with_workers_on_two_other_machines_writes_the_in_process_files(machines, tmp_path):
    reference = write_corpus(tmp_path / "reference" / "corpus", 1200)
    assert execute(reference, "proximity").success
    expected = proximity_files(reference)

    root = write_corpus(machines.base / "a" / "inputs" / "corpus", 1200)  # only machine A has it
    run = launch_sharded(machines, root)
    with machines.instance() as instance:
        events = [e for e in instance.all_logs(run.run_id) if e.dagster_event is not None]
    assert run.status.value == "SUCCESS", machines.logs()
    assert_identical(root, expected)
    assert_routed(events)
    assert_logs_on_the_store(machines, run, events)
    assert_shards_removed_from_the_store(machines, run)


def test_machines_b_and_c_are_namespaces_that_reach_the_services_by_address_only(machines):
    """B's and C's workers run in network namespaces of their own, whose loopback holds no service
    and whose only route is the private /24's; the services answer there at the bridge's address."""
    if machines.network is None:
        pytest.skip(netns.unavailable())
    network = machines.network
    mine = os.stat("/proc/self/ns/net").st_ino
    redis_port = int(machines.shared["HYPOGRAPH_CELERY_BROKER"].rsplit(":", 1)[1].split("/")[0])
    ports = [redis_port, int(machines.shared["DAGSTER_PG_PORT"]), int(machines.s3_endpoint.rsplit(":", 1)[1])]
    probe = "import socket, sys\nfor host, port in zip(sys.argv[1::2], sys.argv[2::2]):\n"
    probe += "    with socket.socket() as s:\n        s.settimeout(5)\n        print(s.connect_ex((host, int(port))))"
    for name in machines.remote:
        worker = machines.workers[name]
        assert worker.poll() is None, machines.logs()
        assert os.stat(f"/proc/{worker.pid}/ns/net").st_ino != mine  # the celery process itself
        (route,) = network.routes(name)
        assert route.startswith(f"{network.subnet} ") and f"src {network.address[name]}" in route, route
        targets = [str(a) for port in ports for a in (network.host, port, "127.0.0.1", port)]
        answers = subprocess.run(
            [*network.prefix(name), sys.executable, "-c", probe, *targets], capture_output=True, text=True, check=True
        ).stdout.split()
        assert answers[0::2] == ["0"] * len(ports), answers  # every service, at the bridge's address
        assert "0" not in answers[1::2], answers  # none on the namespace's own loopback


def test_a_network_half_made_is_removed_whole():
    """Cleanup on failure: a create() that fails at its second machine (a name too long for an
    interface) leaves nothing once delete() has run; a whole one neither."""
    if netns.unavailable():
        pytest.skip(netns.unavailable())
    whole, broken = netns.Network(["b"]), netns.Network(["b", "a-name-too-long-for-an-interface"])
    try:
        whole.create()
        assert whole.left() == sorted([whole.bridge, whole.namespace("b"), whole.veth("b")])
        with pytest.raises(subprocess.CalledProcessError):
            broken.create()
        assert broken.left()  # the bridge and b's namespace were made before the failure
    finally:
        whole.delete()
        broken.delete()
    assert whole.left() == [] and broken.left() == []


def launch_sharded(machines, root: Path):
    """`hypograph add` on machine A, then the proximity job launched to the queue; the finished run."""
    env = machines.env["a"]
    added = hypograph("add", root, env=env, timeout=180)
    assert added.returncode == 0, added.stderr
    key = added.stdout.split(":")[0]
    config = {"resources": {"proximity": {"config": {"shards": SHARDS}}}}
    launched = subprocess.run(
        [VENV_BIN / "dagster", "job", "launch", "-j", "proximity", "-w", "workspace.yaml"]
        + ["--tags", json.dumps({"dagster/partition": key}), "--config-json", json.dumps(config)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert launched.returncode == 0, launched.stderr[-3000:]
    with machines.instance() as instance:
        (run,) = [r for r in instance.get_runs() if r.tags.get("dagster/partition") == key]
    return machines.wait(run.run_id)


def assert_routed(events) -> None:
    """The range steps ran on machines B and C (both), every other step on A."""
    hosts = {step: {h.split("@")[0] for h in hs} for step, hs in celery_hosts(events).items()}
    shard_steps = [k for k in hosts if "_shard[" in k]
    assert len(shard_steps) >= SHARDS
    assert set().union(*(hosts[k] for k in shard_steps)) <= {"b", "c"}  # the range steps: machines B and C
    assert {"b", "c"} <= set().union(*(hosts[k] for k in shard_steps)), hosts  # both ran some
    assert all(hosts[k] == {"a"} for k in hosts if k not in shard_steps), hosts  # the rest on A


def assert_logs_on_the_store(machines, run, events) -> None:
    """Step logs in the object store, readable from any machine, and staged apart."""
    logs = set(machines.keys(f"hypograph/logs/storage/{run.run_id}/compute_logs/"))
    captured = [
        e.dagster_event.event_specific_data for e in events if e.dagster_event.event_type_value == "LOGS_CAPTURED"
    ]
    shard_logs = [c.file_key for c in captured if any("_shard[" in k for k in c.step_keys)]
    assert shard_logs, captured
    for key in shard_logs:  # what B and C printed, on the object store, where the UI reads it from any machine
        assert f"hypograph/logs/storage/{run.run_id}/compute_logs/{key}.err" in logs, (key, sorted(logs))
    assert_logs_staged_apart(machines, run)


def assert_logs_staged_apart(machines, run) -> None:
    """Each machine staged its steps' output in its own DAGSTER_HOME (local_dir), none in the shared
    temp folder (Dagster's default place); B's and C's folders hold no shard file of the run."""
    for name in ("b", "c"):
        local = [p for p in (machines.base / name).rglob("*") if p.is_file() and run.run_id in str(p)]
        assert not [p for p in local if "shard" in p.name], local
    for name in ("a", "b", "c"):
        assert (machines.base / name / "home" / run.run_id / "compute_logs").is_dir(), name
    assert not (Path(tempfile.gettempdir()) / run.run_id).exists()


def assert_shards_removed_from_the_store(machines, run) -> None:
    """The run's shard files removed from the object store once it succeeded (the daemon's
    shard_files_removed sensor, every 30 s at most)."""
    deadline = time.monotonic() + 120
    while machines.keys(f"hypograph/shards/{run.run_id}/") and time.monotonic() < deadline:
        time.sleep(2)
    assert machines.keys(f"hypograph/shards/{run.run_id}/") == []
