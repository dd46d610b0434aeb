"""Hostile and different servers (tests/support/hostile_llm.py, on the local stub) through the real model
path: each ends as an outage or an invalid answer, handled by the step's policy, and the run
completes. The step here is pair adjudication (``adjudicate``: the offline decision is FLAG, to a
person) and cluster naming (the keyword label stands); a case batch records an outage as a retry
round with a due time."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from hostile_llm import (
    context_limited,
    cut_off,
    empty_choices,
    error_object,
    html_page,
    json_schema_refused,
    null_choices,
    random_bytes,
    string_usage,
    trickled,
    truncated,
)
from llm_stub import MODEL, adjudication_answer, adjudication_responder, answer, asked_pairs, llm_server  # noqa: F401
from pydantic import SecretStr

from hypograph.hypotheses import Hypothesis
from hypograph.llm import LLMClient, LLMConfig, usage_line
from hypograph.llm.budget import answer_budget, wire_schema
from hypograph.proximity.adjudicate import AdjudicationSettings, PairJudgements, adjudicate
from hypograph.proximity.cluster_names import name_clusters
from hypograph.proximity.communities import Clusters
from hypograph.proximity.dupes import DuplicatePair

DECIDER = f"model:{MODEL}"
TEXTS = {
    "H-1": ("Mites spread a wing virus", "Varroa mites spread deformed wing virus between colonies."),
    "H-2": ("Mites carry a wing virus", "Varroa mites carry deformed wing virus from colony to colony."),
    "H-3": ("Heat raises biting rates", "Warm nights raise the biting rate of Aedes mosquitoes in cities."),
    "H-4": ("Heat speeds mosquito feeding", "Warm city nights make Aedes mosquitoes feed more often."),
}
HYPS = {h: Hypothesis(id=h, title=t, statement=s, path=f"hypotheses/{h}.json") for h, (t, s) in TEXTS.items()}
PAIRS = [DuplicatePair(a="H-1", b="H-2", similarity=0.85), DuplicatePair(a="H-3", b="H-4", similarity=0.83)]


def client(stub, tmp_path: Path, **over) -> LLMClient:
    settings = {
        "model": MODEL,
        "base_url": stub.url,
        "api_key": SecretStr("none"),
        "timeout": 2.0,
        "max_retries": 1,
        "concurrency": 1,
        **over,
    }
    return LLMClient(LLMConfig(**settings), tmp_path / "state", "dedup_verdicts")


def traces(tmp_path: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "state" / "traces").glob("*/*/*.json"))]


def judge(c: LLMClient, batch_size: int = 1):
    return adjudicate(PAIRS, HYPS, {}, c, AdjudicationSettings(batch_size=batch_size))


def assert_flagged(decisions, *phrases: str) -> None:
    assert [d.verdict for d in decisions] == ["FLAG", "FLAG"]
    assert {d.decided_by for d in decisions} == {"policy"}
    for d in decisions:
        assert all(p in d.rationale for p in phrases), d.rationale


# -- bodies that are no chat completion: outages ------------------------------------------------------------


@pytest.mark.parametrize(
    "reply, phrase",
    [
        (html_page(), "not a chat completion (HTTP 200, text/html; charset=utf-8): not JSON: '<!DOCTYPE html>"),
        (random_bytes(), "not a chat completion (HTTP 200, application/json): 602 bytes that are not UTF-8"),
        (error_object(), "an error object"),
        (null_choices(), "no choices list"),
    ],
    ids=["html", "random-bytes", "error-object", "null-choices"],
)
def test_a_body_that_is_no_completion_is_an_outage_and_the_pairs_go_to_a_person(llm_server, tmp_path, reply, phrase):
    llm_server.always(reply)
    c = client(llm_server, tmp_path)
    decisions = judge(c)
    assert_flagged(decisions, "the model gave no usable answer", phrase)
    # one request and its retry; the second batch is not sent to an endpoint that is out
    assert len(llm_server.requests) == 2
    assert (c.usage.outages, c.usage.fallback, c.usage.failed_calls, c.usage.calls) == (1, 2, 2, 0)
    records = traces(tmp_path)
    assert len(records) == 2 and all(r["outcome"] == "error" and r["status"] == 200 for r in records)
    assert records[0]["headers"]["content-type"] == (reply.content_type)
    assert len(records[0]["body"]) <= 4096 and records[0]["response_format"] == "json_schema"
    line = usage_line(c.metadata())
    assert "0 calls" in line and "1 outage" in line and "2 decided offline instead" in line


def test_a_truncated_body_is_retried_as_transient(llm_server, tmp_path):
    llm_server.script(truncated(adjudication_answer({"messages": []})))
    llm_server.always(adjudication_responder("KEEP"))
    c = client(llm_server, tmp_path)
    decisions = judge(c)
    assert [d.decided_by for d in decisions] == [DECIDER, DECIDER]
    assert c.usage.failed_calls == 1 and traces(tmp_path)[0]["error"].startswith("APIConnectionError")


def test_string_usage_counts_what_is_a_number_and_notes_the_rest(llm_server, tmp_path):
    llm_server.always(lambda body: string_usage(adjudication_answer(body, "KEEP")))
    c = client(llm_server, tmp_path)
    decisions = judge(c)
    assert [d.decided_by for d in decisions] == [DECIDER, DECIDER]
    assert (c.usage.calls, c.usage.prompt_tokens, c.usage.completion_tokens) == (2, 24, 0)
    assert traces(tmp_path)[0]["usage_note"] == "usage completion_tokens not a number: counted 0"


def test_empty_choices_are_an_empty_answer_rejected_then_flagged(llm_server, tmp_path):
    llm_server.always(empty_choices())
    c = client(llm_server, tmp_path)
    decisions = judge(c)
    assert_flagged(decisions, "the model's answer was rejected (invalid answer after 3 attempts")
    assert c.usage.rejected == 2 and c.usage.fallback == 2 and len(llm_server.requests) == 6
    # the offline decision stands; a re-run is silent and says the rejection is cached
    again = client(llm_server, tmp_path)
    assert_flagged(judge(again), "rejected")
    assert len(llm_server.requests) == 6 and again.usage.cached_rejected == 2
    assert "2 rejected (2 from the cache: HYPOGRAPH_LLM_RETRY_REJECTED=1" in usage_line(again.metadata())
    # and asked again when told so
    assert_flagged(judge(client(llm_server, tmp_path, retry_rejected=True)), "rejected")
    assert len(llm_server.requests) == 12


# -- time and budget -----------------------------------------------------------------------------------------


def test_a_trickled_answer_meets_the_deadline_and_the_run_goes_on(llm_server, tmp_path):
    """42 pieces 0.1 s apart: every read is quick, the whole answer is not (the old timeout was per read)."""
    llm_server.always(lambda body: trickled(adjudication_answer(body, "KEEP")))
    c = client(llm_server, tmp_path, timeout=1.0)
    started = time.monotonic()
    decisions = judge(c)
    assert time.monotonic() - started < 4.5
    assert_flagged(decisions, "no answer within the deadline of 1 s")
    # no retry behind a server that may still be generating; the next question is asked (a long one
    # may be slow where a short one is not), and after two misses in a row nothing more
    assert len(llm_server.requests) == 2 and "no further request" in c._down


def test_an_answer_cut_off_by_the_budget_is_re_asked_with_the_budget_doubled(llm_server, tmp_path):
    llm_server.script(lambda body: cut_off('{"decisions": [{"pair": 1, "verdict": "KE'))
    llm_server.always(adjudication_responder("KEEP"))
    c = client(llm_server, tmp_path)
    decisions = judge(c)
    assert [d.decided_by for d in decisions] == [DECIDER, DECIDER]
    first, second, third = (r.body["max_tokens"] for r in llm_server.requests)
    assert second == 2 * first and third == first  # the next question has its own budget
    assert c.usage.cut_off == 1 and c.usage.reasked == 1
    assert "cut off at its budget" in llm_server.requests[1].last_user


def two_pairs_never_fit(body: dict):
    """A model whose answer for more than one pair runs past any budget."""
    if len(asked_pairs(body)) > 1:
        return cut_off('{"decisions": [{"pair": 1, "verdict": "KE')
    return answer(adjudication_answer(body, "KEEP"))


def test_a_batch_cut_off_below_what_its_schema_admits_is_asked_in_halves_and_a_re_run_asks_nothing(
    llm_server, tmp_path
):
    """A budget held down (here by a setting; as often by the context) below the longest answer
    the schema admits: cut off, cut off at the doubled budget (not asked a third time: at
    temperature 0 it would be cut off again), then asked one pair a question. The re-run finds the
    rejection cached as a budget one and halves again from the cache."""
    llm_server.always(two_pairs_never_fit)
    c = client(llm_server, tmp_path, validation_retries=2, max_tokens=150)
    decisions = judge(c, batch_size=2)
    assert [d.decided_by for d in decisions] == [DECIDER, DECIDER]
    budgets = [r.body["max_tokens"] for r in llm_server.requests]
    assert budgets == [150, 300, 150, 150]
    assert c.usage.cut_off == 2 and c.usage.rejected == 1 and c.usage.fallback == 0

    llm_server.reset()
    again = client(llm_server, tmp_path, max_tokens=150)
    assert [d.decided_by for d in judge(again, batch_size=2)] == [DECIDER, DECIDER]
    assert llm_server.requests == [] and again.usage.cached == 3 and again.usage.cached_rejected == 1


def test_a_huge_answer_writes_a_bounded_trace(llm_server, tmp_path):
    """A server that ignores the budget and sends megabytes: rejected as invalid, and each trace
    keeps the first and last TRACE_KEEP characters of it, saying how many were left out of how many."""
    from hypograph.llm.trace import TRACE_KEEP, TRACE_TEXT

    huge = '{"decisions": [' + " " * 3_000_000
    llm_server.always(answer(huge))
    assert_flagged(judge(client(llm_server, tmp_path, validation_retries=0)), "rejected")
    files = sorted((tmp_path / "state" / "traces").glob("*/*/*.json"))
    assert len(files) == 2 and all(p.stat().st_size < 3 * TRACE_TEXT for p in files)
    response = json.loads(files[0].read_text())["response"]
    left_out = len(huge) - TRACE_TEXT
    note = f"[…{left_out} characters left out of {len(huge)} characters…]"
    assert response == f"{huge[:TRACE_KEEP]} {note} {huge[-TRACE_KEEP:]}"


def test_a_runaway_answer_cut_off_beyond_what_its_schema_admits_is_rejected_not_halved(llm_server, tmp_path):
    """Cut off at the schema's longest answer and again at twice that, the answer is no answer of
    the schema's (a model repeating itself): rejected after the doubled re-ask, and not halved."""
    llm_server.always(two_pairs_never_fit)
    c = client(llm_server, tmp_path, validation_retries=2)
    assert_flagged(judge(c, batch_size=2), "cut off at its budget")
    budgets = [r.body["max_tokens"] for r in llm_server.requests]
    assert len(budgets) == 2 and budgets[1] == 2 * budgets[0]


def test_the_budget_is_sized_from_the_schema_and_the_wire_schema_is_grammar_friendly():
    schema = wire_schema(PairJudgements.model_json_schema())
    rationale = schema["$defs"]["PairJudgement"]["properties"]["rationale"]
    assert (
        rationale["maxLength"] == 240
        and PairJudgements.model_json_schema()["$defs"]["PairJudgement"]["properties"]["rationale"]["maxLength"] == 2000
    )
    one, four = answer_budget(schema, 1), answer_budget(schema, 4)
    assert 192 <= one < 400 and 3 * one < four < 1600  # a pair verdict needs a few hundred tokens


# -- structured output and context ----------------------------------------------------------------------------


def test_json_schema_refused_with_500_falls_back_to_json_object_with_the_schema(llm_server, tmp_path):
    llm_server.always(json_schema_refused(adjudication_responder("KEEP")))
    c = client(llm_server, tmp_path)
    decisions = judge(c)
    assert [d.decided_by for d in decisions] == [DECIDER, DECIDER]
    formats = [r.body.get("response_format", {}).get("type") for r in llm_server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]
    assert (
        llm_server.requests[1].body["response_format"]["schema"]["$defs"]["PairJudgement"]["properties"]["rationale"][
            "maxLength"
        ]
        == 240
    )
    assert c.metadata()["llm_structured_output"] == "json_object"
    assert "structured output json_object" in usage_line(c.metadata())
    # remembered for the endpoint and model: a new client starts with json_object
    judge(client(llm_server, tmp_path), batch_size=2)
    assert llm_server.requests[3].body["response_format"]["type"] == "json_object"


def test_a_batch_over_the_context_is_halved_and_a_pair_that_cannot_fit_is_refused_naming_the_limit(
    llm_server, tmp_path
):
    one_pair = 2600  # characters: the system prompt and one pair fit, two do not
    llm_server.always(context_limited(one_pair, 4096, adjudication_responder("KEEP")))
    c = client(llm_server, tmp_path)
    decisions = judge(c, batch_size=2)
    assert [d.decided_by for d in decisions] == [DECIDER, DECIDER]
    asked = [r.prompt.splitlines()[0] for r in llm_server.requests]
    assert asked == ["Adjudicate these 2 pair(s).", "Adjudicate these 1 pair(s).", "Adjudicate these 1 pair(s)."]
    assert c.usage.refused == 1 and c.usage.fallback == 0

    # an endpoint whose context is known to be small: nothing is sent, each pair is refused in one line
    small = client(llm_server, tmp_path / "small", context_length=400)
    decisions = judge(small)
    assert_flagged(
        decisions,
        "the question was not asked: prompt of about",
        "exceeds the context length of 400 tokens of stub-model@",
    )
    assert len(llm_server.requests) == 3 and small.usage.refused == 2


def test_cluster_names_fall_back_to_keywords_per_batch_and_never_fail(llm_server, tmp_path):
    clusters = Clusters(
        clusters={"C-01": ["H-1", "H-2"], "C-02": ["H-3", "H-4"]},
        algorithm="louvain",
        keywords={"C-01": "mites, virus", "C-02": "heat, mosquito"},
    )
    llm_server.always(html_page())
    c = client(llm_server, tmp_path)
    names = name_clusters(clusters, HYPS, c, batch_size=1)
    assert {k: (n["label"], n["decided_by"]) for k, n in names.items()} == {
        "C-01": ("mites, virus", "keywords"),
        "C-02": ("heat, mosquito", "keywords"),
    }
    assert c.usage.fallback == 2 and len(llm_server.requests) == 2


# -- a case batch: an outage is a retry round with a due time ---------------------------------------------------


def test_a_case_batch_against_an_html_page_is_a_retry_round_with_a_due_time(llm_server, tmp_path):
    from case_support import builder_for, make_case, package_id

    from hypograph.case import Status

    case = make_case(tmp_path / "cases")
    llm_server.always(html_page())
    result = asyncio.run(builder_for(case, [llm_server.url]).build(case.name, package_id(case), None))
    assert result.status is Status.RETRY_PENDING and result.due_at
    dispatch = json.loads((case / "analysis/hypotheses/0001/dispatch.json").read_text())
    assert dispatch["due_at"] == result.due_at
    [record] = [json.loads(p.read_text()) for p in (case / ".hypograph" / "traces").rglob("*.json")]
    assert record["status"] == 200 and record["body"].startswith("<!DOCTYPE html>")


def test_answers_are_still_plain_answers(llm_server, tmp_path):
    llm_server.always(answer({"decisions": []}))
    c = client(llm_server, tmp_path, validation_retries=0)
    assert_flagged(judge(c), "rejected")


def test_a_re_ask_quotes_the_first_1000_characters_of_a_runaway_answer(llm_server, tmp_path):
    runaway = "{" + '"decisions": [' + " " * 9000
    llm_server.script(answer(runaway))
    llm_server.always(adjudication_responder("KEEP"))
    decisions = judge(client(llm_server, tmp_path))
    assert [d.decided_by for d in decisions] == [DECIDER, DECIDER]
    reask = llm_server.requests[1].messages
    assert reask[2] == {"role": "assistant", "content": runaway[:1000] + f" […{len(runaway) - 1000} more characters]"}
    assert reask[3]["content"].startswith("That answer is invalid: answer: Invalid JSON")


def test_a_cut_off_answer_is_re_asked_within_the_context_and_rejected_when_it_cannot_be(llm_server, tmp_path):
    llm_server.always(lambda body: cut_off('{"decisions": [{"pair": 1, "verdict": "KE'))
    c = client(llm_server, tmp_path, context_length=1100)
    decisions = judge(c)
    budgets = [r.body["max_tokens"] for r in llm_server.requests]
    assert budgets[0] < budgets[1] < 2 * budgets[0]  # doubled only as far as the context leaves room
    assert_flagged(decisions, "cut off at its budget")
    assert c.usage.refused == 0  # a re-ask that cannot fit ends the item as rejected, not "not asked"


def test_a_case_prompt_over_the_context_is_no_outage_retried_for_rounds(llm_server, tmp_path):
    from case_support import builder_for, make_case, package_id

    from hypograph.case import Status

    case = make_case(tmp_path / "cases")
    llm_server.always(context_limited(100, 2048, answer("{}")))
    result = asyncio.run(builder_for(case, [llm_server.url]).build(case.name, package_id(case), None))
    assert result.status is not Status.RETRY_PENDING, result.message
    assert "context length (2048 tokens)" in result.message
    assert len(llm_server.requests) == 1


def test_a_budget_larger_than_the_context_leaves_is_lowered_to_what_it_leaves(llm_server, tmp_path):
    llm_server.always(adjudication_responder("KEEP"))
    from hypograph.llm.budget import estimate_tokens
    from hypograph.proximity.adjudicate import _request

    schema_budget = answer_budget(wire_schema(PairJudgements.model_json_schema(), 1), 1)
    c = client(llm_server, tmp_path)
    prompt = max(estimate_tokens(c._messages(_request([p], HYPS))) for p in PAIRS)
    c = client(llm_server, tmp_path, context_length=prompt + schema_budget - 5)
    assert [d.decided_by for d in judge(c)] == [DECIDER, DECIDER]
    sent = [r.body["max_tokens"] for r in llm_server.requests]
    assert all(schema_budget // 4 <= b < schema_budget for b in sent), (sent, schema_budget)


def test_a_400_naming_the_context_is_asked_again_within_it_when_the_prompt_fits(llm_server, tmp_path):
    llm_server.script(context_limited(0, 1200, answer("{}")))  # the first request: over the window
    llm_server.always(adjudication_responder("KEEP"))
    c = client(llm_server, tmp_path, max_retries=0)
    assert [d.decided_by for d in judge(c, batch_size=2)] == [DECIDER, DECIDER]
    budgets = [r.body["max_tokens"] for r in llm_server.requests]
    assert len(budgets) == 2 and budgets[1] < budgets[0]  # the same question, its budget within 1,200 tokens
