"""Simple refusals answer before the heavy parts load (issue 46): a folder that is not an input, a
library report of a folder with no library. Each is exit code, one line, no run recorded and
nothing heavy imported first, asserted on the process's behaviour, never on its time (the times
are in benchmarks/README.md). Another topic is the round's run's refusal (issue 45: every guard
once per path, in the job): no sentence model loads for it."""

from __future__ import annotations

import pytest
from cli_helper import modules_after
from conftest import EXAMPLE_LIBRARY, copy_tree, offline_env, snapshot
from llm_stub import answer, llm_server  # noqa: F401

HEAVY = {"dagster", "torch", "sentence_transformers", "transformers", "openai"}


def command(*argv, env: dict) -> tuple[int, str, set[str]]:
    """``hypograph ARGV`` in a process of its own: (exit code, stderr, the packages it imported)."""
    codes, loaded, stderr = modules_after("hypograph", [argv], env=env)
    return codes[0], stderr, loaded


def test_another_topic_is_refused_by_the_model_in_the_rounds_run_before_a_sentence_model_loads(tmp_path, llm_server):  # noqa: F811
    """The topic guard is the round's run's, once (issue 45: every guard once per path, in the job):
    the refusal loads Dagster and records its run, never the sentence model (torch)."""
    lib = copy_tree(EXAMPLE_LIBRARY, tmp_path / "library")
    llm_server.always(answer({"same": False, "reason": "another field"}))
    env = {k: v for k, v in offline_env().items() if k != "HYPOGRAPH_LLM"}
    env.update(
        DAGSTER_HOME=str(tmp_path / "home"),
        HYPOGRAPH_LLM_MODEL="stub-model",
        HYPOGRAPH_LLM_BASE_URL=llm_server.url,
        HYPOGRAPH_LLM_API_KEY="sk-test",
        HYPOGRAPH_LLM_MAX_RETRIES="0",
    )
    before = snapshot(lib, exclude=(".hypograph",))
    for _ in (1, 2):  # the model asked once; the second refusal from its cached answer
        code, err, loaded = command("library", lib, "--topic", "something else", env=env)
        assert code == 2, err
        assert err.count("\n") == 1 and "not 'something else' (judged by model stub-model: another field)" in err
        assert "round_candidates: " in err and "library_round run " in err  # the run's own refusal
        assert "--new-library" in err and "--confirm-topic" in err
        assert not loaded & (HEAVY - {"openai", "dagster"}), loaded & HEAVY  # no sentence model
    assert len(llm_server.requests) == 1
    assert snapshot(lib, exclude=(".hypograph",)) == before


@pytest.mark.parametrize("argv", [["add"], ["proximity"], ["report"], ["ui"]], ids=lambda a: a[0])
def test_a_folder_that_is_not_an_input_is_refused_before_dagster_loads(tmp_path, argv):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "readme.txt").write_text("not an input\n")
    env = {**offline_env(), "DAGSTER_HOME": str(tmp_path / "home")}
    code, err, loaded = command(*argv, folder, env=env)
    assert code == 1
    assert err == (
        f"hypograph {argv[0]}: {folder}: not an input (no hypotheses/, hypothesis_library.json or manifest.json)\n"
    )
    assert not loaded & HEAVY, loaded & HEAVY
    assert not (tmp_path / "home").exists()  # no instance opened, no run, no registry written
    assert not (folder / ".hypograph").exists()


def test_a_library_report_of_a_folder_with_no_library_is_refused_before_dagster_loads(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    env = {**offline_env(), "DAGSTER_HOME": str(tmp_path / "home")}
    code, err, loaded = command("library", folder, "--report", env=env)
    assert code == 1 and err == f"hypograph library: {folder / 'hypothesis_library.json'}: no library here yet\n"
    assert "dagster" not in loaded
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("example", ["library", "run", "vault", "case"])
def test_registering_a_small_input_opens_the_instance_without_loading_the_code_location(tmp_path, example):
    """`hypograph add` writes the registry and the partition keys into the instance's storage (a
    new process reads them there) with Dagster's storage alone: no definitions, no IO manager, no
    numpy (they cost about a second of CPU in every `add`; benchmarks/README.md has the figures)."""
    from conftest import REPO

    from hypograph.inputs import input_kind

    folder = copy_tree(REPO / "examples" / example, tmp_path / example)
    env = {**offline_env(), "DAGSTER_HOME": str(tmp_path / "home")}
    code, err, loaded = command("add", folder, env=env)
    assert code == 0, err
    assert "dagster" in loaded and not loaded & {"numpy", "scipy", "io_managers", "sklearn"}, loaded
    import dagster as dg

    from pipelines.instance import registry

    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        (record,) = registry(instance).records()
        assert record.path == folder.resolve() and record.kind == input_kind(folder)
        keys = {name: instance.get_dynamic_partitions(name) for name in ("hypothesis_inputs", "case_revisions")}
        assert keys == (
            {"hypothesis_inputs": [], "case_revisions": [f"{record.id}/r0001"]}
            if example == "case"
            else {"hypothesis_inputs": [record.id], "case_revisions": []}
        )
