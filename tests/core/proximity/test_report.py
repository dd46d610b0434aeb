"""hypograph.report: the pictures of a proximity run (files, atomic and stable writes) and the
threshold sweep's numbers against counting the edges of a graph built at each threshold."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from hypograph.errors import HypographError
from hypograph.hypotheses import load_corpus
from hypograph.proximity import store
from hypograph.proximity.communities import find_communities, labelled_clusters
from hypograph.proximity.dupes import pairs_at
from hypograph.proximity.embed import embed
from hypograph.proximity.graph import similarity_graph
from hypograph.report import REPORT_HTML, REPORT_JSON, write_report
from hypograph.report import sweep as sweep_
from hypograph.report.layout import sample_points

EXAMPLE_RUN = Path(__file__).resolve().parents[3] / "examples" / "run"


def proximity_files(root: Path, threshold: float = 0.30, cap: int = 0):
    """What hypograph proximity writes (embeddings, graph, clusters, dupes), built with the domain functions."""
    corpus = load_corpus(root)
    ids = [h.id for h in corpus.hypotheses]
    texts = [h.text for h in corpus.hypotheses]
    emb = embed(ids, texts, "tfidf")
    store.write_embeddings(root, emb)
    graph = similarity_graph(emb.ids, emb.rows, threshold, cap, workers=1)
    graph.embedding = emb.describe()
    store.write_graph(root, graph)
    clusters = labelled_clusters(graph, dict(zip(ids, texts, strict=True)), terms=emb)
    store.write_clusters(root, clusters, graph)
    store.write_dupes(root, pairs_at(graph, lambda: emb, 0.80))
    return emb, graph


@pytest.fixture
def run(tmp_path):
    root = tmp_path / "run"
    shutil.copytree(EXAMPLE_RUN, root)
    return root


def test_report_files_are_written_beside_the_proximity_files(run):
    proximity_files(run)
    report = write_report(run)
    d = run / "proximity"
    assert set(report.files.values()) == {
        d / "cluster-map.png",
        d / "thresholds.png",
        d / REPORT_HTML,
        d / REPORT_JSON,
    }  # a run directory has no vault map
    for name in ("cluster-map.png", "thresholds.png"):
        assert (d / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert report.pngs[name.removesuffix(".png").replace("-", "_")] == (d / name).read_bytes()
    page = (d / REPORT_HTML).read_text(encoding="utf-8")
    assert 'id="cluster-map"' in page and 'id="thresholds"' in page
    tags = set(re.findall(r"<script[^>]*>", page))
    # one script loaded, from beside the page (so it works offline), none from anywhere else
    assert tags <= {"<script>", '<script type="text/javascript">', '<script charset="utf-8" src="plotly.min.js">'}
    assert '<script charset="utf-8" src="plotly.min.js">' in tags and "Plotly.newPlot" in page
    assert len(page) < 200_000 and b"plotly.js" in (d / "plotly.min.js").read_bytes()[:500]
    doc = json.loads((d / REPORT_JSON).read_text(encoding="utf-8"))
    assert doc["counts"]["hypotheses"] == 30 and doc["counts"]["points_drawn"] == 30
    assert doc["counts"]["duplicate_links_drawn"] == len(store.read_dupes(run))
    assert [r["threshold"] for r in doc["sweep"]] == list(sweep_.THRESHOLDS)
    assert not list(d.glob(".*.tmp")), "a temporary file was left behind"


def test_a_second_report_on_the_same_files_rewrites_nothing(run):
    proximity_files(run)
    first = write_report(run)
    assert first.written
    stamps = {p: p.stat().st_mtime_ns for p in first.files.values()}
    again = write_report(run)
    assert again.written == []
    assert {p: p.stat().st_mtime_ns for p in again.files.values()} == stamps
    assert again.pngs == first.pngs


def _pairs_at_least(matrix, t: float) -> int:
    dense = np.asarray(matrix @ matrix.T.toarray() if hasattr(matrix, "toarray") else matrix @ matrix.T)
    upper = np.round(dense[np.triu_indices(dense.shape[0], k=1)], 6)
    return int(np.count_nonzero(upper >= t))


@pytest.mark.parametrize("cap", [0, 3])
def test_the_sweep_counts_the_edges_a_graph_built_at_each_threshold_has(run, cap):
    emb, graph = proximity_files(run, cap=cap)
    sweep = sweep_.threshold_sweep(graph, emb.rows, "louvain", 0.80)
    assert sweep.exact
    for k, t in enumerate(sweep.thresholds):
        built = similarity_graph(emb.ids, emb.rows, t, cap, workers=1)
        assert sweep.edges[k] == built.num_edges, (t, cap)
        sizes = [len(m) for m in find_communities(built).clusters.values()]
        assert sweep.clusters[k] == sum(s >= 2 for s in sizes), (t, cap)
        assert sweep.alone[k] == sum(s == 1 for s in sizes), (t, cap)
        assert sweep.pairs[k] == _pairs_at_least(emb.rows, t), t
    assert sweep.counts.sum() == sweep.total_pairs == 30 * 29 // 2
    assert sweep.best[2] == max(graph.sim)


def test_no_edge_at_the_threshold_is_said_with_the_most_similar_pair(run):
    emb, graph = proximity_files(run, threshold=0.99)
    report = write_report(run)
    assert report.headline.startswith("none of the 435 pairs reaches the threshold 0.99")
    best = _pairs_at_least(emb.rows, report.sweep.best[2])
    assert best >= 1 and _pairs_at_least(emb.rows, report.sweep.best[2] + 1e-6) == 0


def test_above_the_exact_size_the_pairs_are_sampled_and_the_graph_counts_stay_exact(run, monkeypatch):
    emb, graph = proximity_files(run)
    monkeypatch.setattr(sweep_, "EXACT_MAX", 10)
    monkeypatch.setattr(sweep_, "SAMPLE_ROWS", 12)
    sweep = sweep_.threshold_sweep(graph, emb.rows, "louvain", 0.80)
    assert not sweep.exact and sweep.notes
    for k, t in enumerate(sweep.thresholds):
        if t >= graph.threshold:
            assert sweep.edges[k] == sweep.pairs[k] == int(np.count_nonzero(graph.sim >= t))
        else:
            assert sweep.edges[k] is None and sweep.clusters[k] is None
            assert sweep.pairs[k] > 0
    assert sweep.counts.sum() == pytest.approx(sweep.total_pairs, rel=0.05)


def test_the_map_sample_keeps_every_cluster_and_is_repeatable():
    ids = [f"H-{k}" for k in range(10_000)]
    membership = {i: ("C-01" if k < 9_990 else f"C-{k}") for k, i in enumerate(ids)}
    picked = sample_points(ids, membership, limit=500)
    assert 490 <= picked.size <= 520
    assert {membership[ids[i]] for i in picked} == set(membership.values())
    assert np.array_equal(picked, sample_points(ids, membership, limit=500))
    assert np.array_equal(sample_points(ids[:400], membership, limit=500), np.arange(400))


def test_a_run_without_proximity_files_is_one_line_naming_the_file(run):
    with pytest.raises(HypographError, match=r"proximity/graph\.json: missing"):
        write_report(run)


def test_a_vault_gets_its_map_by_hypothesis_cluster_with_its_residuals(tmp_path):
    from conftest import SHARED_VAULTS, copy_tree

    from hypograph.report import VAULT_MAP_PNG, hc_groups

    vault = copy_tree(SHARED_VAULTS / "eggs1", tmp_path / "eggs1")
    proximity_files(vault)
    membership, names, residuals = hc_groups(vault)
    assert set(names) == {"HC-1", "HC-2", "HC-3"} and names["HC-1"].startswith("HC-1 Magnitude")
    assert len(residuals) == 3 and all(membership[r] in names for r in residuals)
    report = write_report(vault)
    assert report.files["vault_map"] == vault / "proximity" / VAULT_MAP_PNG
    assert report.pngs["vault_map"] == (vault / "proximity" / VAULT_MAP_PNG).read_bytes()
    assert report.counts["hc_clusters"] == 3 and report.counts["residuals"] == 3
    assert 'id="vault-map"' in (vault / "proximity" / REPORT_HTML).read_text(encoding="utf-8")


def test_report_through_the_command_never_writes_through_a_symlinked_proximity_folder(run, tmp_path):
    """``hypograph report`` (the report job) on an input whose proximity/ links out: refused in one
    line, nothing written where the link points."""
    from cli_helper import hypograph
    from conftest import offline_env

    proximity_files(run)
    outside = tmp_path / "outside"
    shutil.move(run / "proximity", outside)
    (run / "proximity").symlink_to(outside)
    before = sorted(p.name for p in outside.iterdir())
    proc = hypograph("report", run, env={**offline_env(), "DAGSTER_HOME": str(tmp_path / "home")})
    assert proc.returncode == 1
    [line] = proc.stderr.strip().splitlines()
    assert f"{run / 'proximity'}: is a symlinked folder" in line, line
    assert sorted(p.name for p in outside.iterdir()) == before
