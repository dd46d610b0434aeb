"""Each HTTP attempt of the ``openai`` client, held to a wall-clock deadline, vetted and recorded
for the trace. The ``openai`` client does the rest: retries with backoff and Retry-After, status
errors, parsing the completion.

An attempt is one ``send`` of the ``openai`` client's own httpx client (``http_client``: its
defaults, proxies from the environment included), run in a worker thread and read to the end:

* **the deadline**: httpx's timeouts bound each read, not the whole answer (a server that trickles
  a byte at a time never trips them), so the attempt is waited for ``deadline`` seconds. Past it,
  or at a timeout of httpx's own, ``openai.APITimeoutError`` is raised, which the ``openai``
  client passes on unretried: a server that keeps generating for a client that left would queue
  the retry behind it. The late attempt ends by itself (a daemon thread: nothing waits for it);
* **vetting**: a 2xx body that is no chat completion (an HTML page, bytes that are not UTF-8, an
  error object, no ``choices`` list) raises an httpx ``DecodingError``, which the ``openai``
  client retries like a cut connection. An error status the caller adapts to instead (``final``:
  a refused response format, a context length) is marked ``x-should-retry: false``, which the
  ``openai`` client obeys: asked the same, the server would refuse the same;
* **recording**: inside ``with exchange.recording(final) as attempts:`` each attempt made in this
  thread is appended to ``attempts``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

BODY_TRACED = 4096  # bytes of a failed response body a trace keeps
CONNECTION_FAILED = "APIConnectionError: Connection error."  # what the openai client makes of a failed exchange


@dataclass
class Attempt:
    """One HTTP attempt: what the trace keeps of it."""

    latency_s: float
    status: int | None = None
    headers: dict | None = None
    body: str | None = None  # the first BODY_TRACED bytes of a failed answer
    failure: str | None = None  # one line, unless it brought a completion or an error status
    cause: str | None = None  # the transport's error behind a failed connection
    deadline: bool = False
    response: Any = None  # an error status's httpx response, for the openai error it makes

    @property
    def failed(self) -> bool:
        return self.failure is not None or self.response is not None


class Exchange:
    """The attempts of one ``openai`` client, each within ``deadline`` seconds."""

    def __init__(self, deadline: float):
        self.deadline = deadline
        self._local = threading.local()

    def http_client(self):
        """The ``openai`` client's default httpx client, each attempt sent through ``send``."""
        import openai

        exchange = self

        class Watched(openai.DefaultHttpxClient):
            def send(self, request, **kwargs):
                return exchange.send(super().send, request, **kwargs)

        return Watched(timeout=self.deadline)

    @contextmanager
    def recording(self, final: Callable[[str], bool] = lambda body: False) -> Iterator[list[Attempt]]:
        """The attempts made in this thread inside the block; ``final(body)``: an error status not to retry."""
        attempts: list[Attempt] = []
        self._local.attempts, self._local.final = attempts, final
        try:
            yield attempts
        finally:
            self._local.attempts = self._local.final = None

    def send(self, send: Callable, request, **kwargs):
        """One attempt: ``send(request)`` within the deadline, its body read, vetted and recorded."""
        import httpx2
        import openai

        started = time.monotonic()
        response, error = self._within_deadline(send, request, kwargs)
        attempt = Attempt(latency_s=round(time.monotonic() - started, 3))
        if getattr(self._local, "attempts", None) is not None:
            self._local.attempts.append(attempt)
        if response is None and (error is None or isinstance(error, httpx2.TimeoutException)):
            attempt.failure, attempt.deadline = f"no complete answer within {self.deadline:g} s", True
            raise openai.APITimeoutError(request=request)
        if error is not None:
            attempt.failure, attempt.cause = CONNECTION_FAILED, f"{type(error).__name__}: {str(error)[:200]}"
            raise error
        attempt.status, attempt.headers = response.status_code, dict(response.headers)
        if response.is_success:
            problem = completion_problem(response.content)
            if problem is not None:
                kind = response.headers.get("content-type", "no content type")
                attempt.failure = (
                    f"the answer is not a chat completion (HTTP {response.status_code}, {kind}): {problem}"
                )
                attempt.body = response.content[:BODY_TRACED].decode("utf-8", "replace")
                raise httpx2.DecodingError(attempt.failure, request=request)  # retried as a failed exchange
            return response
        attempt.body, attempt.response = response.content[:BODY_TRACED].decode("utf-8", "replace"), response
        if getattr(self._local, "final", None) and self._local.final(response.content.decode("utf-8", "replace")):
            response.headers["x-should-retry"] = "false"
        return response

    def _within_deadline(self, send: Callable, request, kwargs: dict) -> tuple[Any, Exception | None]:
        """``send``'s response, its body read, or its error; (None, None) when the deadline passed first."""
        box: dict = {}
        done = threading.Event()

        def run() -> None:
            try:
                response = send(request, **kwargs)
                response.read()
                box["response"] = response
            except Exception as e:  # noqa: BLE001 — whatever the exchange raises is the attempt's outcome
                box["error"] = e
            finally:
                done.set()

        threading.Thread(target=run, name="llm-request", daemon=True).start()
        if not done.wait(self.deadline):
            return None, None
        return box.get("response"), box.get("error")


def completion_problem(body: bytes) -> str | None:  # noqa: PLR0911 — one return a way it can fail
    """Why ``body`` is no chat completion's JSON (an object with a ``choices`` list whose first
    entry holds a message), or None. The ``openai`` client parses what passes."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return f"{len(body)} bytes that are not UTF-8"
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return f"not JSON: {preview(text)}"
    if not isinstance(data, dict):
        return f"JSON {type(data).__name__}, not an object"
    if "error" in data and "choices" not in data:
        return f"an error object: {preview(json.dumps(data['error']))}"
    choices = data.get("choices")
    if not isinstance(choices, list):
        return "no choices list" if choices is None else f"choices is a {type(choices).__name__}"
    if choices and not (isinstance(choices[0], dict) and isinstance(choices[0].get("message"), dict)):
        return "the first choice has no message"
    return None


def preview(text: str, n: int = 120) -> str:
    text = " ".join(text.split())
    return repr(text[:n] + ("…" if len(text) > n else ""))
