"""A team's instance on PostgreSQL (deploy/dagster.yaml): a ``hypograph proximity`` run and a run
launched as the UI launches one (queued, then started by a real ``dagster-daemon``) are both
recorded in the database, so are the daemon's sensor ticks (a workspace folder is configured, as
deploy/README-deployment.md does, so ``inputs_discovered`` is on), and nothing is written to SQLite.

The server is Debian's (``apt-get install postgresql``; .ci/run installs it): started here in a
temporary folder on a free loopback port, with a password the instance reads from the environment.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import services
from cli_helper import hypograph, start_hypograph
from conftest import EXAMPLE_RUN, REPO, VENV_BIN, copy_tree, offline_env
from services import free_port

DEPLOY_YAML = REPO / "deploy" / "dagster.yaml"
PG_VARS = ("DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_USER", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB")


def server_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/N/bin`` holding initdb and pg_ctl, or None."""
    found = [
        Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/pg_ctl") if Path(p).with_name("initdb").exists()
    ]
    return max(found, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0) if found else None


@pytest.fixture(scope="module")
def postgres() -> dict[str, str]:
    """A PostgreSQL server of our own on 127.0.0.1 with a database ``hypograph``; the DAGSTER_PG_*
    variables deploy/dagster.yaml reads. Runs as the ``postgres`` user when the tests run as root
    (the server refuses root)."""
    bindir = server_bindir()
    if bindir is None:
        pytest.skip(
            "no PostgreSQL server: initdb/pg_ctl not under /usr/lib/postgresql/*/bin "
            "(apt-get install postgresql; .ci/run does)"
        )
    base = Path(tempfile.mkdtemp(prefix="hypograph-pg-"))  # not under pytest's root-only tmp
    owner = "postgres" if os.geteuid() == 0 else None
    (base / "pw").write_text("s3cret-for-test\n")
    if owner:
        for p in (base, base / "pw"):
            shutil.chown(p, owner, owner)
    as_owner = {"user": owner, "group": owner} if owner else {}
    port = free_port()
    env = {
        "DAGSTER_PG_HOST": "127.0.0.1",
        "DAGSTER_PG_PORT": str(port),
        "DAGSTER_PG_USER": "dagster",
        "DAGSTER_PG_PASSWORD": "s3cret-for-test",
        "DAGSTER_PG_DB": "hypograph",
    }
    try:
        subprocess.run(
            [
                bindir / "initdb",
                "-D",
                base / "data",
                "-U",
                "dagster",
                "--pwfile",
                base / "pw",
                "--auth",
                "scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            cwd=base,
            **as_owner,
        )
        subprocess.run(
            [
                bindir / "pg_ctl",
                "-D",
                base / "data",
                "-l",
                base / "server.log",
                "-w",
                "-t",
                "60",
                "-o",
                f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off",
                "start",
            ],
            check=True,
            capture_output=True,
            cwd=base,
            **as_owner,
        )
        subprocess.run(
            [bindir / "createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "dagster", "hypograph"],
            check=True,
            capture_output=True,
            env={**os.environ, "PGPASSWORD": env["DAGSTER_PG_PASSWORD"]},
        )
        yield env
    finally:
        subprocess.run(
            [bindir / "pg_ctl", "-D", base / "data", "-m", "fast", "-w", "stop"],
            check=False,  # best effort: the folder is removed next either way
            capture_output=True,
            cwd=base,
            **as_owner,
        )
        shutil.rmtree(base, ignore_errors=True)


def proximity_job_assets() -> set[str]:
    from pipelines.definitions import defs

    return {k.to_user_string() for k in defs.resolve_job_def("proximity").asset_layer.executable_asset_keys}


def query(pg: dict[str, str], sql: str) -> list[tuple]:
    import psycopg2

    with (
        psycopg2.connect(
            host=pg["DAGSTER_PG_HOST"],
            port=int(pg["DAGSTER_PG_PORT"]),
            user=pg["DAGSTER_PG_USER"],
            password=pg["DAGSTER_PG_PASSWORD"],
            dbname=pg["DAGSTER_PG_DB"],
        ) as conn,
        conn.cursor() as cursor,
    ):
        cursor.execute(sql)
        return cursor.fetchall()


def test_cli_and_queued_runs_are_recorded_in_postgres(postgres, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(DEPLOY_YAML, home / "dagster.yaml")
    # The team's workspace folder (empty: the inputs here are registered by the commands), which
    # turns inputs_discovered on: without one no sensor runs by default, and no tick is written.
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = {**offline_env(), **postgres, "DAGSTER_HOME": str(home), "HYPOGRAPH_WORKSPACE": str(workspace)}
    for key, value in postgres.items():
        monkeypatch.setenv(key, value)
    by_cli, by_queue = copy_tree(EXAMPLE_RUN, tmp_path / "cli"), copy_tree(EXAMPLE_RUN, tmp_path / "queued")

    log = tmp_path / "daemon.log"
    daemon = services.start([VENV_BIN / "dagster-daemon", "run", "-w", "workspace.yaml"], log, env, cwd=REPO)
    try:
        cli = start_hypograph("proximity", by_cli, "--llm", "offline", env=env)  # meanwhile, the queued one
        added = hypograph("add", by_queue, env=env, timeout=120)
        assert added.returncode == 0, added.stderr
        # What the Launchpad's Materialize does: a run of the job on one partition, handed to the queue.
        launch = subprocess.run(
            [
                VENV_BIN / "dagster",
                "job",
                "launch",
                "-j",
                "proximity",
                "-w",
                "workspace.yaml",
                "--tags",
                json.dumps({"dagster/partition": "queued"}),
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert launch.returncode == 0, launch.stderr
        out, err = cli.communicate(timeout=300)
        assert cli.returncode == 0, err
        assert f"{by_cli}: 30 hypotheses" in out
        statuses = wait_for_statuses(postgres, 2, seconds=300, log=log)
        ticks = wait_for_ticks(postgres, "inputs_discovered", seconds=120, log=log)
    finally:
        services.stop(daemon)

    assert statuses == {"cli": "SUCCESS", "queued": "SUCCESS"}  # the inputs' ids: their folders' names
    materialized = dict(
        query(
            postgres,
            """
        SELECT t.value, count(*) FROM event_logs e JOIN run_tags t ON t.run_id = e.run_id
        WHERE e.dagster_event_type = 'ASSET_MATERIALIZATION' AND t.key = 'dagster/partition' GROUP BY t.value""",
        )
    )
    assets = len(proximity_job_assets())  # every asset of the proximity job, once per run
    assert assets >= 7 and materialized == {"cli": assets, "queued": assets}
    partitions = set(query(postgres, "SELECT partitions_def_name, partition FROM dynamic_partitions"))
    assert partitions == {("hypothesis_inputs", "cli"), ("hypothesis_inputs", "queued")}
    # the daemon's evaluations of the sensor, in the schedule storage: nothing to register there
    assert {(status, reason) for status, reason in ticks} == {("TickStatus.SKIPPED", f"no new input under {workspace}")}
    assert not list(home.rglob("*.db")), "something was written to SQLite"
    for root in (by_cli, by_queue):
        assert (root / "proximity" / "verdicts.json").is_file()


def wait_for_statuses(pg: dict[str, str], count: int, seconds: float, log: Path) -> dict[str, str]:
    """partition -> status of the runs in Postgres, once ``count`` runs have finished."""
    deadline = time.monotonic() + seconds
    rows: list[tuple] = []
    while time.monotonic() < deadline:
        rows = query(
            pg,
            """SELECT t.value, r.status FROM runs r JOIN run_tags t ON t.run_id = r.run_id
                            WHERE t.key = 'dagster/partition'""",
        )
        if len(rows) >= count and all(s in ("SUCCESS", "FAILURE", "CANCELED") for _, s in rows):
            return dict(rows)
        time.sleep(1)
    pytest.fail(f"{count} runs not finished in {seconds} s: {rows}; daemon log:\n" + log.read_text()[-3000:])


def wait_for_ticks(pg: dict[str, str], sensor: str, seconds: float, log: Path) -> list[tuple[str, str]]:
    """(status, skip reason) of each tick of ``sensor`` in Postgres, once there is one."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        # TickData as Dagster stores it: the instigator's name under its old name, job_name
        bodies = [json.loads(body) for (body,) in query(pg, "SELECT tick_body FROM job_ticks")]
        ticks = [(b["status"]["__enum__"], b["skip_reason"]) for b in bodies if b["job_name"] == sensor]
        if ticks:
            return ticks
        time.sleep(1)
    pytest.fail(f"no tick of {sensor} in {seconds} s; daemon log:\n" + log.read_text()[-3000:])
