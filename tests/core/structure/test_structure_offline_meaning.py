"""Offline step 4b groups questions by meaning (issue 34).

* The demo vault through ``hypograph structure --llm offline`` (the path users take): its two
  near-duplicates (H-1/H-2, similarity above the dupe threshold) share a cluster, and the two
  reworded questions ("Was the collapse a sudden event or a protracted process?", H-19, and "Was
  the end of the Late Bronze Age system abrupt or gradual?", H-26) are one cluster.
* A near-duplicate pair of the proximity graph is never split across two clusters without a
  recorded reason: pairs between hypotheses whose questions have nothing in common stay together,
  and a pair whose other member is in a frozen cluster is split with its reason in the
  justification.
* Without the sentence model the grouping is TF-IDF, and every justification says so.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from cli_helper import in_process
from conftest import EXAMPLE_VAULT, copy_tree
from test_structure import clusters, failures, members, write_node

from hypograph.errors import HypographError
from hypograph.proximity import embed
from hypograph.structure.carving.offline import Pair, offline_plans
from hypograph.structure.carving.plan import ClusterPlan
from hypograph.vault.vault import open_vault

REWORDED = ("H-19", "H-26")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    root = copy_tree(EXAMPLE_VAULT, tmp_path_factory.mktemp("demo") / "vault")
    proc = in_process("structure", root, "--llm", "offline")
    assert proc.returncode == 0, proc.stderr
    return root


def cluster_of(root: Path) -> dict[str, str]:
    return {m: hc_id for hc_id, hc in clusters(root).items() for m in members(hc)}


def test_demo_near_duplicates_share_a_cluster(demo):
    pairs = json.loads((demo / "proximity" / "dupes.json").read_text(encoding="utf-8"))
    assert {(p["a"], p["b"]) for p in pairs} >= {("H-1", "H-2")}  # the pair the issue names, as proximity wrote it
    where = cluster_of(demo)
    assert [(p["a"], p["b"]) for p in pairs if where[p["a"]] != where[p["b"]]] == []


def test_demo_reworded_questions_are_one_cluster(demo):
    where = cluster_of(demo)
    assert where[REWORDED[0]] == where[REWORDED[1]]
    assert failures(demo) == {}


def test_demo_justifications_name_sentence_embeddings(demo):
    for hc in clusters(demo).values():
        assert "the mean of TF-IDF and sentence embeddings (all-mpnet-base-v2)" in hc.body


QUESTIONS = [
    "How did the Linear B script originate?",
    "Why did Egypt survive the crisis?",
    "What role did tin supply play in bronze production?",
    "Who were the Sea Peoples?",
    "Did rainfall fall across the Levant?",
    "How fast were the palaces destroyed?",
    "Which gods did the palace scribes record?",
    "Why did the Hittite capital move?",
]


def small_vault(root: Path) -> list:
    """Eight hypotheses on questions far apart."""
    (root / "initial_prompt.md").parent.mkdir(parents=True, exist_ok=True)
    (root / "initial_prompt.md").write_text(
        'Main question (verbatim): "What ended the Bronze Age?"\n', encoding="utf-8"
    )
    for k, question in enumerate(QUESTIONS, start=1):
        write_node(
            root,
            "hypotheses",
            f"H-{k}",
            f"Claim number {k}",
            statement=f"An answer to: {question.rstrip('?')}.",
            question=question,
            source="[[S-1]]",
            locator="p",
        )
    return sorted(open_vault(root).of_type("hypothesis"), key=lambda h: int(h.id[2:]))


@pytest.fixture(scope="module")
def hyps(tmp_path_factory) -> list:
    return small_vault(tmp_path_factory.mktemp("pairs"))


@pytest.fixture(scope="module")
def apart(hyps) -> dict[str, int]:
    """Each hypothesis's group when no pair is given (several groups: the pairs below cross them)."""
    plans = offline_plans(hyps)
    assert len(plans) >= 4
    return {m: k for k, p in enumerate(plans) for m in p.members}


def split_pairs(plans: list[ClusterPlan], pairs: list[Pair], frozen: dict[str, str]) -> list[Pair]:
    """The pairs ``plans`` split across two clusters with no recorded reason (the guarantee: none).
    ``frozen``: id -> the existing cluster it is in."""
    where = {m: k for k, p in enumerate(plans) for m in p.members}
    where.update(frozen)
    return [
        p
        for p in pairs
        if p.a in where
        and p.b in where
        and where[p.a] != where[p.b]
        and not any(f"{p.a} and {p.b} are near-duplicates" in plan.justification for plan in plans)
        and not any(f"{p.b} and {p.a} are near-duplicates" in plan.justification for plan in plans)
    ]


@pytest.mark.parametrize("seed", range(4))
def test_a_near_duplicate_pair_is_never_split(hyps, apart, seed):
    rng = random.Random(seed)
    ids = [h.id for h in hyps]
    crossing = [(a, b) for a in ids for b in ids if a < b and apart[a] != apart[b]]
    pairs = [Pair(a, b, similarity=0.8 + rng.random() / 5) for a, b in rng.sample(crossing, 3)]
    plans = offline_plans(hyps, pairs)
    where = {m: k for k, p in enumerate(plans) for m in p.members}
    assert all(where[p.a] == where[p.b] for p in pairs)
    assert split_pairs(plans, pairs, {}) == []
    assert sorted(m for p in plans for m in p.members) == sorted(ids)


def test_a_pair_with_a_frozen_member_is_split_with_its_reason(hyps):
    pairs = [Pair("H-2", "H-9", 0.9)]  # H-9 is in an existing cluster: H-2 cannot join it
    plans = offline_plans(hyps, pairs, frozen={"H-9": "HC-1"})
    (plan,) = [p for p in plans if "H-2" in p.members]
    assert "H-2 and H-9 are near-duplicates" in plan.justification and "HC-1" in plan.justification
    assert split_pairs(plans, pairs, {"H-9": "HC-1"}) == []
    plan.justification = "no reason given"
    assert split_pairs(plans, pairs, {"H-9": "HC-1"}) == pairs  # the guarantee's test can fail


def test_without_the_sentence_model_the_grouping_is_tfidf_and_says_so(hyps, monkeypatch):
    def missing(name):
        raise HypographError("sentence embeddings need the 'semantic' extra")

    monkeypatch.setattr(embed, "sentence_model", missing)
    plans = offline_plans(hyps, [Pair("H-1", "H-5", 0.85)])
    assert all("TF-IDF of the question hints (sentence embeddings unavailable: " in p.justification for p in plans)
    assert split_pairs(plans, [Pair("H-1", "H-5", 0.85)], {}) == []


def test_the_central_question_of_equally_similar_hints_is_the_lowest_ids_whatever_the_last_bits():
    """Issue 46: two hints equally similar to each other have similarity sums that differ in the
    last bits of their float32 embeddings (the kernels a processor gets, its threads): the cluster's
    question must not follow them (it flipped between runs of the golden vault case)."""
    import numpy as np

    from hypograph.structure.carving.offline import central_question
    from hypograph.vault.nodes import Node

    nodes = [
        Node(path=Path(f"hypotheses/H-{n}.md"), meta={"id": f"H-{n}", "question": f"Question {n}?"}, body="")
        for n in (12, 13)
    ]
    for noise in (2.5e-7, -2.5e-7):  # a float32 step or two at 1.0
        sims = np.array([[1.0, 0.8], [0.8, 1.0 + noise]], dtype=np.float32)
        assert central_question(nodes, sims) == "Question 12?"
    assert central_question(nodes, np.array([[1.0, 0.8], [0.8, 1.1]])) == "Question 13?"  # a real difference
