"""One deployment, many inputs: registration, isolation between inputs, a backfill across every
input run by a real ``dagster-daemon``, and a snapshot of the code location's definitions."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_helper import in_process
from conftest import (
    EXAMPLE_RUN,
    EXAMPLE_VAULT,
    REPO,
    SHARED_VAULTS,
    VENV_BIN,
    copy_tree,
    execute,
    offline_env,
    snapshot,
)
from dagster import DagsterInstance, DagsterRunStatus

from pipelines.definitions import defs
from pipelines.instance import register
from pipelines.launch import failures


def four_inputs(base: Path) -> list[Path]:
    """The example run directory and vault and the two real vaults, copied under ``base``."""
    return [
        copy_tree(EXAMPLE_RUN, base / "run"),
        copy_tree(EXAMPLE_VAULT, base / "vault"),
        *(copy_tree(SHARED_VAULTS / name, base / name) for name in ("covid1", "eggs1")),
    ]


def test_a_run_for_one_input_never_touches_another(tmp_path):
    a, b = copy_tree(EXAMPLE_VAULT, tmp_path / "a"), copy_tree(EXAMPLE_VAULT, tmp_path / "b")
    instance = DagsterInstance.ephemeral()
    register(instance, b)
    before = snapshot(b)
    assert execute(a, "structure", instance=instance).success
    assert snapshot(b) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
    assert (a / "hypothesis-clusters").is_dir() and not (b / "hypothesis-clusters").exists()


def test_an_unknown_input_or_a_vanished_folder_is_refused_in_one_line(tmp_path):
    import shutil

    instance = DagsterInstance.ephemeral()
    gone = register(instance, copy_tree(EXAMPLE_RUN, tmp_path / "gone")).id
    shutil.rmtree(tmp_path / "gone")
    instance.add_dynamic_partitions("hypothesis_inputs", ["never-added"])
    for key, why in ((gone, "is gone (moved?"), ("never-added", "is not registered")):
        result = defs.resolve_job_def("proximity").execute_in_process(
            instance=instance, partition_key=key, raise_on_error=False
        )
        assert not result.success
        assert any(why in line for line in failures(result)), failures(result)
    assert not (tmp_path / "gone").exists()


def test_hypograph_add_registers_inputs_in_the_shared_instance(tmp_path):
    env = {**offline_env(), "DAGSTER_HOME": str(tmp_path / "home")}
    inputs = four_inputs(tmp_path / "inputs")
    result = in_process("add", *inputs, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{p.name}: {'run-dir' if p.name == 'run' else 'vault'} {p.resolve()}" for p in inputs
    ]
    with DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        assert sorted(instance.get_dynamic_partitions("hypothesis_inputs")) == sorted(p.name for p in inputs)
        assert sorted(instance.get_dynamic_partitions("vaults")) == ["covid1", "eggs1", "vault"]
    again = in_process("add", *inputs, env=env)
    assert again.stdout == result.stdout  # idempotent


def test_backfill_of_proximity_across_every_input_runs_with_the_daemon(tmp_path):
    """``dagster job backfill`` queues one run per registered input; a real daemon starts them."""
    home = tmp_path / "home"
    env = {**offline_env(), "DAGSTER_HOME": str(home)}
    inputs = four_inputs(tmp_path / "inputs")
    assert in_process("add", *inputs, env=env).returncode == 0
    with open(tmp_path / "daemon.log", "w") as log:  # the daemon writes to its own copy of the descriptor
        daemon = subprocess.Popen(
            [str(VENV_BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        backfill = subprocess.run(
            [
                str(VENV_BIN / "dagster"),
                "job",
                "backfill",
                "-j",
                "proximity",
                "--all",
                "all",
                "-w",
                "workspace.yaml",
                "--noprompt",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert backfill.returncode == 0, backfill.stderr
        runs = wait_for_runs(home, len(inputs), seconds=300)
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=60)
    assert sorted(r.tags["dagster/partition"] for r in runs) == sorted(p.name for p in inputs)
    assert {r.status for r in runs} == {DagsterRunStatus.SUCCESS}
    assert len({r.tags["dagster/backfill"] for r in runs}) == 1
    for root in inputs:
        assert (root / "proximity" / "graph.json").is_file() and (root / "proximity" / "verdicts.json").is_file()


def wait_for_runs(home: Path, count: int, seconds: float) -> list:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with DagsterInstance.from_config(str(home)) as instance:
            runs = instance.get_runs()
        if len(runs) == count and all(r.is_finished for r in runs):
            return runs
        time.sleep(2)
    pytest.fail(f"the daemon did not finish {count} runs in {seconds} s: {[(r.status, r.tags) for r in runs]}")


# -- the code location, pinned ---------------------------------------------------------------

EXPECTED_ASSETS = {
    # asset: (group, upstream assets, partition set)
    "hypotheses": ("proximity", set(), "hypothesis_inputs"),
    "hypothesis_texts": ("proximity", {"hypotheses"}, "hypothesis_inputs"),
    "hypothesis_embeddings": ("proximity", {"hypothesis_texts"}, "hypothesis_inputs"),
    "similarity_graph": ("proximity", {"hypothesis_embeddings"}, "hypothesis_inputs"),
    "proximity_clusters": (
        "proximity",
        {"similarity_graph", "hypothesis_texts", "hypothesis_embeddings"},
        "hypothesis_inputs",
    ),
    "duplicate_pairs": (
        "proximity",
        {"similarity_graph", "hypothesis_embeddings", "hypothesis_texts"},
        "hypothesis_inputs",
    ),
    "dedup_verdicts": (
        "proximity",
        {"duplicate_pairs", "hypothesis_texts", "hypothesis_embeddings"},
        "hypothesis_inputs",
    ),
    "cluster_labels": ("proximity", {"proximity_clusters", "hypothesis_texts"}, "hypothesis_inputs"),
    "proximity_report": ("proximity", {"cluster_labels", "duplicate_pairs"}, "hypothesis_inputs"),
    "hypothesis_dispositions": ("structure", {"dedup_verdicts", "hypothesis_embeddings"}, "vaults"),
    "hypothesis_clusters": ("structure", {"hypothesis_dispositions"}, "vaults"),
    "structure_map": ("structure", {"hypothesis_clusters"}, "vaults"),
    "library_file": ("library", set(), "libraries"),  # the file as it is, observed with its checks
    "round_candidates": ("library", set(), "library_rounds"),
    "round_dedup": ("library", {"round_candidates"}, "library_rounds"),
    "round_scores": ("library", {"round_candidates", "round_dedup"}, "library_rounds"),
    "hypothesis_library": ("library", {"round_dedup", "round_scores"}, "library_rounds"),
    "case_package": ("case", set(), "case_revisions"),
    "interpretation_draft": ("case", {"case_package"}, "case_revisions"),
    "case_interpretation": ("case", {"case_package", "interpretation_draft"}, "case_revisions"),
    "case_context": ("case", {"case_interpretation"}, "case_revisions"),
    "hypothesis_batch": ("case", {"case_context"}, "case_revisions"),
    "batch_vault_nodes": ("case", {"hypothesis_batch"}, "case_revisions"),
}
EXPECTED_CHECKS = {
    ("similarity_graph", "graph_covers_embedded_ids"),
    ("similarity_graph", "graph_is_symmetric"),
    ("proximity_clusters", "clusters_partition_nodes"),
    ("duplicate_pairs", "duplicate_pairs_are_valid"),
    ("dedup_verdicts", "every_pair_has_one_verdict"),
    ("hypothesis_dispositions", "every_hypothesis_has_one_state"),
    ("hypothesis_dispositions", "survivors_keep_their_provenance"),
    ("hypothesis_dispositions", "no_numbers_in_step4_fields"),
    ("hypothesis_clusters", "clusters_are_well_formed"),
    ("hypothesis_clusters", "each_cluster_has_one_residual"),
    ("hypothesis_clusters", "every_active_hypothesis_in_one_cluster"),
    ("hypothesis_clusters", "no_numbers_in_step4_fields"),
    ("hypothesis_library", "file_validates"),
    ("hypothesis_library", "scored"),
    ("hypothesis_library", "ids_unique_never_reused"),
    ("hypothesis_library", "statements_distinct"),
    *(
        ("hypothesis_batch", name)
        for name in (
            "registry_consistent",
            "budget_equal",
            "references_resolve",
            "h1_grounded",
            "no_duplicates",
            "checked_together",
        )
    ),
}


def test_definitions_snapshot():
    """Keys, groups, deps and partition sets of every asset; checks blocking and on their asset's
    partitions; every job on one partition set; a description on everything a user clicks."""
    graph = defs.resolve_asset_graph()
    assert_assets_as_expected(graph)
    assert_checks_blocking_on_their_partitions(graph)
    assert_jobs_and_automation_as_expected()


def assert_assets_as_expected(graph) -> None:
    """Every asset's group, parents and partition set as listed, each with a description."""
    assets = {}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assets[key.to_user_string()] = (
            node.group_name,
            {p.to_user_string() for p in node.parent_keys},
            node.partitions_def.name,
        )
        assert node.description, key
    assert assets == EXPECTED_ASSETS


def assert_checks_blocking_on_their_partitions(graph) -> None:
    """The expected checks exist and block; every check is on its asset's partitions, described."""
    checks = {(k.asset_key.to_user_string(), k.name): graph.get_check_spec(k) for k in graph.asset_check_keys}
    assert set(checks) >= EXPECTED_CHECKS and all(checks[c].blocking for c in EXPECTED_CHECKS)
    for (asset, _), spec in checks.items():
        assert spec.partitions_def.name == EXPECTED_ASSETS[asset][2] and spec.description, spec


def assert_jobs_and_automation_as_expected() -> None:
    """The jobs, each described and on one partition set; the schedules and sensors, described."""
    jobs = {j.name: j for j in defs.resolve_all_job_defs() if not j.name.startswith("__")}
    assert set(jobs) == {
        "proximity",
        "report",
        "structure",
        "library_round",
        "library_rescore",
        "library_observe",
        "case_interpret",
        "case_confirmed",
        "case_batch",
        "case_batch_into_vault",
        "register_inputs",  # what inputs_discovered requests: one run registers the folders it found
    }
    assert all(j.description for j in jobs.values())
    assert all(j.partitions_def is not None for name, j in jobs.items() if name != "register_inputs")
    assert {s.name for s in defs.schedules} == {"nightly_proximity"}
    assert {s.name for s in defs.sensors} == {
        "inputs_discovered",
        "hypotheses_changed",
        "next_library_round",
        "case_retries_due",
        "pictures_after_proximity",  # the report job after proximity (an automation condition sensor)
        "partition_keys",  # each partition set holds what its jobs can run (issue 43)
        "shard_files_removed",  # a finished run's shard files removed (issue 44)
    }
    assert all(s.description for s in [*defs.schedules, *defs.sensors])
