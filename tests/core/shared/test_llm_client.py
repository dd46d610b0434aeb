"""The LLM client (hypograph.llm) through the real ``openai`` client against a local stub endpoint.

Nothing here reaches the network: every endpoint is the 127.0.0.1 stub of ``llm_stub`` or a
localhost port nobody listens on.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from pathlib import Path

import pytest
from conftest import env_config
from llm_stub import (  # noqa: F401  (fixtures)
    API_KEY,
    MODEL,
    Reply,
    answer,
    bad_request,
    dropped,
    invalid_json,
    llm_env,
    llm_offline,
    llm_server,
    rate_limited,
    server_error,
    sleeping,
    slow,
    unused_port,
    without_response_format,
)
from pydantic import BaseModel

from hypograph.environment import llm_config
from hypograph.errors import HypographError
from hypograph.llm import LLMClient, LLMConfig, Rejected
from hypograph.llm.client import UNTRUSTED_NOTE, Request


class Score(BaseModel):
    value: int
    comment: str


GOOD = {"value": 7, "comment": "seven"}


def odd_only(answer: Score) -> None:
    if answer.value % 2 == 0:
        raise ValueError(f"value {answer.value} must be odd")


def question(user: str = "Score this.", name: str = "score", check=None) -> Request[Score]:
    return Request(name=name, system="You score things.", user=user, schema=Score, check=check)


@pytest.fixture
def state(tmp_path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def make_client(state):
    """``make_client(task="test")``: a client configured from the (monkeypatched) environment."""

    def make(task: str = "test") -> LLMClient:
        return LLMClient(llm_config(), state, task)

    return make


@pytest.fixture
def stub(llm_server, llm_env):
    """The stub, with the environment pointing at it (timeout 1 s, 2 retries)."""
    llm_env(llm_server)
    return llm_server


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def trace_files(state: Path, task: str = "test") -> list[Path]:
    return sorted((state / "traces" / task).glob("*/*.json"))


def cache_entries(state: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (state / "cache" / "llm").rglob("*.json")]


# -- configuration ------------------------------------------------------------------------------------


def test_config_reads_hypograph_variables(monkeypatch):
    cfg = env_config(
        monkeypatch,
        {
            "HYPOGRAPH_LLM_MODEL": "m1",
            "HYPOGRAPH_LLM_BASE_URL": "http://127.0.0.1:9/v1",
            "HYPOGRAPH_LLM_API_KEY": API_KEY,
            "HYPOGRAPH_LLM_TIMEOUT": "2.5",
            "HYPOGRAPH_LLM_MAX_RETRIES": "0",
            "HYPOGRAPH_LLM_CONCURRENCY": "3",
        },
    )
    assert (cfg.model, cfg.base_url, cfg.timeout, cfg.max_retries, cfg.concurrency) == (
        "m1",
        "http://127.0.0.1:9/v1",
        2.5,
        0,
        3,
    )
    assert cfg.api_key.get_secret_value() == API_KEY
    assert not cfg.offline
    assert cfg.describe() == "m1@http://127.0.0.1:9/v1"
    assert API_KEY not in repr(cfg) and API_KEY not in str(cfg.model_dump())


def test_config_defaults(monkeypatch):
    cfg = env_config(monkeypatch, {"HYPOGRAPH_LLM_MODEL": "m1"})
    assert (cfg.base_url, cfg.api_key.get_secret_value(), cfg.timeout, cfg.max_retries, cfg.concurrency) == (
        None,
        "none",
        120.0,
        3,
        4,
    )
    assert cfg.describe() == "m1@api.openai.com"


def test_config_reads_the_budget_context_format_and_retry_settings(monkeypatch):
    cfg = env_config(
        monkeypatch,
        {
            "HYPOGRAPH_LLM_MODEL": "m1",
            "HYPOGRAPH_LLM_MAX_TOKENS": "900",
            "HYPOGRAPH_LLM_CONTEXT_LENGTH": "8192",
            "HYPOGRAPH_LLM_STRUCTURED_OUTPUT": "json_object",
            "HYPOGRAPH_LLM_RETRY_REJECTED": "1",
        },
    )
    assert (cfg.max_tokens, cfg.context_length, cfg.structured_output, cfg.retry_rejected) == (
        900,
        8192,
        "json_object",
        True,
    )
    defaults = LLMConfig(model="m1")  # keyword fields, as the Dagster resource builds it
    assert (defaults.max_tokens, defaults.context_length, defaults.structured_output, defaults.retry_rejected) == (
        None,
        None,
        "auto",
        False,
    )
    with pytest.raises(HypographError, match="HYPOGRAPH_LLM_STRUCTURED_OUTPUT"):
        env_config(monkeypatch, {"HYPOGRAPH_LLM_MODEL": "m1", "HYPOGRAPH_LLM_STRUCTURED_OUTPUT": "xml"})


def test_config_falls_back_to_openai_variables(monkeypatch):
    cfg = env_config(
        monkeypatch,
        {
            "HYPOGRAPH_LLM_MODEL": "m1",
            "OPENAI_BASE_URL": "http://127.0.0.1:8/v1",
            "OPENAI_API_KEY": "sk-openai-key-123",
        },
    )
    assert cfg.base_url == "http://127.0.0.1:8/v1"
    assert cfg.api_key.get_secret_value() == "sk-openai-key-123"


def test_hypograph_variables_win_over_openai_variables(monkeypatch):
    cfg = env_config(
        monkeypatch,
        {
            "HYPOGRAPH_LLM_MODEL": "m1",
            "HYPOGRAPH_LLM_BASE_URL": "http://127.0.0.1:9/v1",
            "HYPOGRAPH_LLM_API_KEY": API_KEY,
            "OPENAI_BASE_URL": "http://127.0.0.1:8/v1",
            "OPENAI_API_KEY": "sk-openai-key-123",
        },
    )
    assert cfg.base_url == "http://127.0.0.1:9/v1"
    assert cfg.api_key.get_secret_value() == API_KEY


@pytest.mark.parametrize(
    "env", [{}, {"HYPOGRAPH_LLM_MODEL": ""}, {"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": "http://127.0.0.1:8/v1"}]
)
def test_offline_when_model_unset(env, tmp_path, monkeypatch):
    cfg = env_config(monkeypatch, env)
    assert cfg.offline
    assert cfg.describe() == "offline (HYPOGRAPH_LLM_MODEL not set)"
    client = LLMClient(cfg, tmp_path, "test")
    assert client.offline
    assert client.metadata()["llm"] == "offline"
    with pytest.raises(HypographError, match="no model configured"):
        client.ask(question())


def test_forced_offline_beats_a_configured_model(tmp_path, monkeypatch):
    cfg = env_config(monkeypatch, {"HYPOGRAPH_LLM_MODEL": "m1"}, offline=True)
    assert cfg.offline and cfg.describe() == "offline (forced)"
    assert LLMClient(cfg, tmp_path, "test").offline


def test_offline_from_the_process_environment(llm_offline):
    assert llm_config().offline


@pytest.mark.parametrize(
    "name, raw",
    [("HYPOGRAPH_LLM_TIMEOUT", "soon"), ("HYPOGRAPH_LLM_MAX_RETRIES", "2.5"), ("HYPOGRAPH_LLM_CONCURRENCY", "many")],
)
def test_unparseable_number_names_the_variable(name, raw, monkeypatch):
    with pytest.raises(HypographError, match=f"{name}: must be a (whole )?number .*got '{raw}'"):
        env_config(monkeypatch, {"HYPOGRAPH_LLM_MODEL": "m1", name: raw})


@pytest.mark.parametrize(
    "name, raw",
    [("HYPOGRAPH_LLM_TIMEOUT", "0"), ("HYPOGRAPH_LLM_MAX_RETRIES", "-1"), ("HYPOGRAPH_LLM_CONCURRENCY", "0")],
)
def test_out_of_range_number_names_the_variable(name, raw, monkeypatch):
    with pytest.raises(HypographError, match=name):
        env_config(monkeypatch, {"HYPOGRAPH_LLM_MODEL": "m1", name: raw})


# -- a valid answer -----------------------------------------------------------------------------------------


def test_valid_answer_is_validated_into_the_schema(stub, make_client):
    stub.script(answer(GOOD))
    client = make_client()
    result = client.ask(question("Score the number seven."))
    assert result == Score(**GOOD)
    [req] = stub.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {API_KEY}"
    assert req.body["model"] == MODEL and req.body["temperature"] == 0
    assert req.messages[-1] == {"role": "user", "content": "Score the number seven."}
    assert "You score things." in req.system and UNTRUSTED_NOTE in req.system
    assert json.dumps(Score.model_json_schema(), sort_keys=True) in req.system, "the schema is always in the prompt"
    fmt = req.body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Score" and fmt["json_schema"]["schema"] == Score.model_json_schema()
    assert (client.usage.calls, client.usage.cached, client.usage.rejected) == (1, 0, 0)
    assert client.usage.prompt_tokens > 0 and client.usage.completion_tokens > 0
    meta = client.metadata()
    assert meta["llm"] == MODEL and meta["llm_calls"] == 1 and meta["llm_endpoint"] == f"{MODEL}@{stub.url}"


def test_answer_in_a_markdown_fence_is_accepted(stub, make_client):
    stub.script(answer("```json\n" + json.dumps(GOOD) + "\n```"))
    assert make_client().ask(question()) == Score(**GOOD)


def test_without_structured_outputs_falls_back_to_plain_json(stub, make_client, state):
    stub.always(without_response_format(answer(GOOD)))
    client = make_client()
    assert client.ask(question("first")) == Score(**GOOD)
    first, second, third = stub.requests
    assert first.has_response_format and first.body["response_format"]["type"] == "json_schema"
    # llama.cpp's own structured mode next: json_object with the schema
    assert second.body["response_format"]["type"] == "json_object" and "schema" in second.body["response_format"]
    assert not third.has_response_format
    assert second.messages == third.messages == first.messages
    assert client.metadata()["llm_structured_output"] == "prompt"
    # The client remembers, across runs too: later questions go out as plain JSON straight away.
    assert make_client().ask(question("second")) == Score(**GOOD)
    assert len(stub.requests) == 4 and not stub.requests[3].has_response_format


def test_a_bad_request_naming_the_context_is_a_refusal_naming_the_limit(stub, make_client):
    stub.always(bad_request("This model's maximum context length is 2048 tokens. However, you requested 9000"))
    result = make_client().ask(question())
    assert isinstance(result, Rejected) and result.kind == "context"
    assert "context length (2048 tokens)" in result.reason
    assert [r.has_response_format for r in stub.requests] == [True]  # not a format problem: no fallback


# -- invalid answers: re-ask, then reject ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, error",
    [
        (invalid_json(), "Invalid JSON"),
        (answer({"value": "seven", "comment": "x"}), "value: Input should be a valid integer"),
        (answer({"value": 8, "comment": "eight"}), "value 8 must be odd"),
    ],
    ids=["invalid-json", "schema-invalid", "check-failing"],
)
def test_invalid_answer_is_re_asked_with_the_error(bad, error, stub, make_client):
    stub.script(bad, answer(GOOD))
    client = make_client()
    assert client.ask(question(check=odd_only)) == Score(**GOOD)
    first, second = stub.requests
    assert second.messages[:2] == first.messages
    assert second.messages[2] == {"role": "assistant", "content": bad.content}
    assert second.last_user.startswith("That answer is invalid:") and error in second.last_user
    # and it is told what to send instead
    assert second.last_user.endswith("\nAnswer again: one JSON object matching the schema.")
    assert (client.usage.calls, client.usage.invalid_answers, client.usage.rejected) == (2, 1, 0)


def test_always_invalid_answer_is_rejected_and_never_cached_as_an_answer(stub, make_client, state):
    stub.always(answer({"value": 8, "comment": "eight"}))
    client = make_client()
    attempts = 1 + client.config.validation_retries
    result = client.ask(question(check=odd_only))
    assert isinstance(result, Rejected)
    assert result.attempts == attempts == len(stub.requests)
    assert result.reason == f"invalid answer after {attempts} attempts: value 8 must be odd"
    assert client.usage.rejected == 1 and client.usage.invalid_answers == attempts
    assert not cache_entries(state)
    # A rejected answer is never cached: a repeat asks the model again.
    again = make_client().ask(question(check=odd_only))
    assert isinstance(again, Rejected) and again.reason == result.reason
    assert len(stub.requests) == 2 * attempts


# -- transport errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [rate_limited("0"), rate_limited(None), server_error(500), server_error(503), dropped()],
    ids=["429-retry-after-0", "429", "500", "503", "dropped-connection"],
)
def test_transient_failure_then_success(failure, stub, make_client):
    stub.script(failure, answer(GOOD))
    client = make_client()
    assert client.ask(question()) == Score(**GOOD)
    assert len(stub.requests) == 2
    assert stub.requests[1].messages == stub.requests[0].messages, "the same request retried, not a re-ask"
    assert client.usage.calls == 1 and client.usage.failed_calls == 1, "one answered call"


def test_persistent_server_error_raises_after_retries(stub, make_client, state):
    stub.always(server_error(500))
    client = make_client()
    with pytest.raises(HypographError) as info:
        client.ask(question())
    assert len(stub.requests) == 1 + client.config.max_retries
    message = str(info.value)
    assert f"LLM endpoint {MODEL}@{stub.url} failed after 2 retries" in message and "InternalServerError" in message
    records = [json.loads(t.read_text()) for t in trace_files(state)]  # every attempt is traced
    assert len(records) == 3
    assert all(r["outcome"] == "error" and "InternalServerError" in r["error"] and r["status"] == 500 for r in records)
    assert all("content-type" in r["headers"] and "had an error" in r["body"] for r in records)
    assert not cache_entries(state), "an endpoint failure is not cached"


def test_a_missed_deadline_is_an_outage_without_a_retry(llm_server, llm_env, make_client, state):
    llm_env(llm_server, timeout=0.5, max_retries=1)
    llm_server.always(slow(3, GOOD))
    started = time.monotonic()
    with pytest.raises(HypographError, match="no answer within the deadline of 0.5 s"):
        make_client().ask(question())
    assert time.monotonic() - started < 1.5
    assert len(llm_server.requests) == 1  # the server may still be generating: a retry would queue
    time.sleep(1)  # and none is sent later either, by the request left behind
    assert len(llm_server.requests) == 1
    [record] = [json.loads(t.read_text()) for t in trace_files(state)]
    assert record["outcome"] == "error" and record["error"] == "no complete answer within 0.5 s"


def test_retry_after_is_honoured_before_the_retry(stub, make_client):
    stub.script(rate_limited("1"), answer(GOOD))
    started = time.monotonic()
    assert make_client().ask(question()) == Score(**GOOD)
    assert len(stub.requests) == 2 and time.monotonic() - started >= 0.95


def test_unreachable_endpoint_raises_a_clear_error(llm_env, make_client, state):
    url = f"http://127.0.0.1:{unused_port()}/v1"
    llm_env(url, max_retries=1)
    with pytest.raises(HypographError) as info:
        make_client().ask(question())
    message = str(info.value)
    assert message.startswith(f"LLM endpoint {MODEL}@{url} failed after 1 retries: APIConnectionError")
    assert API_KEY not in message
    assert not cache_entries(state)


# -- cache ------------------------------------------------------------------------------------------------------


def test_identical_question_is_answered_from_the_cache(stub, make_client):
    stub.always(answer(GOOD))
    first = make_client()
    assert first.ask(question()) == Score(**GOOD)
    assert len(stub.requests) == 1
    second = make_client()
    assert second.ask(question()) == Score(**GOOD)
    assert len(stub.requests) == 1, "a cache hit makes no HTTP request"
    assert (second.usage.calls, second.usage.cached) == (0, 1)
    assert second.ask(question("Score something else.")) == Score(**GOOD)
    assert len(stub.requests) == 2, "a different question is not a hit"


def test_cache_is_per_model(stub, llm_env, make_client):
    stub.always(answer(GOOD))
    make_client().ask(question())
    llm_env(stub, model="other-model")
    make_client().ask(question())
    assert [r.body["model"] for r in stub.requests] == [MODEL, "other-model"]


# -- traces --------------------------------------------------------------------------------------------------------


def test_traces_record_each_call_per_client_run(stub, make_client, state):
    stub.script(invalid_json(), answer(GOOD))
    stub.always(answer({"value": 9, "comment": "nine"}))
    client = make_client("score_task")
    client.ask(question(name="item one"))
    client.ask(question("Another.", name="item/two"))
    run = state / "traces" / "score_task" / f"{dt.date.today().isoformat()}_run01"
    assert sorted(p.name for p in run.iterdir()) == ["0001-item_one.json", "0002-item_one.json", "0003-item_two.json"]
    record = json.loads((run / "0002-item_one.json").read_text())
    assert record["model"] == MODEL and record["attempt"] == 2 and record["outcome"] == "answered"
    assert record["messages"] == stub.requests[1].messages
    assert json.loads(record["response"]) == GOOD
    assert set(record["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert isinstance(record["latency_s"], float) and record["latency_s"] >= 0

    make_client("score_task").ask(question("A third."))
    run2 = run.with_name(run.name.replace("_run01", "_run02"))
    assert [p.name for p in run2.iterdir()] == ["0001-score.json"]


def test_the_rejected_structured_output_call_is_traced(stub, make_client, state):
    stub.always(without_response_format(answer(GOOD)))
    make_client().ask(question())
    assert len(trace_files(state)) == len(stub.requests) == 3


def test_cache_hits_write_no_trace(stub, make_client, state):
    stub.always(answer(GOOD))
    make_client().ask(question())
    make_client().ask(question())
    assert len(trace_files(state)) == 1


# -- the key never leaks ------------------------------------------------------------------------------------------


def test_api_key_appears_in_no_file_message_or_metadata(stub, make_client, state):
    echo = Reply(status=401, error=f"Incorrect API key provided: {API_KEY}")
    stub.script(answer(GOOD), invalid_json(f"not json, but your key is {API_KEY}"), answer(GOOD), echo)
    client = make_client()
    client.ask(question("one"))
    client.ask(question("two"))
    with pytest.raises(HypographError) as info:
        client.ask(question("three"))
    assert "Incorrect API key provided: ***" in str(info.value)
    texts = [str(info.value), json.dumps(client.metadata()), client.config.describe(), repr(client.config)]
    texts += [p.read_text(encoding="utf-8", errors="replace") for p in files_under(state)]
    assert len(files_under(state)) >= 5
    assert not [t for t in texts if API_KEY in t]


# -- concurrency ---------------------------------------------------------------------------------------------------


def test_ask_many_overlaps_requests_and_keeps_order(stub, make_client):
    def echo_number(body: dict) -> Reply:
        n = int(re.search(r"item (\d+)", body["messages"][-1]["content"]).group(1))
        return answer({"value": n, "comment": f"item {n}"})

    stub.always(sleeping(0.3, echo_number))
    client = make_client()
    results = client.ask_many([question(f"item {n}", name=f"item-{n}") for n in range(4)])
    assert [r.value for r in results] == [0, 1, 2, 3]
    assert len(stub.requests) == 4
    assert stub.max_in_flight >= 2
    assert client.usage.calls == 4


def test_concurrency_one_is_sequential(stub, llm_env, make_client):
    llm_env(stub, concurrency=1)
    stub.always(sleeping(0.05, answer(GOOD)))
    make_client().ask_many([question(f"item {n}") for n in range(3)])
    assert len(stub.requests) == 3 and stub.max_in_flight == 1


def test_endpoint_description_hides_credentials_in_the_url():
    config = LLMConfig(model="m", base_url="http://user:token@[::1]:8000/v1?api-key=secret")
    assert config.describe() == "m@http://[::1]:8000/v1"


def test_placeholder_keys_of_local_servers_are_not_redacted_from_text():
    from hypograph.llm.trace import redact

    assert redact("served by ollama", LLMConfig(api_key="ollama")) == "served by ollama"
    assert redact("key sk-real-123456 leaked", LLMConfig(api_key="sk-real-123456")) == "key *** leaked"
