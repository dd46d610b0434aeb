"""The sensors users rely on: ``inputs_discovered`` registers the input folders of a workspace, each
once; ``hypotheses_changed`` observes each input's hypotheses and requests proximity when they are
newer than its texts and, for a vault, step 4 when its hypotheses are not as step 4 left them —
nothing when nothing changed. Evaluated with ``build_sensor_context``, and once
with a real ``dagster-daemon`` that ``dagster sensor start`` turned the sensor on for."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

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
)
from dagster import DagsterInstance, DagsterRunStatus, SensorResult, SkipReason, build_sensor_context
from dagster._core.scheduler.instigation import InstigatorType, TickStatus

from assets.sources import inputs_discovered, register_inputs
from assets.structure.flow import hypotheses_changed
from resources import Inputs


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as instance:
        yield instance


def discover(instance, workspace: Path | None):
    """One tick of ``inputs_discovered`` (with a registry of its own beside the workspace); applies
    its partition requests and executes the registration run it requests, as the daemon would.
    Returns the tick's SkipReason, or the partition keys the tick and its run added."""
    registry = str(workspace.parent / "inputs.json") if workspace else None
    inputs = Inputs(workspace=str(workspace) if workspace else None, registry_file=registry)
    result = inputs_discovered(build_sensor_context(instance=instance), inputs=inputs)
    if isinstance(result, SensorResult):
        before = {name: set(instance.get_dynamic_partitions(name)) for name in ("hypothesis_inputs", "vaults")}
        for request in result.dynamic_partitions_requests:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        for run in result.run_requests:
            assert run.run_key and run.job_name in (None, "register_inputs")
            job = register_inputs.execute_in_process(
                run_config=run.run_config, instance=instance, resources={"inputs": inputs}
            )
            assert job.success
        return [k for name, keys in before.items() for k in set(instance.get_dynamic_partitions(name)) - keys]
    return result


def added(result) -> list[str]:
    assert isinstance(result, list), result
    return result


def test_inputs_discovered_registers_each_new_folder_once(instance, tmp_path):
    ws = tmp_path / "workspace"
    build_run_dir(ws / "run"), build_vault(ws / "vault")
    (ws / "notes").mkdir()  # no hypotheses/: not an input
    (ws / "readme.txt").write_text("not an input")
    assert sorted(added(discover(instance, ws))) == ["run", "vault", "vault"]  # the vault in both sets
    assert sorted(instance.get_dynamic_partitions("hypothesis_inputs")) == ["run", "vault"]
    assert instance.get_dynamic_partitions("vaults") == ["vault"]

    again = discover(instance, ws)
    assert isinstance(again, SkipReason) and "no new input" in again.skip_message

    build_run_dir(ws / "later")
    assert added(discover(instance, ws)) == ["later"]
    assert len(instance.get_dynamic_partitions("hypothesis_inputs")) == 3


def test_inputs_discovered_skips_without_a_workspace(instance):
    result = discover(instance, None)
    assert isinstance(result, SkipReason) and "HYPOGRAPH_WORKSPACE" in result.skip_message
    assert instance.get_dynamic_partitions("hypothesis_inputs") == []


class Ticks:
    """Successive ticks of ``hypotheses_changed``, each committed as the daemon does (its
    observations recorded), and the runs it requests executed when ``run`` is set."""

    def __init__(self, instance):
        self.instance = instance

    def __call__(self, run: bool = False) -> list[tuple[str, str]]:
        """(job name, partition key) of each requested run, sorted; [] for a skip."""
        result = hypotheses_changed(build_sensor_context(instance=self.instance), inputs=Inputs())
        if isinstance(result, SkipReason):
            return []
        for event in result.asset_events:
            self.instance.report_runless_asset_event(event)
        names = {v: k for k, v in getattr(self, "ids", {}).items()}
        requests = sorted((r.job_name, names.get(r.partition_key, r.partition_key)) for r in result.run_requests)
        assert all(r.run_key and r.run_key.startswith(r.partition_key) for r in result.run_requests)
        if run:
            from pipelines.definitions import defs
            from pipelines.launch import run_config

            for job, name in requests:
                key = self.ids.get(name, name)
                assert (
                    defs.resolve_job_def(job)
                    .execute_in_process(instance=self.instance, partition_key=key, run_config=run_config(offline=True))
                    .success
                )
        return requests


@pytest.fixture
def two_inputs(instance, tmp_path):
    """A registered run directory and vault (the bundled examples), and the sensor's tick function."""
    from pipelines.instance import register

    run, vault = copy_tree(EXAMPLE_RUN, tmp_path / "run"), copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
    tick = Ticks(instance)
    tick.ids = {"run": register(instance, run).id, "vault": register(instance, vault).id}
    return run, vault, tick


@pytest.fixture(scope="module")
def first_ticks(tmp_path_factory):
    """The bundled run directory and vault registered on an instance at ``base``/home, the sensor's
    first ticks with their runs executed until a tick requests nothing (what each requested, in
    order), and a copy of the inputs and instance taken then (``base``/kept): made once."""
    from pipelines.instance import register

    base = tmp_path_factory.mktemp("ticked")
    home = base / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    run, vault = copy_tree(EXAMPLE_RUN, base / "run"), copy_tree(EXAMPLE_VAULT, base / "vault")
    with DagsterInstance.from_config(str(home)) as instance:
        tick = Ticks(instance)
        tick.ids = {"run": register(instance, run).id, "vault": register(instance, vault).id}
        requested = [tick(run=True) for _ in range(3)] + [tick()]
    for name in ("run", "vault", "home"):
        shutil.copytree(base / name, base / "kept" / name, symlinks=True)
    return SimpleNamespace(base=base, ids=tick.ids, requested=requested)


@pytest.fixture
def ticked(first_ticks):
    """The run directory, the vault and the tick function as the first ticks left them, put back at
    the same paths (the instance records them) whatever an earlier test did."""
    base = first_ticks.base
    for name in ("run", "vault", "home"):
        shutil.rmtree(base / name)
        shutil.copytree(base / "kept" / name, base / name, symlinks=True)
    with DagsterInstance.from_config(str(base / "home")) as instance:
        tick = Ticks(instance)
        tick.ids = first_ticks.ids
        yield base / "run", base / "vault", tick


def test_an_edit_to_a_vault_runs_proximity_structure_proximity_then_nothing(first_ticks, ticked):
    run, vault, tick = ticked
    assert first_ticks.requested == [
        [("proximity", "run"), ("proximity", "vault")],
        [("structure", "vault")],  # proximity current, the vault never structured
        [("proximity", "vault")],  # step 4 rewrote the nodes: proximity of what it left
        [],
    ]
    node = next((vault / "hypotheses").glob("H-3 - *.md"))
    node.write_text(node.read_text(encoding="utf-8").replace("earthquake", "seismic"), encoding="utf-8")
    assert tick(run=True) == [("proximity", "vault")]
    assert tick(run=True) == [("structure", "vault")]
    steps = [tick(run=True), tick(run=True)]
    assert steps in ([[("proximity", "vault")], []], [[], []])  # a re-proximity only if step 4 rewrote
    assert tick() == []


def test_a_persons_review_requests_the_flow_and_the_launched_jobs_apply_it(ticked):
    """Issue 46: a MERGE recorded in proximity/review.json after the vault was structured is a
    change the sensor sees; the jobs it requests, launched on the instance as the UI launches them
    (the job of the definitions, the vault's partition, the run config the Launchpad shows), apply it."""
    from test_merge_by_hand import review

    run, vault, tick = ticked
    assert tick() == []
    review(vault, "H-1", "H-22")
    assert tick(run=True) == [("proximity", "vault")]
    assert tick(run=True) == [("structure", "vault")]
    merged = [p.name for p in (vault / "hypotheses" / "merged").glob("H-22 - *.md")]
    assert merged, "the person's MERGE was not applied"
    tick(run=True)  # proximity of what step 4 left
    assert tick() == []


def test_a_new_run_dir_hypothesis_requests_proximity_only_for_it(ticked):
    run, vault, tick = ticked
    assert tick() == []
    write_json_hypothesis(
        run,
        "H-11",
        title="Neonicotinoids impair foraging",
        statement="Sublethal neonicotinoid doses impair forager navigation.",
    )
    assert tick() == [("proximity", "run")]


def test_a_touch_that_keeps_the_content_requests_nothing(two_inputs):
    """Data versions are content digests: rewriting a file with the same bytes is no change."""
    run, vault, tick = two_inputs
    tick(run=True)
    for p in (run / "hypotheses").iterdir():
        p.write_bytes(p.read_bytes())
    assert tick() == [("structure", "vault")]  # only what was already due


def test_a_missing_input_folder_is_passed_over(two_inputs, instance, tmp_path):
    import shutil

    from pipelines.instance import register

    run, vault, tick = two_inputs
    gone = register(instance, build_run_dir(tmp_path / "gone")).id
    shutil.rmtree(tmp_path / "gone")
    assert gone not in {key for _, key in tick()}


def test_a_run_in_progress_defers_its_input(two_inputs, instance):
    """While a run of an input is in progress its files are mid-write: looked at after the run."""
    from pipelines.definitions import defs

    run, vault, tick = two_inputs
    active = instance.create_run_for_job(
        defs.resolve_job_def("proximity"),
        status=DagsterRunStatus.STARTED,
        tags={"dagster/partition": tick.ids["vault"]},
    )
    assert tick() == [("proximity", "run")]
    instance.report_run_failed(instance.get_run_by_id(active.run_id))
    assert tick() == [("proximity", "run"), ("proximity", "vault")]


def test_an_input_the_cli_already_processed_requests_nothing(two_inputs, instance):
    """Turning the sensor on after ``hypograph proximity`` / ``structure`` re-runs nothing unchanged."""
    run, vault, tick = two_inputs
    assert execute(run, "proximity", instance=instance).success
    assert execute(vault, "structure", instance=instance).success
    assert tick() == []
    write_json_hypothesis(run, "H-12", title="Cold snaps kill clusters", statement="Sudden cold snaps kill clusters.")
    assert tick() == [("proximity", "run")]


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


def test_a_daemon_runs_what_the_sensor_requests_and_nothing_more(tmp_path, monkeypatch):
    """Processed inputs, then a user edits a vault hypothesis and adds a run-dir hypothesis; with
    the sensor started and a real daemon, the ticks request proximity for both, then step 4 for the
    vault, then proximity of what step 4 left (never anything for the untouched input); every run
    succeeds and the ticks after them request nothing."""
    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # this process registers inputs where the daemon reads them
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
            processed = len(instance.get_runs())
        node = next((vault / "hypotheses").glob("H-3 - *.md"))
        node.write_text(node.read_text(encoding="utf-8").replace("earthquake", "seismic"), encoding="utf-8")
        write_json_hypothesis(
            run,
            "H-31",
            title="Pirates cut the grain routes",
            statement="Piracy on the grain routes starved the coastal palaces.",
        )
        started = subprocess.run(
            [str(VENV_BIN / "dagster"), "sensor", "start", "hypotheses_changed", "-w", "workspace.yaml"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert started.returncode == 0, started.stderr

        def settled(instance):
            runs = instance.get_runs()[: len(instance.get_runs()) - processed]
            if not runs or not all(r.is_finished for r in runs):
                return None
            finished = max(instance.get_run_record_by_id(r.run_id).end_time for r in runs)
            after = [t for t in sensor_ticks(instance) if t.timestamp > finished and t.status != TickStatus.STARTED]
            return (runs, after) if after and all(t.status == TickStatus.SKIPPED for t in after) else None

        with DagsterInstance.from_config(str(home)) as instance:
            runs, _ = wait_until("the sensor's runs did not settle", lambda: settled(instance), 420, log)
            requested = sorted((r.job_name, r.tags["dagster/partition"]) for r in runs)
            assert {r.status for r in runs} == {DagsterRunStatus.SUCCESS}
            assert all(r.tags.get("dagster/sensor_name") == "hypotheses_changed" for r in runs)
    finally:
        services.stop(daemon)
    assert requested in (
        [("proximity", "run"), ("proximity", "vault"), ("proximity", "vault"), ("structure", "vault")],
        [("proximity", "run"), ("proximity", "vault"), ("structure", "vault")],
    ), requested
    assert "H-31" in (run / "proximity" / "embedding-ids.json").read_text()
