"""The Dagster web UI, as `make ui` starts it: a real dagster-webserver and daemon on loopback,
queried over its GraphQL API for what a user would look at (the asset graph with its lineage, the
checks, and the runs the CLI made), and given the Launchpad's own mutations (add a partition, launch
a run) so the rules a command enforces are shown to hold in a run the UI launches."""

from __future__ import annotations

import subprocess
import time

import pytest
import services
from cli_helper import HYPOGRAPH, in_process
from conftest import EXAMPLE_LIBRARY, EXAMPLE_VAULT, copy_tree, offline_env
from services import LAUNCH, REPOSITORY, free_port, graphql

from hypograph.inputs import stored_id

QUERY = """{
  assetNodes { assetKey { path } groupName dependencyKeys { path }
               assetChecksOrError { ... on AssetChecks { checks { name blocking } } } }
  runsOrError { ... on Runs { results { jobName status } } }
}"""


def wait_for_code_location(port: int, process: subprocess.Popen, seconds: float = 90) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"hypograph ui exited with {process.returncode}")
        try:
            data = graphql(port, QUERY)
            if data["assetNodes"]:
                return data
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail("the web UI did not load the code location in time")


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    vault = copy_tree(EXAMPLE_VAULT, tmp_path_factory.mktemp("ui") / "vault")
    env = offline_env()
    done = in_process("structure", vault, "--llm", "offline", env=env)  # the CLI's runs, in this process
    assert done.returncode == 0, done.stderr
    port = free_port()
    # SIGINT at its default and a process group of its own: it stops on SIGTERM even when the suite
    # runs as a background job (tests/support/services.py)
    process = services.start([HYPOGRAPH, "ui", vault, "--port", str(port)], vault.parent / "ui.log", env)
    try:
        yield {**wait_for_code_location(port, process), "port": port, "vault_id": stored_id(vault)}
    finally:
        services.stop(process)


def test_ui_shows_the_asset_graph_with_lineage(ui):
    nodes = {n["assetKey"]["path"][-1]: n for n in ui["assetNodes"]}
    deps = {name: {d["path"][-1] for d in n["dependencyKeys"]} for name, n in nodes.items()}
    assert deps["hypothesis_embeddings"] == {"hypothesis_texts"}
    assert deps["similarity_graph"] == {"hypothesis_embeddings"}
    assert "similarity_graph" in deps["proximity_clusters"] and "similarity_graph" in deps["duplicate_pairs"]
    assert deps["hypothesis_dispositions"] == {"dedup_verdicts", "hypothesis_embeddings"}
    assert deps["hypothesis_texts"] == {"hypotheses"}  # the input itself, an observed source
    assert "structured_proximity" not in deps  # no hidden proximity re-run inside step 4
    assert deps["structure_map"] == {"hypothesis_clusters"}
    assert {nodes[n]["groupName"] for n in ("hypothesis_dispositions", "hypothesis_clusters")} == {"structure"}


def test_ui_lists_the_blocking_checks(ui):
    checks = {c["name"]: c["blocking"] for n in ui["assetNodes"] for c in n["assetChecksOrError"]["checks"]}
    assert checks["graph_is_symmetric"] and checks["every_pair_has_one_verdict"]
    assert all(
        checks[name]
        for name in (
            "clusters_are_well_formed",
            "each_cluster_has_one_residual",
            "every_active_hypothesis_in_one_cluster",
            "no_numbers_in_step4_fields",
        )
    )


def test_ui_shows_the_runs_the_cli_made(ui):
    runs = {(r["jobName"], r["status"]) for r in ui["runsOrError"]["results"]}
    assert ("structure", "SUCCESS") in runs


ADD_PARTITION = """mutation Add($repo: RepositorySelector!, $name: String!, $key: String!) {
  addDynamicPartition(repositorySelector: $repo, partitionsDefName: $name, partitionKey: $key) { __typename }
}"""
RUN = """query Run($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"""


def launch_as_the_ui_does(port: int, job: str, partition: str, run_config: dict) -> str:
    """The Launchpad's launch of ``job`` on ``partition`` with ``run_config``: queued, started by the
    daemon in a process of its own; the run's id once it has finished."""
    params = {
        "selector": {**REPOSITORY, "jobName": job},
        "runConfigData": run_config,
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
    }
    launched = graphql(port, LAUNCH, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if graphql(port, RUN, {"id": run_id})["runOrError"]["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
            return run_id
        time.sleep(1)
    pytest.fail(f"{job} run {run_id} did not finish")


def step_failures(run_id: str) -> list[tuple[str, str | None]]:
    """(step, the Failure's description) of each failed step of the run."""
    import os

    from dagster import DagsterInstance

    with DagsterInstance.from_config(os.environ["DAGSTER_HOME"]) as instance:
        events = [e.dagster_event for e in instance.all_logs(run_id) if e.dagster_event is not None]
    return [
        (e.step_key, getattr(e.step_failure_data.user_failure_data, "description", None))
        for e in events
        if e.is_step_failure
    ]


def test_a_library_round_launched_from_the_ui_on_another_topic_is_refused_in_one_line(ui, tmp_path):
    """The cross-topic guard holds in the job the Launchpad and the sensor run, not only in the
    command: a round of the sycophancy library asked for another topic ends at its first step with
    the guard's line (a person's decision: skipped, nothing red), and the library file is unchanged."""
    library = copy_tree(EXAMPLE_LIBRARY, tmp_path / "library")
    before = (library / "hypothesis_library.json").read_bytes()
    added = in_process("add", library)
    assert added.returncode == 0, added.stderr
    key = added.stdout.split(":")[0] + "/r0001"
    assert graphql(ui["port"], ADD_PARTITION, {"repo": REPOSITORY, "name": "library_rounds", "key": key})
    config = {"resources": {"library": {"config": {"topic": "hallucination in language models", "web": False}}}}
    run_id = launch_as_the_ui_does(ui["port"], "library_round", key, config)
    assert step_failures(run_id) == []
    [(step, line)] = skipped_steps(run_id)
    assert step == "round_candidates" and "hallucination in language models" in line and "\n" not in line, line
    assert "confirm_topic (--confirm-topic)" in line and "new_library (--new-library)" in line, line
    assert "is about" in line and "sycophancy" in line.lower(), line
    assert (library / "hypothesis_library.json").read_bytes() == before


def test_a_setting_out_of_range_launched_from_the_ui_ends_the_first_step_in_one_line(ui):
    """A Launchpad value the settings model refuses: the run's first step ends with the model's
    line, naming the field by both names (no resource that cannot be built, nothing red), nothing
    else runs."""
    config = {"resources": {"proximity": {"config": {"graph_threshold": 30.0}}}}
    run_id = launch_as_the_ui_does(ui["port"], "proximity", ui["vault_id"], config)
    assert step_failures(run_id) == []
    assert skipped_steps(run_id) == [
        ("hypothesis_texts", "graph_threshold (--threshold): must be ≥ -1 and ≤ 1 (got 30.0)")
    ]


def test_a_case_batch_launched_from_the_ui_before_a_person_confirmed_waits_in_one_line(ui, tmp_path):
    """The case's precondition holds in the job the Launchpad, the retry sensor and a backfill run,
    not only in `hypograph batch`: an unconfirmed revision stops at its interpretation with the
    line the command prints, no batch is written, and the run is not a failure (not done yet: the
    step is skipped, its reason recorded, nothing downstream runs)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("The bridge cracked a week after the flood; the inspector found scour at pier 3.\n")
    case = tmp_path / "case"
    made = in_process("case", "new", case, notes, "--question", "Why did the bridge crack?")
    assert made.returncode == 0, made.stderr
    run_id = launch_as_the_ui_does(ui["port"], "case_batch", f"{stored_id(case)}/r0001", {})
    assert step_failures(run_id) == []
    [(step, line)] = skipped_steps(run_id)
    assert step == "case_interpretation" and line.endswith("(the builder never interprets a case itself)"), line
    assert "revision 1 is not confirmed" in line and not (case / "analysis" / "hypotheses").exists()


def skipped_steps(run_id: str) -> list[tuple[str, str]]:
    """(step, reason) of each step the run skipped because its partition cannot run yet."""
    import os

    from dagster import DagsterInstance

    with DagsterInstance.from_config(os.environ["DAGSTER_HOME"]) as instance:
        events = [e.dagster_event for e in instance.all_logs(run_id) if e.dagster_event is not None]
    return [
        (e.step_key, e.event_specific_data.asset_observation.metadata["skipped"].value)
        for e in events
        if e.event_type_value == "ASSET_OBSERVATION" and "skipped" in e.event_specific_data.asset_observation.metadata
    ]
