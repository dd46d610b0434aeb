"""Drop-in fidelity with the proximity tool (prox formats): its numbers, its file formats and their edge cases.

The seed's computations are restated here as a reference (``seed_*``): ``TfidfVectorizer()``,
``cosine_similarity`` over the stored rows, an edge when similarity >= threshold, similarities
rounded to 6 decimals, dupes read off graph.json. Each test runs ``prox`` on the same input and
compares.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from cli_helper import prox, prox_main
from conftest import EXAMPLE_RUN, offline_env
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics.pairwise import cosine_similarity

from hypograph.errors import HypographError
from hypograph.hypotheses import load_corpus
from hypograph.proximity import graph as graph_module
from hypograph.proximity.embed import embed
from hypograph.proximity.graph import similarity_graph

NEAR_COPY = {  # H-0031: H-0004 with a few words changed, a near-duplicate
    "id": "H-0031",
    "title": "Chronic bee paralysis virus spreads among infected colonies in crowded apiaries",
    "statement": "Infection with chronic bee paralysis virus, which rose tenfold in British apiaries between 2007 "
    "and 2017 and ends in sudden collapse, is driven by pathogen spread between nearby colonies in "
    "crowded apiaries rather than by mites.",
    "mechanism": "The pathogen passes by direct contact from infected foragers, so crowded apiaries and robbing "
    "spread it between neighbouring colonies.",
}


def run(root: Path, *args: str) -> None:
    assert prox_main([*args[:1], "--run-dir", str(root), *args[1:]]) == 0, args


def read(root: Path, name: str):
    return json.loads((root / "proximity" / name).read_text(encoding="utf-8"))


# -- the seed's computations, restated --------------------------------------------------------------


def seed_texts(root: Path) -> tuple[list[str], list[str]]:
    """ids and texts as the seed's embed reads them: files in name order, non-empty fields joined."""
    docs = [json.loads(p.read_text()) for p in sorted((root / "hypotheses").glob("H-*.json"))]
    return [d["id"] for d in docs], [
        " ".join(p for p in (d.get("title", ""), d.get("statement", ""), d.get("mechanism", "")) if p) for d in docs
    ]


def seed_graph(matrix, ids: list[str], threshold: float) -> dict:
    sims = cosine_similarity(matrix)
    nodes = {}
    for i, a in enumerate(ids):
        edges = [
            {"target": b, "similarity": round(float(sims[i, j]), 6)}
            for j, b in enumerate(ids)
            if i != j and float(sims[i, j]) >= threshold
        ]
        nodes[a] = {"cluster": None, "edges": sorted(edges, key=lambda e: (-e["similarity"], e["target"]))}
    return {"threshold": threshold, "nodes": nodes}


def seed_dupes(graph: dict, threshold: float) -> list[dict]:
    pairs = {}
    for a, node in graph["nodes"].items():
        for e in node["edges"]:
            if e["similarity"] >= threshold:
                pairs[tuple(sorted((a, e["target"])))] = e["similarity"]
    return [{"a": a, "b": b, "similarity": s} for (a, b), s in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))]


@pytest.fixture
def seed_run(tmp_path) -> Path:
    """The bundled example run (30 hypotheses, zero-padded ids as the seed writes them) plus a near-copy."""
    root = tmp_path / "run"
    shutil.copytree(EXAMPLE_RUN / "hypotheses", root / "hypotheses")
    (root / "hypotheses" / "H-0031.json").write_text(json.dumps(NEAR_COPY), encoding="utf-8")
    return root


# -- numbers --------------------------------------------------------------------------------------


def test_default_embedding_is_the_seeds_vectorizer_bit_for_bit(seed_run):
    ids, texts = seed_texts(seed_run)
    corpus = load_corpus(seed_run)
    assert corpus.ids == ids and corpus.texts == texts
    extra = ["Café CAFÉ naïve_user 42 x", "日本語 テキスト and ÉCOLE école", "a b"]
    ours = embed([f"H-{k}" for k in range(len(texts) + 3)], texts + extra)
    vec = TfidfVectorizer()
    theirs = vec.fit_transform(texts + extra)
    assert ours.vocabulary == vec.get_feature_names_out().tolist()
    rows = ours.rows
    assert np.array_equal(rows.indptr, theirs.indptr) and np.array_equal(rows.indices, theirs.indices)
    assert np.array_equal(rows.data, theirs.data)  # the same floats, not merely close


@pytest.mark.parametrize("max_neighbours", ["50", "0"])
def test_graph_json_has_the_seeds_edges_and_six_decimal_similarities(seed_run, max_neighbours):
    run(seed_run, "embed")
    run(seed_run, "graph", "--max-neighbours", max_neighbours)
    ids, texts = seed_texts(seed_run)
    expected = seed_graph(TfidfVectorizer().fit_transform(texts), ids, 0.3)
    ours = read(seed_run, "graph.json")
    assert {k: v["edges"] for k, v in ours["nodes"].items()} == {k: v["edges"] for k, v in expected["nodes"].items()}
    sims = [e["similarity"] for n in ours["nodes"].values() for e in n["edges"]]
    assert any(round(s, 4) != s for s in sims)  # 6 decimals, not 4


def test_dupes_are_the_seeds_pairs_with_its_numbers(seed_run):
    run(seed_run, "embed")
    run(seed_run, "graph")
    result = prox("dupes", "--run-dir", seed_run)
    assert result.returncode == 0, result.stderr
    ids, texts = seed_texts(seed_run)
    expected = seed_dupes(seed_graph(TfidfVectorizer().fit_transform(texts), ids, 0.3), 0.8)
    assert json.loads(result.stdout) == expected
    assert {("H-0004", "H-0031")} <= {(p["a"], p["b"]) for p in expected}


def test_the_tuned_analyzer_is_an_opt_in_recorded_in_the_metadata(seed_run):
    run(seed_run, "embed", "--model", "tuned")
    meta = read(seed_run, "embedding-meta.json")
    assert meta["model"] == "tfidf-tuned"
    assert meta["vectorizer"]["arguments"] == {"stop_words": "english", "sublinear_tf": True}
    run(seed_run, "graph")
    assert read(seed_run, "graph.json")["embedding"] == {"backend": "tfidf", "model": "tfidf-tuned"}
    run(seed_run, "embed")
    assert read(seed_run, "embedding-meta.json")["vectorizer"]["arguments"] == {}


# -- thresholds -----------------------------------------------------------------------------------


def test_threshold_zero_is_the_seeds_complete_graph(seed_run):
    run(seed_run, "embed")
    run(seed_run, "graph", "--threshold", "0", "--max-neighbours", "0")
    ids, texts = seed_texts(seed_run)
    expected = seed_graph(TfidfVectorizer().fit_transform(texts), ids, 0.0)
    ours = read(seed_run, "graph.json")
    assert all(len(n["edges"]) == len(ids) - 1 for n in ours["nodes"].values())
    assert {k: v["edges"] for k, v in ours["nodes"].items()} == {k: v["edges"] for k, v in expected["nodes"].items()}


def test_dupes_below_the_graph_threshold_come_from_the_embeddings(seed_run):
    run(seed_run, "embed")
    run(seed_run, "graph")
    result = prox("dupes", "--run-dir", seed_run, "--threshold", "0.2")
    assert result.returncode == 0, result.stderr
    ids, texts = seed_texts(seed_run)
    expected = seed_dupes(seed_graph(TfidfVectorizer().fit_transform(texts), ids, 0.2), 0.2)
    assert json.loads(result.stdout) == expected
    assert min(p["similarity"] for p in expected) < 0.3


def test_a_graph_that_cannot_fit_in_memory_is_refused_in_one_line_with_its_size(seed_run):
    """No cap by default: a graph too large for memory is refused before any product, naming its
    size and the flag that caps it."""
    run(seed_run, "embed")
    env = {**offline_env(), "HYPOGRAPH_MEMORY_LIMIT": "64K"}
    result = prox("graph", "--run-dir", seed_run, "--threshold", "0", env=env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert "would hold about 465 edges and need ~" in lines[0] and "64 KiB" not in lines[0]
    assert "raise the threshold or cap each node's neighbours with --max-neighbours K" in lines[0]
    assert not (seed_run / "proximity" / "graph.json").exists()


def test_a_pair_at_exactly_the_threshold_is_an_edge_as_in_the_seeds_float64_cosine(tmp_path):
    """[1, 0] and [0.6, 0.8]: cosine 0.6 in float64 (the seed's ``cosine_similarity``), so an edge
    at --threshold 0.6, from the domain function and through ``prox graph``, sparse or dense rows."""
    rows = np.array([[1.0, 0.0], [0.6, 0.8]])
    assert float(cosine_similarity(rows)[0, 1]) >= 0.6
    for matrix in (sp.csr_matrix(rows), rows, rows.astype(np.float32)):
        graph = similarity_graph(["H-1", "H-2"], matrix, 0.6, max_neighbours=0)
        assert graph.num_edges == 1 and graph.sim.tolist() == [0.6], type(matrix)
    for name, write in (
        ("sparse", lambda path: sp.save_npz(path, sp.csr_matrix(rows))),
        ("dense", lambda path: np.savez(path, embeddings=rows.astype(np.float32))),
    ):
        d = tmp_path / name / "proximity"
        d.mkdir(parents=True)
        write(d / "embeddings.npz")
        (d / "embedding-ids.json").write_text(json.dumps(["H-1", "H-2"]), encoding="utf-8")
        run(d.parent, "graph", "--threshold", "0.6")
        doc = json.loads((d / "graph.json").read_text(encoding="utf-8"))
        assert doc["nodes"]["H-1"]["edges"] == [{"target": "H-2", "similarity": 0.6}], name
        assert doc["max_neighbours"] == 0  # the seed's graph, no cap, recorded


def test_the_neighbour_cap_is_opt_in_and_recorded_in_graph_json(seed_run):
    run(seed_run, "embed")
    run(seed_run, "graph")
    uncapped = read(seed_run, "graph.json")
    assert uncapped["max_neighbours"] == 0
    run(seed_run, "graph", "--max-neighbours", "2")
    capped = read(seed_run, "graph.json")
    assert capped["max_neighbours"] == 2
    edges = lambda doc: sum(len(n["edges"]) for n in doc["nodes"].values())
    assert edges(capped) < edges(uncapped)


def test_memory_refusal_names_the_size_needed(monkeypatch):
    monkeypatch.setattr(graph_module, "available_memory", lambda: 10_000)
    rows = sp.random(200, 50, density=0.2, random_state=1, format="csr")
    with pytest.raises(HypographError, match=r"would hold about 19,900 edges and need ~\d+ MiB of memory"):
        similarity_graph([f"H-{k}" for k in range(200)], rows, 0.0, max_neighbours=0)


# -- clusters from the graph alone ------------------------------------------------------------------


def seed_format_graph(root: Path, edges: list[tuple[str, str, float]], loners: tuple[str, ...] = ()) -> Path:
    """A graph.json as the seed writes it (no graph.npz, no hypotheses/ nor embeddings)."""
    nodes: dict[str, dict] = {n: {"cluster": None, "edges": []} for n in loners}
    for a, b, s in edges:
        nodes.setdefault(a, {"cluster": None, "edges": []})["edges"].append({"target": b, "similarity": s})
        nodes.setdefault(b, {"cluster": None, "edges": []})["edges"].append({"target": a, "similarity": s})
    (root / "proximity").mkdir(parents=True)
    (root / "proximity" / "graph.json").write_text(json.dumps({"threshold": 0.3, "nodes": nodes}, indent=2))
    return root


def test_clusters_work_from_a_seed_graph_json_alone(tmp_path):
    root = seed_format_graph(tmp_path, [("H-0001", "H-0002", 0.8), ("H-0003", "H-0004", 0.9)], ("H-0005",))
    result = prox("clusters", "--run-dir", root)
    assert result.returncode == 0, result.stderr
    clusters = read(root, "clusters.json")
    assert sorted(map(sorted, clusters["clusters"].values())) == [
        ["H-0001", "H-0002"],
        ["H-0003", "H-0004"],
        ["H-0005"],
    ]
    assert clusters["num_clusters"] == 3 and clusters["algorithm"] == "louvain"
    graph = read(root, "graph.json")
    assert {n: v["cluster"] for n, v in graph["nodes"].items()} == {
        m: label for label, members in clusters["clusters"].items() for m in members
    }
    dupes = prox("dupes", "--run-dir", root)
    assert json.loads(dupes.stdout) == [
        {"a": "H-0003", "b": "H-0004", "similarity": 0.9},
        {"a": "H-0001", "b": "H-0002", "similarity": 0.8},
    ]


def test_clusters_add_keyword_labels_when_the_texts_are_there(seed_run):
    run(seed_run, "embed")
    run(seed_run, "graph")
    (seed_run / "proximity" / "graph.npz").unlink()  # as if the seed had written graph.json
    (seed_run / "proximity" / "embeddings.npz").unlink()
    result = prox("clusters", "--run-dir", seed_run)
    assert result.returncode == 0, result.stderr
    labels = read(seed_run, "clusters.json")["labels"]
    assert labels and all(labels.values())


def test_an_empty_graph_clusters_and_dupes_without_crashing(tmp_path):
    seed_format_graph(tmp_path, [])
    assert prox("clusters", "--run-dir", tmp_path).returncode == 0
    assert read(tmp_path, "clusters.json")["clusters"] == {} and read(tmp_path, "clusters.json")["num_clusters"] == 0
    result = prox("dupes", "--run-dir", tmp_path)
    assert result.returncode == 0 and json.loads(result.stdout) == []


def test_a_graph_json_replaced_by_the_seed_is_read_not_its_stale_twin(seed_run):
    run(seed_run, "embed")
    run(seed_run, "graph")
    assert (seed_run / "proximity" / "graph.npz").exists()
    seed_format_graph(seed_run / "other", [("H-0001", "H-0002", 0.95)], tuple(f"H-{k:04d}" for k in range(3, 32)))
    shutil.copy(seed_run / "other" / "proximity" / "graph.json", seed_run / "proximity" / "graph.json")
    result = prox("dupes", "--run-dir", seed_run)
    assert json.loads(result.stdout) == [{"a": "H-0001", "b": "H-0002", "similarity": 0.95}]


# -- files written by the other tool ----------------------------------------------------------------


def test_the_seeds_embed_over_ours_is_read_and_said_once(seed_run):
    run(seed_run, "embed")
    ids, texts = seed_texts(seed_run)
    # What the seed's `prox embed` writes: save_npz (compressed) and the ids; our meta stays stale.
    sp.save_npz(seed_run / "proximity" / "embeddings.npz", TfidfVectorizer().fit_transform(texts[:-1]))
    (seed_run / "proximity" / "embedding-ids.json").write_text(json.dumps(ids[:-1]))
    result = prox("graph", "--run-dir", seed_run)
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and "written by another tool" in notes[0]
    expected = seed_graph(TfidfVectorizer().fit_transform(texts[:-1]), ids[:-1], 0.3)
    assert {k: v["edges"] for k, v in read(seed_run, "graph.json")["nodes"].items()} == {
        k: v["edges"] for k, v in expected["nodes"].items()
    }
    clusters = prox("clusters", "--run-dir", seed_run)
    assert clusters.returncode == 0 and "note:" not in clusters.stderr  # said once, by graph


def test_unnormalised_rows_from_another_tool_score_as_the_seed_scores_them(tmp_path):
    (tmp_path / "proximity").mkdir()
    sp.save_npz(tmp_path / "proximity" / "embeddings.npz", sp.csr_matrix(np.array([[3.0, 0.0], [2.0, 2.0]])))
    (tmp_path / "proximity" / "embedding-ids.json").write_text(json.dumps(["H-0001", "H-0002"]))
    result = prox("graph", "--run-dir", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "2 of 2 rows L2-normalised" in result.stderr
    edge = read(tmp_path, "graph.json")["nodes"]["H-0001"]["edges"]
    assert edge == [{"target": "H-0002", "similarity": 0.707107}]


# -- id order ---------------------------------------------------------------------------------------


def test_ids_are_in_one_documented_order_everywhere(tmp_path, add_hypothesis):
    """Natural id order (H-2 before H-10) in embedding-ids.json, graph.json, dupes and clusters; for the
    seed's zero-padded ids it is the plain string order the seed uses."""
    text = "Varroa mites spread deformed wing virus into overwintering colonies"
    for hid in ("H-10", "H-2", "H-1"):
        add_hypothesis(tmp_path, hid, title=text)
    for command in ("embed", "graph", "clusters"):
        run(tmp_path, command)
    result = prox("dupes", "--run-dir", tmp_path)
    assert read(tmp_path, "embedding-ids.json") == ["H-1", "H-2", "H-10"]
    assert list(read(tmp_path, "graph.json")["nodes"]) == ["H-1", "H-2", "H-10"]
    assert [(p["a"], p["b"]) for p in json.loads(result.stdout)] == [("H-1", "H-2"), ("H-1", "H-10"), ("H-2", "H-10")]
    assert read(tmp_path, "clusters.json")["clusters"] == {"C-01": ["H-1", "H-2", "H-10"]}


def test_similarities_are_written_as_the_seeds_json_writes_them():
    """orjson writes 9.6e-05 as 0.000096 and 1e-06 as 1e-6; the seed's json module does not. Every
    similarity literal in graph.json and in dupes is json's, for a complete graph's tiny values too."""
    import re

    from hypograph.proximity.dupes import DuplicatePair
    from hypograph.proximity.graph import SimilarityGraph
    from hypograph.proximity.graph_files import graph_json_bytes
    from hypograph.proximity.store import dupes_json

    rng = np.random.default_rng(3)
    sims = np.concatenate([[9.6e-05, -1e-06, 1e-06, 0.0, 1.0, 0.5, -0.000123], rng.random(200).round(6)])
    n = sims.size + 1
    graph = SimilarityGraph(
        [f"H-{k}" for k in range(1, n + 1)], 0.0, np.zeros(sims.size, np.int32), np.arange(1, n, dtype=np.int32), sims
    )
    written = re.findall(rb'"similarity": ([^}]+)}', graph_json_bytes(graph))
    assert sorted(written) == sorted(json.dumps(float(s)).encode() for s in np.concatenate([sims, sims]))
    pairs = [DuplicatePair(a="H-1", b=f"H-{k}", similarity=s) for k, s in enumerate(np.abs(sims).tolist(), 2)]
    for some in (pairs, pairs[4:]):  # with tiny values (json's path) and without (orjson's)
        assert dupes_json(some) == json.dumps([dataclasses.asdict(p) for p in some], indent=2).encode()
