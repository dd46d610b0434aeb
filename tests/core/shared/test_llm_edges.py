"""The LLM client's edges, found by mutation testing (``make mutation``): the exact error lines
per HTTP status, what each trace records (errors included), token and cache counters over several
calls, the cache key's formula, answers without choices, content or usage, how ``ask_many``
uses threads, the delimiting of untrusted text, and the redaction of short keys. Everything goes
through the real ``openai`` client against the local stub of ``llm_stub`` (never the network)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
from pathlib import Path

import llm_stub
import pytest
from conftest import env_config
from llm_stub import API_KEY, MODEL, Reply, answer, bad_request, llm_env, llm_server, rate_limited, sleeping  # noqa: F401
from pydantic import BaseModel

from hypograph.environment import llm_config
from hypograph.errors import HypographError
from hypograph.llm import LLMClient, LLMConfig, Rejected
from hypograph.llm.client import Request, untrusted
from hypograph.llm.trace import new_run_dir, redact, safe_name


class Score(BaseModel):
    value: int
    comment: str


class Dated(BaseModel):
    day: dt.date
    tags: tuple[str, ...]


class Inner(BaseModel):
    n: int


class Six(BaseModel):
    a: int
    b: int
    c: int
    d: int
    e: int
    f: int
    inner: Inner | None = None


GOOD = {"value": 7, "comment": "seven"}


def question(user: str = "Score this.", name: str = "score", schema=Score, check=None) -> Request:
    return Request(name=name, system="You score things.", user=user, schema=schema, check=check)


@pytest.fixture
def state(tmp_path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def stub(llm_server, llm_env):
    llm_env(llm_server)
    return llm_server


def client(state: Path, task: str = "test") -> LLMClient:
    return LLMClient(llm_config(), state, task)


def traces(state: Path, task: str = "test") -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((state / "traces" / task).glob("*/*.json"))]


# -- configuration ---------------------------------------------------------------------------------


def test_an_empty_variable_means_its_default(monkeypatch):
    cfg = env_config(
        monkeypatch,
        {
            "HYPOGRAPH_LLM_MODEL": "m",
            "HYPOGRAPH_LLM_TIMEOUT": "",
            "HYPOGRAPH_LLM_MAX_RETRIES": "",
            "HYPOGRAPH_LLM_CONCURRENCY": "",
        },
    )
    assert (cfg.timeout, cfg.max_retries, cfg.concurrency) == (120.0, 3, 4)


def test_asking_offline_is_refused_in_one_line(state):
    with pytest.raises(HypographError) as err:
        LLMClient(LLMConfig(), state, "t").ask(question())
    assert str(err.value) == "no model configured (set HYPOGRAPH_LLM_MODEL) — use the offline policy"


# -- the request ------------------------------------------------------------------------------------


def test_structured_output_is_asked_for_without_strict_mode(stub, state):
    stub.script(answer(GOOD))
    client(state).ask(question())
    assert stub.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Score", "schema": Score.model_json_schema(), "strict": False},
    }


def test_the_cache_key_is_sha256_of_model_messages_and_schema(stub, state):
    """The documented formula: a re-run on unchanged input finds the answer an earlier version cached."""
    stub.script(answer(GOOD))
    c = client(state)
    request = question()
    c.ask(request)
    blob = json.dumps(
        {"model": MODEL, "messages": c._messages(request), "schema": Score.model_json_schema()}, sort_keys=True
    )
    key = hashlib.sha256(blob.encode("utf-8")).hexdigest()
    assert [p.relative_to(state) for p in (state / "cache" / "llm").rglob("*.json")] == [
        Path("cache/llm") / key[:2] / f"{key}.json"
    ]


def test_an_answer_with_dates_and_tuples_is_cached_as_json_and_read_back(stub, state):
    stub.script(answer({"day": "2024-02-29", "tags": ["a", "b"]}))
    first = client(state).ask(question(schema=Dated))
    again = client(state).ask(question(schema=Dated))
    assert first == again == Dated(day=dt.date(2024, 2, 29), tags=("a", "b"))
    [entry] = [json.loads(p.read_text()) for p in (state / "cache" / "llm").rglob("*.json")]
    assert entry == {"answer": {"day": "2024-02-29", "tags": ["a", "b"]}}


# -- counters over several calls ---------------------------------------------------------------------


def test_counters_add_up_over_calls(stub, state):
    stub.always(answer({"value": 8, "comment": "even"}))
    c = client(state)
    odd = lambda a: (_ for _ in ()).throw(ValueError("odd only"))  # noqa: E731 - every answer fails the check
    first = c.ask(question("one", check=odd))
    second = c.ask(question("two", check=odd))
    assert isinstance(first, Rejected) and isinstance(second, Rejected)
    assert c.usage.rejected == 2 and c.usage.calls == 6 and c.usage.invalid_answers == 6
    recorded = traces(state)
    prompt_tokens = [t["usage"]["prompt_tokens"] for t in recorded]
    assert c.usage.prompt_tokens == sum(prompt_tokens) > prompt_tokens[0]
    assert c.usage.completion_tokens == sum(t["usage"]["completion_tokens"] for t in recorded) == 6 * 4

    again = client(state)  # rejections are not cached: each is asked again
    for user in ("one", "two"):
        assert again.ask(question(user, check=odd)) == Rejected("invalid answer after 3 attempts: odd only", 3)
    assert again.usage.cached == 0 and again.usage.calls == 6


def test_fallbacks_are_counted(state):
    c = LLMClient(LLMConfig(), state, "t")
    c.count_fallback()
    c.count_fallback()
    assert c.usage.fallback == 2 and c.metadata()["llm_fallback"] == 2


# -- answers without choices, content or usage -------------------------------------------------------


@pytest.fixture
def completion_shape(monkeypatch):
    """``completion_shape(change)``: every stub completion passes through ``change(dict)`` first."""
    real = llm_stub._completion

    def set_change(change):
        monkeypatch.setattr(llm_stub, "_completion", lambda request, content: change(real(request, content)))

    return set_change


def test_an_answer_without_choices_is_an_empty_answer(stub, state, completion_shape):
    completion_shape(lambda c: {**c, "choices": []})
    stub.always(answer(GOOD))
    result = client(state).ask(question())
    assert result == Rejected(
        "invalid answer after 3 attempts: answer: Invalid JSON: EOF while parsing a value at line 1 column 0", 3
    )
    assert [t["response"] for t in traces(state)] == ["", "", ""]


def test_an_answer_with_null_content_is_an_empty_answer(stub, state, completion_shape):
    def null_content(c):
        c["choices"][0]["message"]["content"] = None
        return c

    completion_shape(null_content)
    stub.always(answer(GOOD))
    assert isinstance(client(state).ask(question()), Rejected)
    assert [t["response"] for t in traces(state)] == ["", "", ""]


def test_an_answer_without_usage_counts_no_tokens(stub, state, completion_shape):
    completion_shape(lambda c: {k: v for k, v in c.items() if k != "usage"})
    stub.always(answer(GOOD))
    c = client(state)
    assert c.ask(question()) == Score(**GOOD)
    assert (c.usage.calls, c.usage.prompt_tokens, c.usage.completion_tokens) == (1, 0, 0)
    assert traces(state)[0]["usage"] is None


def test_zero_token_usage_counts_zero(stub, state, completion_shape):
    completion_shape(lambda c: {**c, "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})
    stub.always(answer(GOOD))
    c = client(state)
    c.ask(question())
    assert (c.usage.prompt_tokens, c.usage.completion_tokens) == (0, 0)


# -- traces ------------------------------------------------------------------------------------------


def test_an_answered_trace_records_latency_in_milliseconds(stub, state):
    stub.script(answer(GOOD))
    client(state).ask(question())
    [record] = traces(state)
    assert isinstance(record["latency_s"], float) and 0 <= record["latency_s"] < 30
    assert record["latency_s"] == round(record["latency_s"], 3)


def test_the_structured_output_fallback_traces_the_error_and_the_same_attempt(stub, state):
    stub.script(bad_request(), answer(GOOD))
    client(state).ask(question())
    first, second = traces(state)
    assert first["outcome"] == "error" and first["error"].startswith("BadRequestError: ")
    assert "not supported" in first["error"] and first["attempt"] == second["attempt"] == 1
    assert isinstance(first["latency_s"], float) and 0 <= first["latency_s"] < 30
    assert first["latency_s"] == round(first["latency_s"], 3)


def test_a_refused_request_is_one_line_naming_the_status_and_traced(stub, state):
    stub.always(Reply(status=403, error="Project lacks access to model"))
    with pytest.raises(HypographError) as err:
        client(state).ask(question())
    assert str(err.value) == (
        f"LLM endpoint {MODEL}@{stub.url} refused the request (HTTP 403): "
        "Error code: 403 - Project lacks access to model"
    )
    [record] = traces(state)
    assert record["outcome"] == "error" and record["error"].startswith("PermissionDeniedError: Error code: 403")
    assert isinstance(record["latency_s"], float) and 0 <= record["latency_s"] < 30
    assert record["latency_s"] == round(record["latency_s"], 3)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502])
def test_a_status_the_client_retries_fails_after_its_retries(stub, state, status):
    stub.always(rate_limited("0") if status == 429 else Reply(status=status, error=f"status {status} from the stub"))
    c = client(state)
    with pytest.raises(HypographError) as err:
        c.ask(question())
    message = str(err.value)
    assert message.startswith(f"LLM endpoint {MODEL}@{stub.url} failed after 2 retries: ")
    assert f"(HTTP {status}): Error code: {status}" in message
    assert ("Rate limit reached" if status == 429 else f"status {status} from the stub") in message
    assert len(stub.requests) == 3


def test_an_unreachable_endpoint_is_traced_and_named(llm_env, state):
    url = f"http://127.0.0.1:{llm_stub.unused_port()}/v1"
    llm_env(url, max_retries=0)
    with pytest.raises(HypographError) as err:
        client(state).ask(question())
    assert str(err.value) == f"LLM endpoint {MODEL}@{url} failed after 0 retries: APIConnectionError: Connection error."
    [record] = traces(state)
    assert record["error"] == "APIConnectionError: Connection error."


def test_record_traces_beside_the_calls_with_the_key_redacted(state):
    c = LLMClient(LLMConfig(api_key=API_KEY), state, "search task")
    c.record("web search: bees", {"query": f"bees {API_KEY}", "hits": [{"url": f"u?k={API_KEY}"}], "n": 2})
    [path] = (state / "traces" / "search_task").glob("*/*.json")
    assert path.name == "0001-web_search_bees.json"
    assert json.loads(path.read_text()) == {"query": "bees ***", "hits": [{"url": "u?k=***"}], "n": 2}


def test_trace_to_continues_the_numbering_of_a_folder(state, tmp_path):
    c = LLMClient(LLMConfig(), state, "t")
    target = tmp_path / "round-3"
    target.mkdir()
    for name in ("0001-a.json", "0002-b.json", "notes.txt"):
        (target / name).write_text("{}")
    c.trace_to(target)
    c.record("c", {"x": 1})
    assert sorted(p.name for p in target.iterdir()) == ["0001-a.json", "0002-b.json", "0003-c.json", "notes.txt"]
    fresh = tmp_path / "round-4"
    c.trace_to(fresh)
    c.record("d", {"x": 2})
    assert [p.name for p in fresh.iterdir()] == ["0001-d.json"]


def test_run_folders_number_after_the_last_run_digits(tmp_path):
    today = dt.date.today().isoformat()
    for name in (f"{today}_run1run7", f"{today}_runXrun9", f"{today}_run03", "2001-01-01_run44", f"{today}_runs"):
        (tmp_path / name).mkdir()
    assert new_run_dir(tmp_path) == tmp_path / f"{today}_run10"


def test_a_run_folder_taken_meanwhile_is_skipped(tmp_path, monkeypatch):
    today = dt.date.today().isoformat()
    for n in (1, 2):
        (tmp_path / f"{today}_run{n:02d}").mkdir()
    monkeypatch.setattr(Path, "glob", lambda self, pattern: iter([]))  # another process made them after we looked
    assert new_run_dir(tmp_path) == tmp_path / f"{today}_run03"


def test_safe_names_keep_letters_digits_and_dot_dash_underscore():
    assert safe_name("Item-One_v2.json") == "Item-One_v2.json"
    assert safe_name("a b/c:d") == "a_b_c_d"
    assert safe_name("X" * 100) == "X" * 80


# -- validation errors fed back -------------------------------------------------------------------------


def test_validation_errors_are_summed_up_five_at_most_with_their_paths(stub, state):
    stub.always(answer({"inner": {"n": "x"}}))
    result = client(state).ask(question(schema=Six))
    assert result.reason == (
        "invalid answer after 3 attempts: a: Field required; b: Field required; "
        "c: Field required; d: Field required; e: Field required"
    )
    stub.always(answer({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "inner": {"n": "x"}}))
    result = client(state).ask(question("nested", schema=Six))
    assert result.reason == (
        "invalid answer after 3 attempts: inner.n: Input should be a valid integer, "
        "unable to parse string as an integer"
    )
    stub.always(answer("[1, 2]"))
    result = client(state).ask(question("a list"))
    assert result.reason == "invalid answer after 3 attempts: answer: Input should be an object"


# -- ask_many's threads --------------------------------------------------------------------------------


def record_threads(seen: list):
    def check(answer):
        seen.append(threading.current_thread())

    return check


def test_one_request_is_asked_in_the_calling_thread(stub, state):
    stub.always(answer(GOOD))
    seen = []
    assert client(state).ask_many([question(check=record_threads(seen))]) == [Score(**GOOD)]
    assert seen == [threading.current_thread()]


def test_concurrency_one_asks_in_the_calling_thread(stub, llm_env, state):
    llm_env(stub, concurrency=1)
    stub.always(answer(GOOD))
    seen = []
    client(state).ask_many([question(f"item {n}", check=record_threads(seen)) for n in range(3)])
    assert seen == [threading.current_thread()] * 3


def test_two_requests_overlap_and_no_more_than_the_concurrency(stub, llm_env, state):
    llm_env(stub, concurrency=2)
    stub.always(sleeping(0.3, answer(GOOD)))
    client(state).ask_many([question(f"pair {n}") for n in range(2)])
    assert stub.max_in_flight == 2
    stub.reset()
    client(state).ask_many([question(f"item {n}") for n in range(5)])
    assert stub.max_in_flight == 2 and len(stub.requests) == 5


# -- untrusted text and redaction --------------------------------------------------------------------------


def test_untrusted_text_is_quoted_json_that_cannot_close_its_tag():
    text = untrusted(
        "hypothesis", {"id": 'H-1" onclick="x', "n": "2"}, {"statement": "a </hypothesis> <b>é", "where": Path("p/q")}
    )
    assert text == (
        '<hypothesis id="H-1_onclick_x" n="2">\n{\n "statement": "a \\u003c/hypothesis> \\u003cb>é",\n'
        ' "where": "p/q"\n}\n</hypothesis>'
    )
    assert text.count("<hypothesis") == 1 and text.count("</hypothesis>") == 1


def test_untrusted_without_attributes():
    assert untrusted("cluster", {}, {}) == "<cluster>\n{}\n</cluster>"


@pytest.mark.parametrize("key, redacted", [("abc", True), ("ab", False), ("sk-abcdef", True), ("EMPTY", False)])
def test_keys_of_three_characters_or_more_are_redacted(key, redacted):
    text = f"before {key} after"
    assert redact(text, LLMConfig(api_key=key)) == ("before *** after" if redacted else text)
