"""The sensors users rely on: ``inputs_discovered`` registers the input folders of a workspace, each
once; ``hypotheses_changed`` requests structure for a changed vault and proximity for a changed run
directory, and nothing when nothing changed. Evaluated with ``build_sensor_context``, and once
with a real ``dagster-daemon`` that ``dagster sensor start`` turned the sensor on for."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import services
from conftest import (
    EXAMPLE_RUN,
    EXAMPLE_VAULT,
    REPO,
    VENV_BIN,
    build_run_dir,
    build_vault,
    copy_tree,
    execute,
    offline_env,
    write_json_hypothesis,
    write_vault_node,
)
from dagster import DagsterInstance, DagsterRunStatus, SensorResult, SkipReason, build_sensor_context
from dagster._core.scheduler.instigation import InstigatorType, TickStatus

from pipelines.sensors import hypotheses_changed, inputs_discovered
from resources import Inputs


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as instance:
        yield instance


def discover(instance, workspace: Path | None):
    """One tick of ``inputs_discovered``; applies its partition requests as the daemon would."""
    result = inputs_discovered(build_sensor_context(instance=instance),
                               inputs=Inputs(workspace=str(workspace) if workspace else None))
    if isinstance(result, SensorResult):
        for request in result.dynamic_partitions_requests:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return result


def added(result) -> list[str]:
    assert isinstance(result, SensorResult), result
    return [k for r in result.dynamic_partitions_requests for k in r.partition_keys]


def test_inputs_discovered_registers_each_new_folder_once(instance, tmp_path):
    ws = tmp_path / "workspace"
    run, vault = build_run_dir(ws / "run"), build_vault(ws / "vault")
    (ws / "notes").mkdir()  # no hypotheses/: not an input
    (ws / "readme.txt").write_text("not an input")
    assert sorted(added(discover(instance, ws))) == sorted([str(run.resolve()), str(vault.resolve())])
    assert sorted(instance.get_dynamic_partitions("inputs")) == sorted([str(run.resolve()), str(vault.resolve())])

    again = discover(instance, ws)
    assert isinstance(again, SkipReason) and "no new input" in again.skip_message

    later = build_run_dir(ws / "later")
    assert added(discover(instance, ws)) == [str(later.resolve())]
    assert len(instance.get_dynamic_partitions("inputs")) == 3


def test_inputs_discovered_skips_without_a_workspace(instance):
    result = discover(instance, None)
    assert isinstance(result, SkipReason) and "HYPOGRAPH_WORKSPACE" in result.skip_message
    assert instance.get_dynamic_partitions("inputs") == []


class Ticks:
    """Successive ticks of ``hypotheses_changed`` carrying the cursor, as the daemon does."""

    def __init__(self, instance):
        self.instance, self.cursor = instance, None

    def __call__(self) -> list[tuple[str, str]]:
        """(job name, partition key) of each requested run, sorted; [] for a skip."""
        context = build_sensor_context(instance=self.instance, cursor=self.cursor)
        result = hypotheses_changed(context)
        self.cursor = context.cursor
        if isinstance(result, SkipReason):
            return []
        assert all(r.run_key and r.run_key.startswith(r.partition_key) for r in result)
        return sorted((r.job_name, r.partition_key) for r in result)


@pytest.fixture
def two_inputs(instance, tmp_path):
    """A registered run directory and vault (the bundled examples), and the sensor's tick function."""
    run, vault = copy_tree(EXAMPLE_RUN, tmp_path / "run"), copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
    instance.add_dynamic_partitions("inputs", [str(run), str(vault)])
    return run, vault, Ticks(instance)


def test_first_tick_requests_structure_for_a_vault_and_proximity_for_a_run_dir(two_inputs):
    run, vault, tick = two_inputs
    assert tick() == sorted([("proximity", str(run)), ("structure", str(vault))])
    assert tick() == []  # nothing changed


def test_a_changed_vault_hypothesis_requests_structure_only_for_that_vault(two_inputs):
    run, vault, tick = two_inputs
    tick()
    node = next((vault / "hypotheses").glob("H-3 - *.md"))
    node.write_text(node.read_text(encoding="utf-8").replace("earthquake", "seismic"), encoding="utf-8")
    assert tick() == [("structure", str(vault))]
    write_vault_node(vault, "H-90", "Pirates cut the sea lanes", statement="Piracy cut the grain sea lanes.")
    assert tick() == [("structure", str(vault))]
    assert tick() == []


def test_a_new_run_dir_hypothesis_requests_proximity(two_inputs):
    run, vault, tick = two_inputs
    tick()
    write_json_hypothesis(run, "H-11", title="Neonicotinoids impair foraging",
                          statement="Sublethal neonicotinoid doses impair forager navigation.")
    assert tick() == [("proximity", str(run))]
    assert tick() == []


def test_a_missing_input_folder_is_passed_over(two_inputs, instance, tmp_path):
    run, vault, tick = two_inputs
    tick()
    instance.add_dynamic_partitions("inputs", [str(tmp_path / "gone")])
    assert tick() == []


def test_the_runs_own_writes_request_nothing_nor_a_run_in_progress(two_inputs, instance):
    """A structure run rewrites hypotheses/ (states, backlinks): not a change to react to. While a
    run of an input is in progress, its files are mid-write: the input is looked at after the run."""
    from pipelines.definitions import defs

    run, vault, tick = two_inputs
    assert tick() == sorted([("proximity", str(run)), ("structure", str(vault))])
    assert execute(vault, "structure", instance=instance).success
    assert execute(run, "proximity", instance=instance).success
    assert tick() == []

    active = instance.create_run_for_job(defs.resolve_job_def("structure"), status=DagsterRunStatus.STARTED,
                                         tags={"dagster/partition": str(vault)})
    node = next((vault / "hypotheses").glob("H-3 - *.md"))
    node.write_text(node.read_text(encoding="utf-8").replace("earthquake", "seismic"), encoding="utf-8")
    assert tick() == []
    instance.report_run_failed(instance.get_run_by_id(active.run_id))
    assert tick() == [("structure", str(vault))]


def test_an_input_the_cli_already_processed_requests_nothing(two_inputs, instance):
    """Turning the sensor on after ``hypograph proximity`` re-runs nothing unchanged."""
    run, vault, tick = two_inputs
    assert execute(run, "proximity", instance=instance).success
    assert tick() == [("structure", str(vault))]
    write_json_hypothesis(run, "H-12", title="Cold snaps kill clusters", statement="Sudden cold snaps kill clusters.")
    assert tick() == [("proximity", str(run))]


# -- with a real daemon -------------------------------------------------------------------------

def sensor_ticks(instance, name: str = "hypotheses_changed") -> list:
    """The sensor's ticks, oldest first ([] until the daemon evaluated it once)."""
    states = [s for s in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR) if s.name == name]
    ticks = [t for s in states for t in instance.get_ticks(s.instigator_origin_id, s.selector_id)]
    return sorted(ticks, key=lambda t: t.timestamp)


def wait_until(what: str, predicate, seconds: float, log: Path):
    """Poll ``predicate`` every second until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(1)
    pytest.fail(f"{what} within {seconds} s; daemon log: {log}\n" + log.read_text()[-3000:])


def test_a_daemon_runs_what_the_sensor_requests_and_nothing_more(tmp_path):
    """Processed inputs, then a user edits a vault hypothesis and adds a run-dir hypothesis; with
    the sensor started and a real daemon, one tick requests structure for the vault and proximity
    for the run directory (not for the untouched input), both succeed, and the next tick requests
    nothing although the structure run rewrote the vault's hypotheses."""
    home = tmp_path / "home"
    env = {**offline_env(), "DAGSTER_HOME": str(home)}
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    log = tmp_path / "daemon.log"
    with DagsterInstance.from_config(str(home)) as instance:  # the storage created before two processes open it
        instance.get_runs()
    # Started first, so its start-up overlaps the runs below; the sensor is off until `dagster sensor start`.
    daemon = services.start([VENV_BIN / "dagster-daemon", "run", "-w", "workspace.yaml"], log, env, cwd=REPO)
    try:
        run, vault = copy_tree(EXAMPLE_RUN, tmp_path / "run"), copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
        idle = build_run_dir(tmp_path / "idle")
        with DagsterInstance.from_config(str(home)) as instance:  # as `hypograph proximity/structure` do
            for root, job in ((run, "proximity"), (idle, "proximity"), (vault, "structure")):
                assert execute(root, job, instance=instance).success
        node = next((vault / "hypotheses").glob("H-3 - *.md"))
        node.write_text(node.read_text(encoding="utf-8").replace("earthquake", "seismic"), encoding="utf-8")
        write_json_hypothesis(run, "H-31", title="Pirates cut the grain routes",
                              statement="Piracy on the grain routes starved the coastal palaces.")
        started = subprocess.run([str(VENV_BIN / "dagster"), "sensor", "start", "hypotheses_changed",
                                  "-w", "workspace.yaml"], cwd=REPO, env=env, capture_output=True, text=True,
                                 timeout=120)
        assert started.returncode == 0, started.stderr
        with DagsterInstance.from_config(str(home)) as instance:
            first = wait_until("no sensor tick requested runs",
                               lambda: [t for t in sensor_ticks(instance) if t.status == TickStatus.SUCCESS], 180, log)
            runs = [instance.get_run_by_id(i) for i in first[0].run_ids]
            assert sorted((r.job_name, r.tags["dagster/partition"]) for r in runs) == sorted(
                [("structure", str(vault)), ("proximity", str(run))])
            wait_until("the requested runs did not finish",
                       lambda: all(instance.get_run_by_id(r.run_id).is_finished for r in runs), 300, log)
            assert {instance.get_run_by_id(r.run_id).status for r in runs} == {DagsterRunStatus.SUCCESS}
            finished = max(instance.get_run_record_by_id(r.run_id).end_time for r in runs)
            later = wait_until("no sensor tick after the runs finished", lambda: [  # ticks that have ended
                t for t in sensor_ticks(instance)
                if t.timestamp > finished and t.status != TickStatus.STARTED], 120, log)
            assert [t.status for t in later] == [TickStatus.SKIPPED] * len(later), [t.run_keys for t in later]
            assert len(instance.get_runs()) == 3 + 2  # the three processed inputs, then the two requested
    finally:
        services.stop(daemon)
    assert "H-31" in (run / "proximity" / "embedding-ids.json").read_text()
    assert all(r.tags.get("dagster/sensor_name") == "hypotheses_changed" for r in runs)
