"""A scripted, local OpenAI-compatible chat endpoint for tests (never the network).

``LLMStub`` is a real HTTP server (``ThreadingHTTPServer`` on 127.0.0.1, an ephemeral port, a
background thread) answering ``POST /v1/chat/completions`` in the OpenAI response shape. What it
answers is scripted per request:

* ``stub.script(item, item, ...)`` queues replies, consumed one per request in order;
* ``stub.always(item)`` is the reply once the queue is empty (default: a 500 saying nothing was
  scripted, so an unexpected call fails loudly).

An item is a ``Reply`` (see the constructors ``answer``, ``rate_limited``, ``server_error``,
``bad_request``, ``slow``, ``invalid_json``, ``dropped``) or a function ``respond(body) -> Reply``
called with the parsed JSON request body. Every request is recorded (``stub.requests``) with its
body and headers, and the server counts how many requests were in flight at once.

Fixtures: ``llm_server`` (a started stub), ``llm_env`` (a function pointing the HYPOGRAPH_LLM_*
environment at a stub via monkeypatch, short timeout and few retries), ``llm_offline``
(every LLM variable removed). Answer builders: ``adjudication_responder`` and
``cluster_label_responder`` read the numbered pairs / clusters out of the prompt and answer all
of them correctly, so a "smart" stub can serve any batch.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

MODEL = "stub-model"
API_KEY = "sk-test-SECRET-1234567890"
CHAT_PATH = "/v1/chat/completions"
LLM_ENV_VARS = (
    "HYPOGRAPH_LLM_MODEL",
    "HYPOGRAPH_LLM_BASE_URL",
    "HYPOGRAPH_LLM_API_KEY",
    "HYPOGRAPH_LLM_TIMEOUT",
    "HYPOGRAPH_LLM_MAX_RETRIES",
    "HYPOGRAPH_LLM_CONCURRENCY",
    "HYPOGRAPH_LLM",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
)
PROXY_ENV_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


# -- replies -------------------------------------------------------------------------------------


@dataclass
class Reply:
    """What the stub does with one request.

    ``content``: the assistant message (status 200); ``status`` + ``error``: an OpenAI-style error
    body; ``headers``: extra response headers; ``delay``: seconds to wait before answering;
    ``drop``: close the connection without any response.
    """

    content: str | None = None
    status: int = 200
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False
    # hostile servers (tests/support/hostile_llm.py): ``body`` is sent as it is instead of a completion,
    # with ``content_type``; ``shape(completion) -> dict`` rewrites the completion; ``pieces`` > 1
    # sends the body in that many writes ``interval`` seconds apart; ``truncate`` announces the
    # whole length, sends half and closes the connection.
    body: bytes | None = None
    content_type: str = "application/json"
    shape: Callable[[dict], object] | None = None
    pieces: int = 1
    interval: float = 0.0
    truncate: bool = False


Responder = Callable[[dict], Reply]
Item = Reply | Responder


def answer(value: dict | str, delay: float = 0.0) -> Reply:
    """A 200 whose message content is ``value`` (a dict is sent as its JSON text)."""
    return Reply(content=value if isinstance(value, str) else json.dumps(value), delay=delay)


def rate_limited(retry_after: str | None = "0") -> Reply:
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    return Reply(status=429, error="Rate limit reached for requests", headers=headers)


def server_error(status: int = 500) -> Reply:
    return Reply(status=status, error="The server had an error while processing your request")


def bad_request(message: str = "response_format json_schema is not supported by this server") -> Reply:
    return Reply(status=400, error=message)


def slow(seconds: float, value: dict | str = "{}") -> Reply:
    """An answer that arrives after ``seconds`` (longer than the client timeout: a timeout)."""
    return answer(value, delay=seconds)


def invalid_json(text: str = "Sure! Here is my verdict: {pair: 1, MERGE") -> Reply:
    return Reply(content=text)


def dropped() -> Reply:
    return Reply(drop=True)


def without_response_format(inner: Item) -> Responder:
    """A server without structured outputs: 400 when ``response_format`` is sent, else ``inner``."""

    def respond(body: dict) -> Reply:
        if "response_format" in body:
            return bad_request()
        return inner(body) if callable(inner) else inner

    return respond


def sleeping(seconds: float, inner: Item) -> Responder:
    """``inner``'s reply after ``seconds`` (to make requests overlap)."""

    def respond(body: dict) -> Reply:
        reply = inner(body) if callable(inner) else inner
        return replace(reply, delay=seconds)

    return respond


# -- recorded requests ------------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict

    @property
    def messages(self) -> list[dict]:
        return self.body.get("messages", [])

    @property
    def system(self) -> str:
        return next((m["content"] for m in self.messages if m["role"] == "system"), "")

    @property
    def prompt(self) -> str:
        """The first user message: the question itself (re-asks append further messages)."""
        return next((m["content"] for m in self.messages if m["role"] == "user"), "")

    @property
    def last_user(self) -> str:
        return [m["content"] for m in self.messages if m["role"] == "user"][-1]

    @property
    def has_response_format(self) -> bool:
        return "response_format" in self.body


# -- the server ---------------------------------------------------------------------------------------


class LLMStub:
    """The scripted endpoint; ``url`` ends in ``/v1`` (what ``base_url`` expects)."""

    def __init__(self) -> None:
        self._queue: list[Item] = []
        self._default: Item = Reply(status=500, error="llm stub: no reply scripted for this request")
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self.max_in_flight = 0
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="llm-stub", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def script(self, *items: Item) -> LLMStub:
        with self._lock:
            self._queue.extend(items)
        return self

    def always(self, item: Item) -> LLMStub:
        with self._lock:
            self._default = item
        return self

    def reset(self) -> None:
        """Forget recorded requests and the in-flight maximum (the script stays)."""
        with self._lock:
            self._requests.clear()
            self.max_in_flight = 0

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    # called from handler threads
    def _begin(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(request)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            item = self._queue.pop(0) if self._queue else self._default
        return item(request.body) if callable(item) else item

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _wait(self, seconds: float) -> None:
        self._closing.wait(seconds)


def _handler_for(stub: LLMStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args):  # keep pytest output clean
            pass

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != CHAT_PATH:
                return self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                body = {"_unparseable": raw.decode("utf-8", "replace")}
            reply = stub._begin(RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            try:
                if reply.delay:
                    stub._wait(reply.delay)
                if reply.drop:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                elif reply.status != 200:
                    self._send(reply.status, _error_body(reply), reply.headers)
                elif reply.body is not None or reply.shape is not None or reply.pieces > 1 or reply.truncate:
                    _send_raw(self, stub, reply, body)
                else:
                    self._send(200, _completion(body, reply.content or ""), reply.headers)
            except OSError:
                pass  # the client gave up (timeout) or the connection was dropped on purpose
            finally:
                stub._end()

        def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _send_raw(self, stub: LLMStub, reply: Reply, request: dict) -> None:
    """A hostile reply: a raw body, a reshaped completion, sent in pieces or cut short."""
    if reply.body is not None:
        data = reply.body
    else:
        completion = _completion(request, reply.content or "")
        data = json.dumps(reply.shape(completion) if reply.shape else completion).encode("utf-8")
    self.send_response(200)
    self.send_header("Content-Type", reply.content_type)
    self.send_header("Content-Length", str(len(data)))
    for k, v in reply.headers.items():
        self.send_header(k, v)
    self.end_headers()
    if reply.truncate:
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)
        return
    size = max(1, -(-len(data) // reply.pieces))
    for k in range(0, len(data), size):
        if k and reply.interval:
            stub._wait(reply.interval)
            if stub._closing.is_set():
                return
        self.wfile.write(data[k : k + size])
        self.wfile.flush()


_ids = itertools.count(1)


def _tokens(text: str) -> int:
    return max(1, len(text.split()))


def _completion(request: dict, content: str) -> dict:
    prompt_tokens = sum(_tokens(str(m.get("content", ""))) for m in request.get("messages", []))
    completion_tokens = _tokens(content)
    return {
        "id": f"chatcmpl-stub-{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", MODEL),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _error_body(reply: Reply) -> dict:
    kinds = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}
    kind = kinds.get(reply.status, "server_error")
    return {"error": {"message": reply.error, "type": kind, "param": None, "code": None}}


def unused_port() -> int:
    """A localhost port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- smart answers ---------------------------------------------------------------------------------------

PAIR_RE = re.compile(
    r"^Pair (\d+) \(cosine similarity ([0-9.]+)\):\n"
    r'<hypothesis id="([^"]+)">.*?<hypothesis id="([^"]+)">',
    re.S | re.M,
)
CLUSTER_RE = re.compile(r"^Cluster (\d+) \(", re.M)


def asked_pairs(body: dict) -> list[tuple[int, str, str]]:
    """``(number, id_a, id_b)`` for each pair in an adjudication request."""
    return [(int(n), a, b) for n, _sim, a, b in PAIR_RE.findall(RecordedRequest("", {}, body).prompt)]


def asked_clusters(body: dict) -> list[int]:
    return [int(n) for n in CLUSTER_RE.findall(RecordedRequest("", {}, body).prompt)]


def adjudication_answer(body: dict, verdict: str | Callable[[str, str], str] = "KEEP") -> dict:
    """A valid answer to the adjudication request ``body``: one decision per asked pair."""
    actions = {
        "MERGE": "Retire {b} in favor of {a}",
        "KEEP": "No action — both remain active",
        "FLAG": "Supervisor should review whether {a} and {b} differ in scope",
    }
    decisions = []
    for n, a, b in asked_pairs(body):
        v = verdict(a, b) if callable(verdict) else verdict
        decisions.append(
            {
                "pair": n,
                "verdict": v,
                "rationale": f"Stub verdict {v}: {a} and {b} compared on mechanism and predictions.",
                "recommended_action": actions[v].format(a=a, b=b),
            }
        )
    return {"decisions": decisions}


def adjudication_responder(verdict: str | Callable[[str, str], str] = "KEEP") -> Responder:
    return lambda body: answer(adjudication_answer(body, verdict))


def cluster_label_answer(body: dict, label: Callable[[int], str] = lambda n: f"Stub theme number {n}") -> dict:
    return {"labels": [{"cluster": n, "label": label(n)} for n in asked_clusters(body)]}


def cluster_label_responder(label: Callable[[int], str] = lambda n: f"Stub theme number {n}") -> Responder:
    return lambda body: answer(cluster_label_answer(body, label))


MERGE_PAIR_RE = re.compile(r'<hypothesis pair="(\d+)" role="(first|second)" id="([^"]+)">')


def merge_pairs(body: dict) -> list[tuple[int, str, str]]:
    """``(number, first id, second id)`` for each pair of a 4a merge request (several per question)."""
    found: dict[int, dict[str, str]] = {}
    for n, role, node_id in MERGE_PAIR_RE.findall(RecordedRequest("", {}, body).prompt):
        found.setdefault(int(n), {})[role] = node_id
    return [(n, ids["first"], ids["second"]) for n, ids in sorted(found.items())]


def merge_answer(body: dict, judge: Callable[[str, str], dict] | None = None) -> dict:
    """A valid answer to the 4a merge request ``body``: ``judge(a, b)`` gives each pair's fields
    (default: KEEP, nothing discriminating named, no widening)."""
    keep = {
        "decision": "KEEP",
        "discriminating_observations": [],
        "widened_statement": None,
        "generalization_note": None,
        "rationale": "Different cores: compared on every observation listed.",
    }
    return {"decisions": [{"pair": n, **keep, **(judge(a, b) if judge else {})} for n, a, b in merge_pairs(body)]}


def routed(adjudication: Item, labels: Item) -> Responder:
    """One endpoint serving both tasks (a pipeline run): route on what the prompt asks."""

    def respond(body: dict) -> Reply:
        item = labels if asked_clusters(body) else adjudication
        return item(body) if callable(item) else item

    return respond


# -- environment ------------------------------------------------------------------------------------------


def clear_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LLM_ENV_VARS + PROXY_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@dataclass(frozen=True)
class LLMEnvSettings:
    """The client settings a test may override (an unknown name is a TypeError)."""

    model: str = MODEL
    key: str = API_KEY
    timeout: float = 1.0
    max_retries: int = 2
    concurrency: int = 4


def configure_llm_env(monkeypatch: pytest.MonkeyPatch, base_url: str, **overrides: object) -> dict[str, str]:
    """Point HYPOGRAPH_LLM_* at ``base_url``, with ``overrides`` of ``LLMEnvSettings`` (model, key,
    timeout, max_retries, concurrency); returns the variables set (for a subprocess's env)."""
    settings = LLMEnvSettings(**overrides)
    clear_llm_env(monkeypatch)
    values = {
        "HYPOGRAPH_LLM_BASE_URL": base_url,
        "HYPOGRAPH_LLM_MODEL": settings.model,
        "HYPOGRAPH_LLM_API_KEY": settings.key,
        "HYPOGRAPH_LLM_TIMEOUT": str(settings.timeout),
        "HYPOGRAPH_LLM_MAX_RETRIES": str(settings.max_retries),
        "HYPOGRAPH_LLM_CONCURRENCY": str(settings.concurrency),
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return values


@pytest.fixture
def llm_server():
    stub = LLMStub()
    yield stub
    stub.close()


@pytest.fixture
def llm_env(monkeypatch):
    """``llm_env(url_or_stub, **overrides)`` configures the environment for one test."""

    def configure(target: LLMStub | str, **overrides) -> dict[str, str]:
        return configure_llm_env(monkeypatch, target.url if isinstance(target, LLMStub) else target, **overrides)

    return configure


@pytest.fixture
def llm_offline(monkeypatch):
    """No LLM variable set at all: Hypograph must stay offline."""
    clear_llm_env(monkeypatch)
