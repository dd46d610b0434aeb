"""The asset graph tells the truth about the inputs: each job offers only partitions it can process,
every partition of every job runs, evaluating a sensor or schedule changes nothing, and input ids
are short, safe for any folder name and kept when a folder moves."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import pytest
from conftest import REPO, copy_tree
from dagster import DagsterInstance, SensorResult, build_schedule_context, build_sensor_context
from library_stub import LibraryModel, behavior
from llm_stub import answer, llm_env, llm_server  # noqa: F401  (fixtures)

from hypograph.inputs import Registry, safe_id, stored_id
from pipelines.definitions import defs
from pipelines.instance import execute, register, run_config
from resources import Inputs

NEW_BEHAVIOR = "Reward models score an answer higher when it repeats the opinion the user stated first."
EXAMPLES = ("run", "vault", "library", "case")


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A Dagster home (instance and input registry) of this test's own."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def partitions(instance) -> dict[str, list[str]]:
    return {
        name: sorted(instance.get_dynamic_partitions(name))
        for name in ("hypothesis_inputs", "vaults", "library_rounds", "case_revisions")
    }


def test_every_partition_of_every_job_runs_and_no_tick_adds_one(tmp_path, home, llm_server, llm_env):
    """The four example inputs registered and one library round made with a scripted model: each
    job's partitions are exactly the inputs it can process, and every one of them runs to success
    (offline: the round is served from its own state); then no sensor or schedule evaluation
    changes the instance."""
    workspace = tmp_path / "workspace"
    roots = {name: copy_tree(REPO / "examples" / name, workspace / name) for name in EXAMPLES}
    with DagsterInstance.from_config(str(home)) as instance:
        ids = {name: register(instance, root).id for name, root in roots.items()}
    assert ids == {name: name for name in EXAMPLES}

    llm_env(llm_server, timeout=5.0)
    model = LibraryModel(rounds=[{"behaviors": [behavior(NEW_BEHAVIOR, tag="rw")]}])
    llm_server.always(model)
    settings = {"topic": "LLM sycophancy", "n_behaviors": 1, "web": False}
    assert execute(roots["library"], "library_round", {"library": settings}, offline=False, sub="r0001").success
    assert NEW_BEHAVIOR in (roots["library"] / "hypothesis_library.json").read_text(encoding="utf-8")
    calls = len(llm_server.requests)

    with DagsterInstance.from_config(str(home)) as instance:
        assert partitions(instance) == {
            "hypothesis_inputs": ["library", "run", "vault"],
            "vaults": ["vault"],
            "library_rounds": ["library/r0001"],
            "case_revisions": ["case/r0001"],
        }
        order = [
            "proximity",
            "structure",
            "library_round",
            "library_rescore",
            "case_interpret",
            "case_confirmed",
            "case_batch",
            "case_batch_into_vault",
        ]
        jobs = {j.name: j for j in defs.resolve_all_job_defs() if not j.name.startswith("__")}
        assert sorted(order) == sorted(jobs)
        config = run_config({"library": {"web": False}}, offline=True)
        ran = []
        for name in order:
            job = jobs[name]
            for key in instance.get_dynamic_partitions(job.partitions_def.name):
                result = job.execute_in_process(
                    instance=instance, partition_key=key, run_config=config, raise_on_error=False
                )
                assert result.success, (name, key, [e.message for e in result.all_events if e.is_failure])
                ran.append((name, key))
        assert len(ran) == 3 + 1 + 1 + 1 + 4 * 1
        assert len(llm_server.requests) == calls  # every re-run came from the inputs' own state

        before = partitions(instance)
        inputs = Inputs(workspace=str(workspace))
        for sensor in defs.sensors:
            result = sensor(build_sensor_context(instance=instance), inputs=inputs)
            if isinstance(result, SensorResult):
                added = [k for r in result.dynamic_partitions_requests for k in r.partition_keys]
                assert all(k.startswith("library/") for k in added), (sensor.name, added)  # the next round only
            assert partitions(instance) == before, sensor.name
        for schedule in defs.schedules:
            context = build_schedule_context(instance=instance, scheduled_execution_time=dt.datetime.now())
            requests = list(schedule(context))
            assert sorted(r.partition_key for r in requests) == before["hypothesis_inputs"]
            assert partitions(instance) == before, schedule.name


@pytest.mark.parametrize("name", ["lib|one", "at@home", "with spaces", "new\nline"])
def test_any_folder_name_works_as_a_library_and_as_a_case(tmp_path, home, name):
    library = copy_tree(REPO / "examples" / "library", tmp_path / "libraries" / name)
    case = copy_tree(REPO / "examples" / "case", tmp_path / "cases" / name)
    with DagsterInstance.from_config(str(home)) as instance:
        lib_id, case_id = register(instance, library).id, register(instance, case).id
    assert lib_id == safe_id(name) and case_id.startswith(safe_id(name) + "-")  # a suffix: the name is taken
    assert all(c.isalnum() or c in "._-" for c in lib_id + case_id)
    assert execute(library, "proximity", offline=True).success
    assert execute(case, "case_batch_into_vault", offline=True, sub="r0001").success  # no vault named: skipped
    assert (library / "proximity" / "clusters.json").is_file()


def test_a_moved_folder_keeps_its_id_and_its_runs_and_a_copy_gets_its_own(tmp_path, home):
    root = copy_tree(REPO / "examples" / "run", tmp_path / "old" / "run")
    assert execute(root, "proximity", offline=True).success
    moved = tmp_path / "new" / "run"
    moved.parent.mkdir()
    shutil.move(root, moved)
    copy = copy_tree(moved, tmp_path / "copy" / "run")  # carries the id file along
    with DagsterInstance.from_config(str(home)) as instance:
        assert register(instance, moved).id == "run"
        assert register(instance, copy).id.startswith("run-")
        assert [r.job_name for r in instance.get_runs()] == ["proximity"]  # its history, under its id
    registry = Registry(home / "inputs.json")
    assert registry.resolve("run") == moved.resolve()
    assert stored_id(moved) == "run" and stored_id(copy) != "run"
    assert json.loads((home / "inputs.json").read_text())["run"]["kind"] == "run-dir"


def test_an_unregistered_folder_or_a_broken_registry_is_one_line(tmp_path, home):
    from hypograph.errors import HypographError

    registry = Registry(home / "inputs.json")
    with pytest.raises(HypographError, match="is not registered"):
        registry.resolve("nowhere")
    (home / "inputs.json").write_text("{ not json")
    with pytest.raises(HypographError, match="inputs.json: not valid JSON"):
        registry.records()
    with pytest.raises(HypographError, match="not an input"):
        Registry(tmp_path / "other.json").add(tmp_path)


def test_the_data_version_is_the_content_not_the_mtime(tmp_path):
    from hypograph.inputs import fingerprint

    root = copy_tree(REPO / "examples" / "run", tmp_path / "run")
    before = fingerprint(root, "run-dir")
    for p in (root / "hypotheses").iterdir():
        p.write_bytes(p.read_bytes())  # touched, same bytes
    assert fingerprint(root, "run-dir") == before
    first = sorted((root / "hypotheses").iterdir())[0]
    first.write_text(first.read_text(encoding="utf-8").replace("a", "an", 1), encoding="utf-8")
    assert fingerprint(root, "run-dir") != before
    (root / "hypotheses" / "H-0099.json").symlink_to("/dev/zero")  # never followed or read
    fingerprint(root, "run-dir")


def test_a_command_that_asked_a_model_says_how_it_did(tmp_path, home, llm_server, llm_env, capsys):
    """One line per task on stderr: calls, cached, the structured-output mode; a re-run is cached."""
    from pipelines.cli import main

    root = copy_tree(REPO / "examples" / "run", tmp_path / "run")
    llm_env(llm_server, timeout=5.0)
    llm_server.always(answer({"nothing": []}))  # no usable answer: each item falls back to the offline policy
    assert main(["proximity", str(root)]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("model: ")]
    assert {line.split(":")[1].split("(")[0].strip() for line in lines} == {"dedup_verdicts", "cluster_labels"}, lines
    assert all("stub-model@" in line and " calls" in line and "structured output" in line for line in lines)
    calls = len(llm_server.requests)
    assert main(["proximity", str(root)]) == 0
    assert calls > 0 and len(llm_server.requests) == calls  # the rejections the fallback used are remembered
