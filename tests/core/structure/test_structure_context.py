"""4a questions that an endpoint's context cannot take are asked in halves, down to one pair or one
hypothesis a question, and every item is still decided by the model (the same policy path as the
proximity adjudication's halving, tests/core/shared/test_llm_hostile.py)."""

from __future__ import annotations

from llm_stub import Reply, answer, llm_env, llm_server, merge_answer, merge_pairs  # noqa: F401
from test_structure import build_bee_vault, failures, run_job, system_of, tagged

from hypograph.llm import usage_line
from hypograph.structure.dispositions import MERGE_SYSTEM, read_ledger

LIMIT = "Requested tokens (9000) exceed context window of 4096"  # llama.cpp's words


def test_4a_questions_over_the_context_are_halved_until_they_fit(tmp_path, llm_server, llm_env):
    root = build_bee_vault(tmp_path / "vault")
    llm_env(llm_server)

    def respond(body: dict):
        if system_of(body).startswith(MERGE_SYSTEM):
            if len(merge_pairs(body)) > 1:  # only a one-pair question fits this endpoint
                return Reply(status=400, error=LIMIT)
            return answer(merge_answer(body))
        hypotheses = tagged(body, "hypothesis")
        if len(hypotheses) > 2:
            return Reply(status=400, error=LIMIT)
        return answer(
            {
                "items": [
                    {"hypothesis": int(a["number"]), "off_topic": False, "drop_reason": None} for a, _ in hypotheses
                ]
            }
        )

    llm_server.always(respond)
    result = run_job(root, offline=False)
    assert result.success and failures(root) == {}
    ledger = read_ledger(root)
    assert len(ledger.pairs) == 10 and len(ledger.topics) == 5
    assert {d.decided_by for d in [*ledger.pairs.values(), *ledger.topics.values()]} == {"model:stub-model"}
    merge_asks = [r for r in llm_server.requests if system_of(r.body).startswith(MERGE_SYSTEM)]
    answered = [r for r in merge_asks if len(merge_pairs(r.body)) == 1]
    assert len(answered) == 10  # each pair once, in a question of its own
    assert len(merge_asks) > len(answered)  # the larger questions were refused, then halved


DECLINED = {"H-9", "H-10"}  # every answer about this pair is invalid


def runaway(body: dict):
    """A weak model: more than one pair never fits the budget, and it cannot judge H-9/H-10."""
    from hostile_llm import cut_off

    if system_of(body).startswith(MERGE_SYSTEM):
        if len(merge_pairs(body)) > 1:
            return cut_off('{"decisions": [{"pair": 1, "decision": "KE')
        if {a for _, x, y in merge_pairs(body) for a in (x, y)} == DECLINED:
            return answer(merge_answer(body, lambda a, b: {"rationale": "short"}))  # under 10 characters
        return answer(merge_answer(body))
    items = [
        {"hypothesis": int(a["number"]), "off_topic": False, "drop_reason": None} for a, _ in tagged(body, "hypothesis")
    ]
    return answer({"items": items})


def test_4a_answers_cut_off_are_halved_and_a_pair_the_model_declined_is_not_asked_again(
    tmp_path, llm_server, llm_env, monkeypatch
):
    """A question whose answer does not fit a budget held below what the schema admits (cut off,
    then cut off at the doubled budget) is asked as two halves; a pair whose every answer is invalid
    is decided offline, on record as declined by that model, and a second run asks nothing (at
    temperature 0 it would answer the same)."""
    from hypograph.structure.dispositions.ledger import pair_key

    root = build_bee_vault(tmp_path / "vault")
    llm_env(llm_server)
    monkeypatch.setenv("HYPOGRAPH_LLM_MAX_TOKENS", "150")
    llm_server.always(runaway)
    result = run_job(root, offline=False)
    assert result.success and failures(root) == {}
    by = {k: (d.decided_by, d.declined_by) for k, d in read_ledger(root).pairs.items()}
    assert by.pop(pair_key("H-9", "H-10")) == ("policy", "model:stub-model")
    assert len(by) == 9 and set(by.values()) == {("model:stub-model", None)}
    merge_asks = [r for r in llm_server.requests if system_of(r.body).startswith(MERGE_SYSTEM)]
    sizes = [len(merge_pairs(r.body)) for r in merge_asks]
    eights = [r.body["max_tokens"] for r in merge_asks if len(merge_pairs(r.body)) == 8]
    assert eights == [150, 300]  # cut off, doubled once, cut off again: asked in halves, not a third time
    assert (
        sorted(set(sizes)) == [1, 2, 4, 8] and sizes.count(1) == 10 + 2
    )  # each pair alone; the declined one re-asked twice

    llm_server.reset()
    assert run_job(root, offline=False).success
    assert llm_server.requests == []  # nothing new, and the declined pair is not asked again


def test_what_a_policy_is_asked_again_of_the_pairs_decided_offline(tmp_path, llm_server):
    """Offline decisions made without a model or after an outage (no declined_by), or declined by
    another model, are put to the model; not what this model declined, unless asked to."""
    from hypograph.llm.client import LLMClient
    from hypograph.llm.config import LLMConfig
    from hypograph.llm.policy import ModelPolicy, OfflinePolicy
    from hypograph.structure.dispositions.judging import _pairs_to_judge
    from hypograph.structure.dispositions.ledger import Ledger, PairDecision, pair_key

    pairs = {("H-1", "H-2"): None, ("H-1", "H-3"): "model:stub-model", ("H-2", "H-3"): "model:other"}
    ledger = Ledger(
        pairs={
            pair_key(a, b): PairDecision(
                pair=(a, b), decision="KEEP", rationale="r", decided_by="policy", declined_by=d
            )
            for (a, b), d in pairs.items()
        }
    )
    candidates = [type("C", (), {"a": a, "b": b, "human": None})() for a, b in pairs]

    def todo(policy) -> list[tuple[str, str]]:
        return [(c.a, c.b) for c in _pairs_to_judge(candidates, ledger, policy)]

    config = LLMConfig(model="stub-model", base_url=llm_server.url)
    model = LLMClient(config, tmp_path / "state", "hypothesis_dispositions")
    assert todo(ModelPolicy(model)) == [("H-1", "H-2"), ("H-2", "H-3")] and model.usage.declined == 1
    line = usage_line(model.metadata())
    assert "1 kept offline as this model declined them before (HYPOGRAPH_LLM_RETRY_REJECTED=1" in line
    again = LLMClient(config.model_copy(update={"retry_rejected": True}), tmp_path / "state", "x")
    assert len(todo(ModelPolicy(again))) == 3 and todo(OfflinePolicy()) == []
