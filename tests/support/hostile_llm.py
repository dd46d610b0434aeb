"""Replies of hostile or merely different OpenAI-compatible servers, for the local stub of
``llm_stub`` (never the network). Each is what a real server, proxy or wrong port was seen to send:

* ``html_page``: a 200 with an HTML page (a proxy's error page, a web UI on the wrong port);
* ``random_bytes``: a 200 whose body is not UTF-8;
* ``error_object``: a 200 whose JSON is an error object, not a completion;
* ``string_usage``: a completion whose ``usage`` counts are strings;
* ``empty_choices`` / ``null_choices``: ``choices`` empty, or null;
* ``trickled``: the answer in many pieces, seconds apart (a deadline must still hold);
* ``cut_off``: ``finish_reason: length`` (the token budget ran out);
* ``truncated``: the body cut in half, the connection closed;
* ``json_schema_refused``: llama-cpp-python's 500 for ``response_format: json_schema``;
* ``context_limited``: a 400 naming the context window for a prompt over ``max_chars``.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace

from llm_stub import Item, RecordedRequest, Reply, Responder, answer

HTML = (
    b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>Bad Gateway</h1><p>The proxy could not reach the upstream server.</p></body></html>"
)


def html_page() -> Reply:
    return Reply(body=HTML, content_type="text/html; charset=utf-8")


def random_bytes(n: int = 600) -> Reply:
    rng = random.Random(24)
    return Reply(body=b"\xff\xfe" + bytes(rng.randrange(256) for _ in range(n)), content_type="application/json")


def error_object() -> Reply:
    return Reply(body=json.dumps({"error": {"message": "model is still loading"}}).encode())


def string_usage(value: dict | str) -> Reply:
    def shape(c: dict) -> dict:
        return {**c, "usage": {"prompt_tokens": "12", "completion_tokens": "many", "total_tokens": None}}

    return replace(answer(value), shape=shape)


def empty_choices() -> Reply:
    return replace(answer("{}"), shape=lambda c: {**c, "choices": []})


def null_choices() -> Reply:
    return replace(answer("{}"), shape=lambda c: {**c, "choices": None})


def trickled(value: dict | str, pieces: int = 42, interval: float = 0.1) -> Reply:
    return replace(answer(value), pieces=pieces, interval=interval)


def cut_off(value: dict | str) -> Reply:
    def shape(c: dict) -> dict:
        c["choices"][0]["finish_reason"] = "length"
        return c

    return replace(answer(value), shape=shape)


def truncated(value: dict | str) -> Reply:
    return replace(answer(value), truncate=True)


def json_schema_refused(inner: Item) -> Responder:
    """llama-cpp-python 0.3.x: its request model knows ``text`` and ``json_object`` only."""

    def respond(body: dict) -> Reply:
        if (body.get("response_format") or {}).get("type") == "json_schema":
            return Reply(
                status=500,
                error="1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                "'response_format', 'type'), 'msg': \"Input should be 'text' or "
                "'json_object'\", 'input': 'json_schema'}",
            )
        return inner(body) if callable(inner) else inner

    return respond


def context_limited(max_chars: int, n_ctx: int, inner: Item) -> Responder:
    """A 400 naming the context window (llama.cpp's words) for a prompt over ``max_chars``."""

    def respond(body: dict) -> Reply:
        size = sum(len(str(m.get("content", ""))) for m in RecordedRequest("", {}, body).messages)
        if size > max_chars:
            return Reply(status=400, error=f"Requested tokens ({size // 3}) exceed context window of {n_ctx}")
        return inner(body) if callable(inner) else inner

    return respond
