"""Issue 44: a team's deployment across machines, simulated on this one.

Machine A runs the Dagster daemon and the one worker that serves the queue ``dagster`` (the steps
that read or write the input folder, which only A mounts). Machines B and C each run a worker that
serves only ``shards`` (the per-range steps). The three share nothing but three network services the
test starts on 127.0.0.1: Redis (broker, with a password), PostgreSQL (the instance: runs, events,
the input registry) and an S3-compatible object store (``moto_server``, moto's server mode: the
shards between steps and every step's stdout/stderr through Dagster's ``S3ComputeLogManager``).
Each machine has its own ``DAGSTER_HOME`` (a copy of the same ``dagster.yaml``) and its own working
folder; no local path holds shards or logs for another. The code is installed alike on each (the
virtualenv, ``PYTHONPATH``), as an image would be. Every setting is the recipe's: deploy/dagster.yaml
and deploy/celery.yaml as they are, the variables of deploy/README-deployment.md.

Not done here: network namespaces (``ip netns``) around B and C; they reach the services by
address, but on the host's loopback.

The sharded proximity job, queued as the Launchpad queues it, writes files byte-identical to an
in-process run; the shard steps ran on B and C; their logs are in the object store; the run's
shard files are gone from it once the run has succeeded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

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


def start_postgres(base: Path) -> tuple[dict[str, str], callable]:
    """A PostgreSQL server on 127.0.0.1 with a database ``hypograph``; (DAGSTER_PG_* variables, stop)."""
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
    port = free_port()
    run = dict(capture_output=True, cwd=root, **as_owner)
    subprocess.run(
        [bindir / "initdb", "-D", root / "data", "-U", "dagster", "--pwfile", root / "pw"]
        + ["--auth", "scram-sha-256", "-E", "UTF8", "--no-sync"],
        check=True,
        **run,
    )
    subprocess.run(
        [bindir / "pg_ctl", "-D", root / "data", "-l", root / "server.log", "-w", "-t", "60"]
        + ["-o", f"-h 127.0.0.1 -p {port} -k {root} -c fsync=off -c max_connections=200", "start"],
        check=True,
        **run,
    )

    def stop() -> None:
        subprocess.run([bindir / "pg_ctl", "-D", root / "data", "-m", "fast", "-w", "stop"], check=False, **run)
        shutil.rmtree(root, ignore_errors=True)

    try:
        subprocess.run(
            [bindir / "createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "dagster", "hypograph"],
            check=True,
            capture_output=True,
            env={**os.environ, "PGPASSWORD": password},
        )
    except BaseException:
        stop()
        raise
    env = {
        "DAGSTER_PG_HOST": "127.0.0.1",
        "DAGSTER_PG_PORT": str(port),
        "DAGSTER_PG_USER": "dagster",
        "DAGSTER_PG_PASSWORD": password,
        "DAGSTER_PG_DB": "hypograph",
    }
    return env, stop


def instance_yaml(s3_endpoint: str) -> str:
    """deploy/dagster.yaml as it is, with the queue's coordinator polling each second and the step
    logs on the object store (deploy/README-deployment.md, "Step logs")."""
    recipe = (REPO / "deploy" / "dagster.yaml").read_text(encoding="utf-8")
    return recipe + (
        "\nrun_coordinator:\n  module: dagster._core.run_coordinator\n  class: QueuedRunCoordinator\n"
        "  config:\n    dequeue_interval_seconds: 1\n"
        "compute_logs:\n  module: dagster_aws.s3.compute_log_manager\n  class: S3ComputeLogManager\n"
        f"  config:\n    bucket: {BUCKET}\n    prefix: hypograph/logs\n    endpoint_url: {s3_endpoint}\n"
        "    use_ssl: false\n"
    )


class Machines:
    """The services, machine A (daemon, worker serving ``dagster``) and B, C (workers serving ``shards``)."""

    def __init__(self, base: Path, remote: tuple[str, ...] = ("b", "c")):
        self.base = base
        self.remote = remote  # the machines whose worker serves only `shards`
        self.processes: list[subprocess.Popen] = []
        self.stops = []
        self.password = "redis-" + os.urandom(6).hex()

    def start(self) -> None:
        pg, stop_pg = start_postgres(self.base)
        self.stops.append(stop_pg)
        redis_port, s3_port = free_port(), free_port()
        redis_dir = self.base / "redis"
        redis_dir.mkdir()
        self.redis = self.service(
            ["redis-server", "--port", redis_port, "--bind", "127.0.0.1", "--dir", redis_dir, "--save", ""]
            + ["--appendonly", "yes", "--requirepass", self.password],
            "redis",
            {"PATH": os.environ.get("PATH", "")},
        )
        wait_for_port(redis_port, self.redis, self.base / "redis.log")
        self.s3_endpoint = f"http://127.0.0.1:{s3_port}"
        self.s3 = self.service([VENV_BIN / "moto_server", "-H", "127.0.0.1", "-p", s3_port], "s3", dict(os.environ))
        wait_for_port(s3_port, self.s3, self.base / "s3.log")
        self.shared = {
            **pg,
            "HYPOGRAPH_EXECUTOR": "celery",
            "HYPOGRAPH_CELERY_CONFIG": str(REPO / "deploy" / "celery.yaml"),
            "HYPOGRAPH_CELERY_BROKER": f"redis://:{self.password}@127.0.0.1:{redis_port}/0",
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
            args = [VENV_BIN / "celery", "-A", "pipelines.celery_worker", "worker", "--pool", "solo"]
            args += ["-Q", queues, "-n", f"{name}@%h", "--loglevel", "INFO"]
            self.service(args, f"worker-{name}", self.env[name], self.base / name / "work")

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
    """Step logs in the object store, readable from any machine; B's and C's folders hold no shard."""
    logs = set(machines.keys(f"hypograph/logs/storage/{run.run_id}/compute_logs/"))
    captured = [
        e.dagster_event.event_specific_data for e in events if e.dagster_event.event_type_value == "LOGS_CAPTURED"
    ]
    shard_logs = [c.file_key for c in captured if any("_shard[" in k for k in c.step_keys)]
    assert shard_logs, captured
    for key in shard_logs:  # what B and C printed, on the object store, where the UI reads it from any machine
        assert f"hypograph/logs/storage/{run.run_id}/compute_logs/{key}.err" in logs, (key, sorted(logs))
    for name in ("b", "c"):
        local = [p for p in (machines.base / name).rglob("*") if p.is_file() and run.run_id in str(p)]
        assert not [p for p in local if "shard" in p.name], local
    # the run's shard files removed from the object store once it succeeded (the daemon's
    # shard_files_removed sensor, every 30 s at most)
    deadline = time.monotonic() + 120
    while machines.keys(f"hypograph/shards/{run.run_id}/") and time.monotonic() < deadline:
        time.sleep(2)
    assert machines.keys(f"hypograph/shards/{run.run_id}/") == []
