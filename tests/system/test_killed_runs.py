"""A command killed mid-run (kill -9, out of memory, a restart) leaves its Dagster run STARTED: the
next command, and the sensor's next tick, end it as failed, saying why, and the input is served
again. Each run a command executes in itself is tagged with its process (``hypograph.processes``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from cli_helper import hypograph
from conftest import REPO, build_run_dir

from hypograph.processes import gone, tag_of, this_process

DRIVER = REPO / "tests" / "support" / "killed_run_driver.py"


def test_a_process_tag_is_gone_once_the_process_ends_and_only_then():
    assert not gone(this_process())
    child = subprocess.Popen(["sleep", "30"])
    tag = tag_of(child.pid)
    assert not gone(tag)
    child.kill()
    child.wait()
    assert gone(tag)
    host, boot, pid, start = tag.split("/")
    assert gone(f"{host}/another-boot/{pid}/{start}")  # the machine restarted since
    assert gone(f"{host}/{boot}/{os.getpid()}/{int(start) + 1}")  # the pid now names another process
    assert not gone(f"not-{socket.gethostname()}/{boot}/{pid}/{start}")  # another machine's: cannot tell
    assert not any(gone(t) for t in ("", "garbage", "a/b/c/d", f"{host}/{boot}/x/1"))


def _killed_run(tmp_path: Path) -> tuple[Path, dict]:
    """An input whose proximity run was killed in its clusters step, and the environment of its instance."""
    run_dir = build_run_dir(tmp_path / "run")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "HYPOGRAPH_LLM": "offline"}
    done = subprocess.run(
        [sys.executable, str(DRIVER), "kill", str(run_dir)], check=False, env=env, capture_output=True, timeout=300
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    return run_dir, env


def _runs(home: Path):
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(home)) as instance:
        return [(r.run_id, r.status.value, r.tags.get("dagster/partition")) for r in instance.get_runs()]


def _failure_message(home: Path, run_id: str) -> str:
    from dagster import DagsterEventType, DagsterInstance

    with DagsterInstance.from_config(str(home)) as instance:
        records = instance.get_records_for_run(run_id, of_type=DagsterEventType.RUN_FAILURE).records
        return records[-1].event_log_entry.dagster_event.message if records else ""


def test_the_next_command_ends_a_killed_commands_run_and_runs_the_input(tmp_path):
    run_dir, env = _killed_run(tmp_path)
    [(killed, status, _)] = _runs(tmp_path / "home")
    assert status == "STARTED"  # what kill -9 leaves: no process will ever end it
    done = hypograph("proximity", run_dir, "-q", env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    runs = dict((r, s) for r, s, _ in _runs(tmp_path / "home"))
    assert runs.pop(killed) == "FAILURE" and list(runs.values()) == ["SUCCESS"]
    assert "ended without finishing it: killed, or the machine restarted" in _failure_message(tmp_path / "home", killed)


def test_the_sensor_serves_an_input_whose_command_was_killed_mid_run(tmp_path, monkeypatch):
    from dagster import DagsterInstance, SensorResult, build_sensor_context

    from assets.structure.flow import hypotheses_changed
    from resources import Inputs

    run_dir, env = _killed_run(tmp_path)
    [(killed, status, key)] = _runs(tmp_path / "home")
    assert status == "STARTED"
    monkeypatch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
    inputs = Inputs()  # the registry the command wrote: in the instance
    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        result = hypotheses_changed(build_sensor_context(instance=instance), inputs=inputs)
    assert isinstance(result, SensorResult) and [r.partition_key for r in result.run_requests] == [key]
    assert dict((r, s) for r, s, _ in _runs(tmp_path / "home"))[killed] == "FAILURE"


def test_a_live_commands_run_is_left_alone():
    """A run whose process still runs (here: this test's) is neither ended nor served twice."""
    from dagster import DagsterInstance, DagsterRunStatus, job, op

    from assets.active_runs import PROCESS_TAG, end_orphaned_runs, has_active_run

    @op
    def nothing() -> None:
        return None

    @job
    def one_op():
        nothing()

    instance = DagsterInstance.ephemeral()
    tags = {PROCESS_TAG: this_process(), "dagster/partition": "p"}
    run = instance.create_run_for_job(job_def=one_op, tags=tags, status=DagsterRunStatus.STARTED)
    assert end_orphaned_runs(instance) == [] and has_active_run(instance, "p")
    assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.STARTED


def test_ctrl_c_during_a_run_says_interrupted_and_exits_130(tmp_path):
    """Ctrl-C (SIGINT to the command's process group) inside a step: the run ends failed, the command
    says so in one line, with no traceback from it or a worker, and exits 130."""
    run_dir = build_run_dir(tmp_path / "run")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "HYPOGRAPH_LLM": "offline"}
    done = subprocess.run(
        [sys.executable, str(DRIVER), "interrupt", str(run_dir)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    assert done.returncode == 130, done.stderr
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, done.stderr
    assert (
        lines[0].startswith("hypograph proximity: interrupted: proximity run ") and "run the command again" in lines[0]
    )
    assert [s for _, s, _ in _runs(tmp_path / "home")] == ["FAILURE"]
