"""Library dedup retrieval as a library grows (issue 34): what the model judge is shown.

On the held-out half of issue 34's labelled set (``benchmarks/data/library_pairs_34.json``) in a
library grown with same-topic distractors (``benchmarks/library_recall.py``), the true duplicate of
each paraphrase is among the neighbours shown; the same library with the old retrieval (15 nearest
by plain cosine) misses many. The figures at 100 / 1,000 / 10,000 nodes are the benchmark's
(benchmarks/README.md), not a test's.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import REPO

from hypograph.library import dedup
from hypograph.library.dedup import Item, judge_batches, neighbour_items, shown_count
from hypograph.library.embedder import backend_of, make_embedder

sys.path.insert(0, str(REPO / "benchmarks"))
NODES = 400  # a library past LARGE_POOL where plain top-15 already misses


def _library_and_rounds(split: str = "held-out"):
    import library_recall  # benchmarks/library_recall.py

    pairs = [p for p in library_recall.load_pairs() if p["split"] == split]
    existing = [(f"B{i + 1}", p["a"]) for i, p in enumerate(pairs)]
    existing += [(f"D{j + 1}", t) for j, t in enumerate(library_recall.distractors(NODES - len(existing)))]
    rounds = [
        [(f"c{i + 1}", pairs[i]["b"]) for i in range(s, min(s + 10, len(pairs)))] for s in range(0, len(pairs), 10)
    ]
    return pairs, existing, rounds


def _recall(pairs, existing, rounds, embedder) -> float:
    found = duplicates = 0
    for queries in rounds:
        for (key, _), item in zip(queries, neighbour_items("behavior", existing, queries, embedder, 15), strict=True):
            i = int(key[1:]) - 1
            if pairs[i]["label"] == "duplicate":
                duplicates += 1
                found += f"B{i + 1}" in [r for r, _, _ in item.neighbours]
    return found / duplicates


@pytest.fixture(scope="module")
def sbert():
    embedder = make_embedder("sbert")
    assert backend_of(embedder).startswith("sbert"), "the default install gives sentence embeddings"
    return embedder


def test_held_out_duplicates_are_shown_in_a_grown_library_and_the_old_retrieval_missed_them(sbert, monkeypatch):
    pairs, existing, rounds = _library_and_rounds()
    assert sum(p["label"] == "duplicate" for p in pairs) >= 45 and len(existing) == NODES
    now = _recall(pairs, existing, rounds, sbert)
    assert now >= 0.95
    # The old retrieval: the settings' 15 nearest by plain cosine.
    monkeypatch.setattr(dedup, "SHOWN_PER_ROOT", 0.0)
    monkeypatch.setattr(dedup, "_centred_cosine", lambda rows, offset: rows[offset:] @ rows.T)
    before = _recall(pairs, existing, rounds, sbert)
    assert before < now - 0.1, (before, now)


def test_centring_only_ranks_the_shown_cosines_are_the_plain_ones(sbert):
    _, existing, rounds = _library_and_rounds()
    queries = rounds[0][:2]
    items = neighbour_items("behavior", existing, queries, sbert, 15)
    rows = sbert([t for _, t in existing] + [t for _, t in queries])
    index = {ref: j for j, (ref, _) in enumerate(existing + queries)}
    reordered = 0
    for q, item in enumerate(items):
        library = [(r, s) for r, _, s in item.neighbours if r.startswith(("B", "D"))]
        assert len(library) == shown_count(15, NODES) == 150
        plain = rows[len(existing) + q] @ rows.T
        assert all(s == pytest.approx(float(plain[index[r]]), abs=1e-4) for r, s in library)
        reordered += [s for _, s in library] != sorted((s for _, s in library), reverse=True)
    assert reordered  # ranked by the centred cosine, not by the plain one shown


def test_shown_count_grows_with_the_library_never_under_k_nor_over_the_library():
    assert shown_count(15, 3) == 3
    assert shown_count(15, 9) == 9
    assert shown_count(15, 100) == 75
    assert shown_count(40, 36) == 36
    assert shown_count(15, 1_000) == 238
    assert shown_count(15, 10_000) == 750
    assert shown_count(70, 81) == 70  # the settings' k when it is more


def test_a_call_carries_at_most_batch_neighbours_and_a_longer_list_is_cut_in_even_parts():
    def items(n: int, shown: int) -> list[Item]:
        neighbours = [(f"B{j}", "text", 0.5) for j in range(shown)]
        return [Item("behavior", f"c{i}", "text", neighbours) for i in range(n)]

    assert [len(b) for b in judge_batches(items(10, 20))] == [dedup.BATCH, 2]
    assert [len(b) for b in judge_batches(items(3, 164))] == [1, 1, 1]
    assert [len(b) for b in judge_batches(items(7, 55))] == [4, 3]  # 4 x 55 = 220 <= 240 < 5 x 55
    assert judge_batches([]) == []
    assert sum(len(b) for b in judge_batches(items(23, 37))) == 23  # every item once, in order
    long = items(2, 755)  # 10,000 library nodes: 750 shown and 5 earlier candidates
    calls = judge_batches(long)
    assert [[(it.key, len(it.neighbours)) for it in b] for b in calls] == [[("c0", 189)]] * 3 + [[("c0", 188)]] + [
        [("c1", 189)]
    ] * 3 + [[("c1", 188)]]
    assert [n for b in calls[:4] for n in b[0].neighbours] == long[0].neighbours  # in rank order, each once
    assert all(sum(len(it.neighbours) for it in b) <= dedup.BATCH_NEIGHBOURS for b in judge_batches(items(9, 241)))


def test_tfidf_is_used_only_when_asked_and_then_says_so():
    asked = make_embedder("tfidf")
    assert backend_of(asked) == "tfidf (asked for: embedder tfidf)"
    rows = asked(["models flatter users", "assistants praise people"])
    assert rows.shape[0] == 2 and not isinstance(rows, np.ndarray)  # sparse lexical rows
    assert backend_of(make_embedder()).startswith("sbert")  # the default


def test_a_large_pool_is_ranked_by_both_sentence_models_a_small_one_by_minilm(sbert, monkeypatch):
    from hypograph.library.embedder import LARGE_POOL, RANKING_MODEL, sbert_rows

    _, existing, rounds = _library_and_rounds()
    texts = [t for _, t in existing[:5]]
    joint = sbert.ranking_rows(texts)
    minilm, mpnet = sbert_rows(texts), sbert_rows(texts, RANKING_MODEL)
    assert joint.shape == (5, minilm.shape[1] + mpnet.shape[1]) and mpnet.shape[1] == 768
    # a joint cosine is the mean of the two models' cosines
    assert np.allclose(joint @ joint.T, (minilm @ minilm.T + mpnet @ mpnet.T) / 2, atol=1e-5)
    assert RANKING_MODEL in backend_of(sbert)

    asked = []
    real = type(sbert).ranking_rows
    monkeypatch.setattr(type(sbert), "ranking_rows", lambda self, t: asked.append(len(t)) or real(self, t))
    queries = rounds[0][:3]
    items = neighbour_items("behavior", existing, queries, sbert, 15)
    assert asked == [NODES + 3]
    ranking = dedup._centred_cosine(real(sbert, [t for _, t in existing + queries]), NODES)
    for q, item in enumerate(items):
        top = np.argsort(-ranking[q, :NODES], kind="stable")[: shown_count(15, NODES)]
        assert {existing[j][0] for j in top} == {r for r, _, _ in item.neighbours if r.startswith(("B", "D"))}
    neighbour_items("behavior", existing[:LARGE_POOL], queries, sbert, 15)
    assert asked == [NODES + 3], "a small library is ranked by MiniLM alone: the second model is not loaded"
