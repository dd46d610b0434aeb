"""One deployment, many inputs: registration, isolation between inputs, a backfill across every
input run by a real ``dagster-daemon``, and a snapshot of the code location's definitions."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
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


def four_inputs(base: Path) -> list[Path]:
    """The example run directory and vault and the two real vaults, copied under ``base``."""
    return [copy_tree(EXAMPLE_RUN, base / "run"), copy_tree(EXAMPLE_VAULT, base / "vault"),
            *(copy_tree(SHARED_VAULTS / name, base / name) for name in ("covid1", "eggs1"))]


def hypograph(*args, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "hypograph"), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def test_a_run_for_one_input_never_touches_another(tmp_path):
    a, b = copy_tree(EXAMPLE_VAULT, tmp_path / "a"), copy_tree(EXAMPLE_VAULT, tmp_path / "b")
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("inputs", [str(b.resolve())])
    before = snapshot(b)
    assert execute(a, "structure", instance=instance).success
    assert snapshot(b) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
    assert (a / "hypothesis-clusters").is_dir() and not (b / "hypothesis-clusters").exists()


def test_an_unknown_or_relative_partition_is_refused(tmp_path):
    instance = DagsterInstance.ephemeral()
    missing = str(tmp_path / "gone")
    instance.add_dynamic_partitions("inputs", [missing, "relative/path"])
    for key in (missing, "relative/path"):
        result = defs.resolve_job_def("proximity").execute_in_process(
            instance=instance, partition_key=key, raise_on_error=False)
        assert not result.success
    assert not (tmp_path / "gone").exists()


def test_hypograph_add_registers_inputs_in_the_shared_instance(tmp_path):
    env = {**offline_env(), "DAGSTER_HOME": str(tmp_path / "home")}
    inputs = four_inputs(tmp_path / "inputs")
    result = hypograph("add", *inputs, env=env)
    assert result.returncode == 0, result.stderr
    with DagsterInstance.from_config(str(tmp_path / "home")) as instance:
        assert sorted(instance.get_dynamic_partitions("inputs")) == sorted(str(p.resolve()) for p in inputs)


def test_backfill_of_proximity_across_every_input_runs_with_the_daemon(tmp_path):
    """``dagster job backfill`` queues one run per registered input; a real daemon starts them."""
    home = tmp_path / "home"
    env = {**offline_env(), "DAGSTER_HOME": str(home)}
    inputs = four_inputs(tmp_path / "inputs")
    assert hypograph("add", *inputs, env=env).returncode == 0
    daemon = subprocess.Popen([str(VENV_BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"], cwd=REPO, env=env,
                              stdout=open(tmp_path / "daemon.log", "w"), stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        backfill = subprocess.run([str(VENV_BIN / "dagster"), "job", "backfill", "-j", "proximity", "--all", "all",
                                   "-w", "workspace.yaml", "--noprompt"], cwd=REPO, env=env, capture_output=True,
                                  text=True, timeout=120)
        assert backfill.returncode == 0, backfill.stderr
        runs = wait_for_runs(home, len(inputs), seconds=300)
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=60)
    assert sorted(r.tags["dagster/partition"] for r in runs) == sorted(str(p.resolve()) for p in inputs)
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
    # asset: (group, upstream assets)
    "hypothesis_texts": ("proximity", set()),
    "hypothesis_embeddings": ("proximity", {"hypothesis_texts"}),
    "similarity_graph": ("proximity", {"hypothesis_embeddings"}),
    "proximity_clusters": ("proximity", {"similarity_graph", "hypothesis_texts", "hypothesis_embeddings"}),
    "duplicate_pairs": ("proximity", {"similarity_graph", "hypothesis_embeddings", "hypothesis_texts"}),
    "dedup_verdicts": ("proximity", {"duplicate_pairs", "hypothesis_texts", "hypothesis_embeddings"}),
    "cluster_labels": ("proximity", {"proximity_clusters", "hypothesis_texts"}),
    "hypothesis_dispositions": ("structure", {"dedup_verdicts", "hypothesis_embeddings"}),
    "hypothesis_clusters": ("structure", {"hypothesis_dispositions"}),
    "structure_map": ("structure", {"hypothesis_clusters"}),
    "structured_proximity": ("structure", {"structure_map"}),
    "round_candidates": ("library", set()),
    "round_dedup": ("library", {"round_candidates"}),
    "round_scores": ("library", {"round_dedup"}),
    "round_persisted": ("library", {"round_dedup", "round_scores"}),
    "hypothesis_library": ("library", {"round_persisted"}),
    "case_interpretation": ("casework", set()),
    "case_context": ("casework", {"case_interpretation"}),
    "hypothesis_batch": ("casework", {"case_context"}),
    "batch_vault_nodes": ("casework", {"hypothesis_batch"}),
}
CASE_ASSETS = {"case_interpretation", "case_context", "hypothesis_batch", "batch_vault_nodes"}
ROUND_ASSETS = {"round_candidates", "round_dedup", "round_scores", "round_persisted"}
EXPECTED_CHECKS = {
    ("similarity_graph", "graph_covers_embedded_ids"), ("similarity_graph", "graph_is_symmetric"),
    ("proximity_clusters", "clusters_partition_nodes"), ("duplicate_pairs", "duplicate_pairs_are_valid"),
    ("dedup_verdicts", "every_pair_has_one_verdict"),
    ("hypothesis_dispositions", "every_hypothesis_has_one_state"),
    ("hypothesis_dispositions", "survivors_keep_their_provenance"),
    ("hypothesis_dispositions", "no_numbers_in_step4_fields"),
    ("hypothesis_clusters", "clusters_are_well_formed"), ("hypothesis_clusters", "each_cluster_has_one_residual"),
    ("hypothesis_clusters", "every_active_hypothesis_in_one_cluster"),
    ("hypothesis_clusters", "no_numbers_in_step4_fields"),
    ("hypothesis_library", "file_validates"), ("hypothesis_library", "scored"),
    ("hypothesis_library", "ids_unique_never_reused"), ("hypothesis_library", "statements_distinct"),
    *(("hypothesis_batch", name) for name in ("registry_consistent", "budget_equal", "references_resolve",
                                              "h1_grounded", "no_duplicates", "checked_together")),
}


def test_definitions_snapshot():
    graph = defs.resolve_asset_graph()
    assets = {}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        name = key.to_user_string()
        assets[name] = (node.group_name, {p.to_user_string() for p in node.parent_keys})
        multi = name in ROUND_ASSETS | CASE_ASSETS
        parts = node.partitions_def
        dims = [d.partitions_def.name for d in parts.partitions_defs] if multi else [parts.name]
        assert dims == (["inputs", "library_rounds"] if name in ROUND_ASSETS else
                        ["inputs", "case_revisions"] if name in CASE_ASSETS else ["inputs"]), name
    assert assets == EXPECTED_ASSETS
    checks = {(k.asset_key.to_user_string(), k.name): graph.get_check_spec(k).blocking
              for k in graph.asset_check_keys}
    assert EXPECTED_CHECKS <= set(checks) and all(checks[c] for c in EXPECTED_CHECKS)
    jobs = {j.name for j in defs.resolve_all_job_defs() if not j.name.startswith("__")}
    assert jobs == {"proximity", "structure", "library_round", "library_rescore", "library", "case_batch",
                    "case_batch_into_vault"}
    assert {s.name for s in defs.schedules} == {"nightly_proximity", "next_library_round"}
    assert {s.name for s in defs.sensors} == {"inputs_discovered", "hypotheses_changed", "case_retries_due"}
