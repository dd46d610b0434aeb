"""The Dagster web UI, as `make ui` starts it: a real dagster-webserver on loopback, queried over
its GraphQL API for what a user would look at (the asset graph with its lineage, the checks, and
the runs the CLI made)."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request

import pytest
import services
from conftest import EXAMPLE_VAULT, VENV_BIN, copy_tree, offline_env

QUERY = """{
  assetNodes { assetKey { path } groupName dependencyKeys { path }
               assetChecksOrError { ... on AssetChecks { checks { name blocking } } } }
  runsOrError { ... on Runs { results { jobName status } } }
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["data"]


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
    subprocess.run(
        [VENV_BIN / "hypograph", "structure", vault, "--llm", "offline"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    port = free_port()
    # SIGINT at its default and a process group of its own: it stops on SIGTERM even when the suite
    # runs as a background job (tests/services.py)
    process = services.start([VENV_BIN / "hypograph", "ui", vault, "--port", str(port)], vault.parent / "ui.log", env)
    try:
        yield wait_for_code_location(port, process)
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
