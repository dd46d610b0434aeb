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
