"""4a questions that an endpoint's context cannot take are asked in halves, down to one pair or one
hypothesis a question, and every item is still decided by the model (the same policy path as the
proximity adjudication's halving, tests/test_llm_hostile.py)."""

from __future__ import annotations

from llm_stub import Reply, answer, llm_env, llm_server, merge_answer, merge_pairs  # noqa: F401
from test_structure import build_bee_vault, failures, run_job, system_of, tagged

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
