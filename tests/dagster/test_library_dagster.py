"""Library rounds as Dagster partitions: ``hypograph library`` runs each round as its ``<id>/rNNNN``
partition on the shared instance, and a re-score backfill over every round regenerates nothing."""

from __future__ import annotations

import json
import os

import pytest
from cli_helper import in_process
from conftest import offline_env
from dagster import DagsterInstance, DagsterRunStatus
from library_stub import AtomServer, LibraryModel, behavior
from llm_stub import llm_env, llm_server  # noqa: F401  (fixtures)
from test_library_rounds import S1, S2, S3, S4, TOPIC, three_round_model

from assets.library.checks import RULES
from assets.partitions import ROUNDS
from hypograph.inputs import stored_id
from hypograph.library.schema import read_library
from hypograph.library.settings import LibrarySettings
from pipelines.definitions import defs
from pipelines.instance import register
from pipelines.launch import run_config


@pytest.fixture
def cli_env(llm_server, llm_env):
    env_vars = llm_env(llm_server, timeout=5.0)
    env = {**offline_env(), **env_vars, "NO_PROXY": "127.0.0.1"}
    env.pop("HYPOGRAPH_LLM")
    return env


def test_hypograph_library_runs_each_round_as_a_partition(tmp_path, llm_server, cli_env):
    model = three_round_model()
    llm_server.always(model)
    root = tmp_path / "lib"
    root.mkdir()
    out = in_process("library", root, "--topic", TOPIC, "--rounds", "5", "--n-behaviors", "3", "--no-web", env=cli_env)
    assert out.returncode == 0, out.stderr
    assert "stopped early: r0003" in out.stdout
    assert [b.statement for b in read_library(root)[0].behaviors] == [S1, S2, S3, S4]
    keys = [f"{stored_id(root)}/{k}" for k in ("r0001", "r0002", "r0003")]
    with DagsterInstance.from_config(os.environ["DAGSTER_HOME"]) as instance:
        runs = instance.get_runs()
        assert set(keys) <= set(instance.get_dynamic_partitions(ROUNDS))
    ours = [
        r
        for r in runs
        if r.job_name == "library_round" and r.tags["dagster/partition"].startswith(f"{stored_id(root)}/")
    ]
    assert sorted(r.tags["dagster/partition"] for r in ours) == keys  # the session's instance holds other tests' runs
    assert all(r.status == DagsterRunStatus.SUCCESS for r in ours)
    # A second invocation of round 1..3 is served from the rounds' state: no model call.
    calls = len(llm_server.requests)
    again = in_process("library", root, "--report", env=cli_env)
    assert again.returncode == 0 and "behaviors added" in again.stdout and len(llm_server.requests) == calls


def test_a_rescore_backfill_over_every_round_regenerates_nothing_and_keeps_ids(tmp_path, llm_server, llm_env):
    llm_env(llm_server, timeout=5.0)
    model = LibraryModel(rounds=[{"behaviors": [behavior(S1, tag="a")]}, {"behaviors": [behavior(S2, tag="b")]}])
    llm_server.always(model)
    root = tmp_path / "lib"
    root.mkdir()
    instance = DagsterInstance.ephemeral()
    library = register(instance, root, "library").id
    instance.add_dynamic_partitions(ROUNDS, [f"{library}/r0001", f"{library}/r0002"])
    settings = {"topic": TOPIC, "n_behaviors": 1, "web": False}
    for key in ("r0001", "r0002"):
        config = run_config({"library": LibrarySettings(**settings)}, offline=False)
        result = defs.resolve_job_def("library_round").execute_in_process(
            instance=instance, partition_key=f"{library}/{key}", run_config=config
        )
        assert result.success
    before = read_library(root)[0]
    assert [b.id for b in before.behaviors] == ["B1", "B2"] and before.behaviors[0].impact.method == "llm-chat"
    generations = len(model.generation_prompts)
    atom = AtomServer()
    try:
        for key in ("r0001", "r0002"):  # the backfill: every round partition of library_rescore
            config = run_config({"library": LibrarySettings(web=True, search_url=atom.url)}, offline=False)
            result = defs.resolve_job_def("library_rescore").execute_in_process(
                instance=instance, partition_key=f"{library}/{key}", run_config=config
            )
            assert result.success
    finally:
        atom.close()
    after = read_library(root)[0]
    assert len(model.generation_prompts) == generations
    assert [b.id for b in after.behaviors] == ["B1", "B2"]
    mechanism_ids = lambda lib: [[m.id for m in b.mechanisms] for b in lib.behaviors]
    assert mechanism_ids(after) == mechanism_ids(before)
    assert {b.impact.method for b in after.behaviors} == {"llm-chat+web"}
    assert json.loads((root / "hypothesis_library.json").read_text())["topic"] == TOPIC


def test_a_library_goes_through_the_proximity_assets_like_any_input(tmp_path):
    """The example library's behaviors and mechanisms are embedded, graphed, clustered and paired."""
    from conftest import REPO, copy_tree, execute

    root = copy_tree(REPO / "examples" / "library", tmp_path / "library")
    library = read_library(root)[0]
    result = execute(root, "proximity")
    assert result.success
    ids = json.loads((root / "proximity" / "embedding-ids.json").read_text())
    assert sorted(ids) == sorted(node_id for node_id, _ in library.texts())
    clusters = json.loads((root / "proximity" / "clusters.json").read_text())["clusters"]
    assert sorted(m for ms in clusters.values() for m in ms) == sorted(ids)
    assert all(e.passed for e in result.get_asset_check_evaluations())


def assert_fails_with_no_library(job, instance) -> None:
    """With no library registered, an Observe run fails in one line saying what to do."""
    empty = job.execute_in_process(instance=instance, raise_on_error=False)
    assert not empty.success
    failure = [e for e in empty.all_events if e.is_step_failure][0].step_failure_data
    assert failure.user_failure_data.description == (
        "no library registered to observe: `hypograph add DIR` one, then Observe again"
    )


def assert_observed_and_checked(instance, result, ids: list[str]) -> None:
    """Each library in ``ids`` was observed, checked by every rule and has a data version record."""
    from dagster import AssetKey

    observed = {e.asset_observation_data.asset_observation.partition for e in result.get_asset_observation_events()}
    assert observed == set(ids)
    checks = {(c.partition, c.check_name, c.passed) for c in result.get_asset_check_evaluations()}
    assert checks == {(i, name, True) for i in ids for name in RULES}
    for partition in ids:  # each library's version, as its own backfill run records it
        record = instance.get_latest_data_version_record(AssetKey("library_file"), True, partition)
        assert record is not None and record.asset_observation.tags["dagster/data_version"]


def test_observe_with_no_partition_observes_every_library(tmp_path, monkeypatch):
    """The UI's Observe launches library_observe with no partition: every registered library is
    observed and checked under its own partition, a library whose folder is gone is skipped in one
    logged line, and with no library registered the run fails in one line saying what to do."""
    import shutil

    from conftest import REPO, copy_tree

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    job = defs.resolve_job_def("library_observe")
    with DagsterInstance.from_config(str(home)) as instance:
        assert_fails_with_no_library(job, instance)
        roots = [copy_tree(REPO / "examples" / "library", tmp_path / name) for name in ("a", "b", "gone")]
        ids = [register(instance, root).id for root in roots]
        shutil.rmtree(roots[2])
        result = job.execute_in_process(instance=instance)
        assert result.success
        assert_observed_and_checked(instance, result, ids[:2])
        warnings = [r.user_message for r in instance.all_logs(result.run_id) if r.level == 30]
        assert any(w.startswith(f"{ids[2]}: {roots[2]}: skipped: the folder is gone") for w in warnings), warnings
