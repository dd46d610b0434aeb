"""The proximity chain on real research vaults (copies of tests/fixtures/vaults/*, themselves copies
of ../shared/examples/vaults), through both the ``prox`` functions and the Dagster job: it must
succeed on them unchanged, read exactly the active hypotheses, and leave every pre-existing file
of the vault as it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from cli_helper import prox_main
from conftest import SHARED_VAULTS, execute, snapshot

from hypograph.hypotheses import id_sort_key, load_corpus
from hypograph.proximity import checks, store

EXPECTED_IDS = {
    "covid1": ["H-1", "H-5"],  # H-2 is in merged/, H-3 and H-4 in dropped/, H-6 is a step-4 residual
    "eggs1": [f"H-{k}" for k in range(1, 11)],  # H-11..H-13 are step-4 residuals
}
TOOL_OUTPUT = ("proximity", ".hypograph")


def active_hypothesis_ids(vault: Path) -> list[str]:
    """Ids of the paper hypotheses directly in hypotheses/ whose state is active (step-4 residual and
    constructed members are not embedded), read with plain YAML."""
    ids = []
    for path in (vault / "hypotheses").glob("*.md"):
        meta = yaml.safe_load(path.read_text(encoding="utf-8").split("---", 2)[1])
        assert meta["id"] == path.name.split(" - ", 1)[0], path.name
        if meta.get("state", "active") == "active" and not meta.get("origin"):
            ids.append(meta["id"])
    return sorted(ids, key=id_sort_key)


def run_prox(root: Path) -> None:
    for command in ("embed", "graph", "clusters", "dupes"):
        assert prox_main([command, "--run-dir", str(root)]) == 0, command


def run_dagster(root: Path) -> None:
    result = execute(root, "proximity", offline=None)
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert evaluations and all(e.passed for e in evaluations)


RUNNERS = {"prox": run_prox, "dagster": run_dagster}


@pytest.fixture(params=sorted(EXPECTED_IDS))
def real_vault(request, tmp_path) -> Path:
    source = SHARED_VAULTS / request.param
    if not (source / "hypotheses").is_dir():
        pytest.skip(f"{source} is not available")
    return Path(shutil.copytree(source, tmp_path / request.param))


def read_json(root: Path, name: str):
    return json.loads((store.proximity_dir(root) / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("runner", RUNNERS)
def test_proximity_chain_on_real_vault(real_vault, runner):
    before = snapshot(real_vault)
    RUNNERS[runner](real_vault)

    ids = read_json(real_vault, "embedding-ids.json")
    assert ids == active_hypothesis_ids(real_vault) == EXPECTED_IDS[real_vault.name]

    graph = read_json(real_vault, "graph.json")
    clusters = read_json(real_vault, "clusters.json")
    assert list(graph["nodes"]) == ids
    assert checks.graph_symmetric(graph) == []
    assert checks.clusters_partition(clusters["clusters"], ids, clusters["num_clusters"]) == []
    assert checks.duplicate_pairs_valid(store.read_dupes(real_vault), 0.8) == []

    after = snapshot(real_vault)
    assert {f: v for f, v in after.items() if f in before} == before  # bytes and mtimes
    assert all(Path(f).parts[0] in TOOL_OUTPUT for f in after.keys() - before.keys())


def test_real_vault_texts_are_clean(real_vault):
    corpus = load_corpus(real_vault)
    assert corpus.warnings == []
    for h in corpus.hypotheses:
        assert h.text.startswith(h.title)
        for markup in ("[[", "]]", "type:", "state:", "---"):
            assert markup not in h.text, (h.id, markup)
