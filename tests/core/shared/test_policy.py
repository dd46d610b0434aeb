"""The policy seam (``hypograph/llm/policy.py``) and 4a using what it is given.

* offline: every ask decided offline, no call; with a model: valid answers accepted as
  ``model:<name>``, a rejected one replaced by the offline decision and counted (``llm_fallback``);
* 4a: a rejected pair answer falls back to the offline rule (here: MERGE an auto-merge pair no
  observation separates), recorded ``decided_by: policy`` with the rejection in its rationale;
* 4a's nearest-neighbour candidates are the rows of the embeddings it is given (whatever their
  backend), and a hypothesis missing from them is embedded into the same space.

Every model here is the local stub server (tests/support/llm_stub.py); the real ``openai`` client runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import numpy as np
import pytest
from llm_stub import MODEL, answer, invalid_json, llm_env, llm_server, merge_answer, merge_pairs  # noqa: F401
from pydantic import BaseModel
from test_structure import build_bee_vault, survivors

from hypograph.environment import llm_config
from hypograph.errors import HypographError
from hypograph.hypotheses import load_corpus
from hypograph.llm import Ask, LLMClient, LLMConfig, ModelPolicy, OfflinePolicy, policy_for
from hypograph.llm.client import Request
from hypograph.proximity.adjudicate import Decision
from hypograph.proximity.embed import Embeddings, embed
from hypograph.structure.dispositions import (
    MERGE_SYSTEM,
    TOPIC_SYSTEM,
    Net,
    candidate_pairs,
    read_ledger,
    run_dispositions,
)
from hypograph.structure.dispositions.candidates import rows
from hypograph.structure.scope import open_to_4a
from hypograph.vault.vault import open_vault


class Choice(BaseModel):
    pick: Literal["left", "right"]


def ask(name: str, log: list) -> Ask:
    """An ask whose decisions say how they were made (and log the offline ones)."""

    def offline(note):
        log.append((name, note))
        return f"{name}: offline ({note})"

    return Ask(
        Request(name=name, system="Pick a side.", user=f"Question {name}", schema=Choice),
        accept=lambda choice, by: f"{name}: {choice.pick} by {by}",
        offline=offline,
    )


@pytest.fixture
def client(llm_server, llm_env, tmp_path):
    llm_env(llm_server)
    return LLMClient(llm_config(), tmp_path / "state", "policy-test")


def test_offline_policy_decides_every_ask_offline(tmp_path):
    log = []
    offline_client = LLMClient(LLMConfig(forced_offline=True), tmp_path, "t")
    policy = policy_for(offline_client)
    assert isinstance(policy, OfflinePolicy) and policy.offline
    assert policy.decide("choice", [ask("a", log), ask("b", log)]) == ["a: offline (None)", "b: offline (None)"]
    assert log == [("a", None), ("b", None)]


def test_model_policy_accepts_valid_answers_and_falls_back_on_a_rejected_one(client, llm_server):
    llm_server.always(lambda body: answer({"pick": "left"}) if "Question a" in str(body) else invalid_json())
    log = []
    policy = policy_for(client)
    assert isinstance(policy, ModelPolicy) and not policy.offline
    decided = policy.decide("choice", [ask("a", log), ask("b", log)])
    assert decided[0] == f"a: left by model:{MODEL}"
    assert decided[1].startswith("b: offline (the model's answer was rejected (invalid answer after ")
    assert [name for name, _ in log] == ["b"]
    assert client.usage.fallback == 1 and client.metadata()["llm_fallback"] == 1

    # Asked again: the rejection comes from the cache (no call) and falls back the same way, counted again.
    calls = len(llm_server.requests)
    again = LLMClient(client.config, client.cache_dir.parent.parent, "policy-test")
    assert policy_for(again).decide("choice", [ask("b", log)]) == [decided[1]]
    assert len(llm_server.requests) == calls and again.usage.fallback == 1


def test_policy_for_passes_a_policy_through_and_model_policy_needs_a_model(client, tmp_path):
    policy = OfflinePolicy()
    assert policy_for(policy) is policy
    with pytest.raises(ValueError, match="needs a client with a model"):
        ModelPolicy(LLMClient(LLMConfig(forced_offline=True), tmp_path, "t"))


# -- 4a ---------------------------------------------------------------------------------------------


def pair_ids(body: dict) -> tuple[str, ...]:
    """The ids of a one-pair merge request (4a run with batch_size=1); () for any other request."""
    return tuple(sorted(i for _, a, b in merge_pairs(body) for i in (a, b)))


def keep_everything(body: dict):
    system = next(m["content"] for m in body["messages"] if m["role"] == "system")
    if system.startswith(MERGE_SYSTEM):
        return answer(merge_answer(body))
    assert system.startswith(TOPIC_SYSTEM)
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    numbers = re.findall(r'<hypothesis number="(\d+)">', user)
    return answer({"items": [{"hypothesis": int(n), "off_topic": False, "drop_reason": None} for n in numbers]})


def tfidf_embeddings(root: Path) -> Embeddings:
    corpus = load_corpus(root)
    return embed(corpus.ids, corpus.texts, "tfidf")


AUTO = Decision(
    pair=("H-9", "H-10"),
    similarity=1.0,
    verdict="MERGE",
    rationale="Auto-merge candidate.",
    recommended_action="Retire H-10",
    decided_by="auto",
)


def test_4a_rejected_pair_answer_falls_back_to_the_offline_rule(tmp_path, client, llm_server):
    """H-9/H-10 are an auto-merge pair no observation separates: the offline rule merges them, so
    a rejected model answer merges them too — recorded as the policy's decision, with the reason."""
    root = build_bee_vault(tmp_path / "vault")
    llm_server.always(lambda body: invalid_json() if pair_ids(body) == ("H-10", "H-9") else keep_everything(body))
    run_dispositions(open_vault(root), [AUTO], tfidf_embeddings(root), ModelPolicy(client), batch_size=1)

    assert survivors(root) == {"H-9": ["H-10"]}
    d = read_ledger(root).pairs["H-9|H-10"]
    assert d.decision == "MERGE" and d.decided_by == "policy"
    assert d.rationale.startswith("Offline policy, as the model's answer was rejected (invalid answer after ")
    others = [p for k, p in read_ledger(root).pairs.items() if k != "H-9|H-10"]
    assert others and all(p.decided_by == f"model:{MODEL}" for p in others)
    assert client.usage.fallback == 1


def crafted(ids: list[str]) -> Embeddings:
    """Dense unit rows whose nearest neighbours contradict the texts: H-3 ~ H-5 (unrelated texts);
    H-4 -> H-9 -> H-4 and H-10 -> H-9, though H-3/H-4 and H-9/H-10 read alike."""
    vectors = {"H-3": [1, 0, 0], "H-5": [1, 0, 0], "H-4": [0, 1, 0], "H-9": [0, 0.8, 0.6], "H-10": [0, 0, 1]}
    return Embeddings(ids, np.array([vectors[i] for i in ids], dtype=np.float32), "sbert", "crafted-model")


def test_4a_neighbours_are_the_rows_of_the_embeddings_it_is_given(tmp_path, client, llm_server):
    root = build_bee_vault(tmp_path / "vault")
    llm_server.always(keep_everything)
    run_dispositions(
        open_vault(root),
        [],
        crafted(["H-3", "H-4", "H-5", "H-9", "H-10"]),
        ModelPolicy(client),
        net=Net(k=1),
        batch_size=1,
    )
    asked = {pair_ids(r.body) for r in llm_server.requests if r.system.startswith(MERGE_SYSTEM)}
    assert asked == {("H-3", "H-5"), ("H-4", "H-9"), ("H-10", "H-9")}


def test_a_hypothesis_missing_from_tfidf_embeddings_is_embedded_against_their_vocabulary(tmp_path):
    root = build_bee_vault(tmp_path / "vault")
    nodes = open_to_4a(open_vault(root))
    corpus = load_corpus(root)
    kept = [(i, t) for i, t in zip(corpus.ids, corpus.texts, strict=True) if i != "H-10"]
    given = embed([i for i, _ in kept], [t for _, t in kept])
    matrix = rows(given, nodes)
    assert matrix.shape == (len(nodes), given.dim)
    pairs = {(c.a, c.b): c.similarity for c in candidate_pairs(nodes, [], given, Net(k=1))}
    assert pairs[("H-9", "H-10")] > 0.8  # H-10 reads as H-9 does: found though it was never embedded with them

    ids = [n.id for n in nodes]
    present = [ids.index(i) for i in given.ids]
    assert abs(matrix[present] - given.rows[[given.ids.index(i) for i in np.array(ids)[present]]]).sum() == 0


def test_a_hypothesis_missing_from_sbert_embeddings_is_embedded_with_their_model(tmp_path):
    pytest.importorskip("sentence_transformers")
    root = build_bee_vault(tmp_path / "vault")
    nodes = open_to_4a(open_vault(root))
    given = crafted(["H-3", "H-4", "H-5", "H-9"])
    with pytest.raises(HypographError, match="crafted-model"):  # the model of the given embeddings, not another
        rows(given, nodes)
    corpus = load_corpus(root)
    keep = [k for k, i in enumerate(corpus.ids) if i != "H-10"]
    real = embed([corpus.ids[k] for k in keep], [corpus.texts[k] for k in keep], "sbert")
    pairs = {(c.a, c.b): c.similarity for c in candidate_pairs(nodes, [], real, Net(k=1))}
    assert pairs[("H-9", "H-10")] > 0.99  # the same text, embedded by the same model


def test_4a_offline_needs_no_embeddings_and_a_model_run_refuses_none(tmp_path, client):
    root = build_bee_vault(tmp_path / "vault")
    run_dispositions(open_vault(root), [AUTO], None, OfflinePolicy())
    assert survivors(root) == {"H-9": ["H-10"]}
    with pytest.raises(HypographError, match="needs the hypotheses' embeddings"):
        run_dispositions(open_vault(root), [], None, ModelPolicy(client))
