"""What one endpoint and model take, learnt from their refusals and remembered across runs in
``<cache>/endpoints/``: the response format, the name of the answer budget's parameter, and the
context length.

The response format is negotiated (``structured_output: auto``): ``json_schema``, then llama.cpp's
``json_object`` with the schema, then plain JSON asked for in the prompt (the schema is always in
the prompt too); a 4xx/5xx naming the response format moves one step down. A refusal naming
``max_completion_tokens`` switches the budget's parameter to it. The schema sent is
grammar-friendly (``wire_schema``).

A context length is the one fact a server changes by itself (restarted with a larger context): one
learnt in an earlier run is recorded but not trusted, so a run's first prompt that would exceed it
is sent whole; the server's refusal (one quick HTTP 400) teaches it again for the rest of this
run, its answer means the limit is gone. So a recovered server is asked again on the next run,
and a small one costs one refused call per run and task."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path

from pydantic import BaseModel

from hypograph.atomic import STATE_MAX, read_regular, write_json
from hypograph.llm.budget import wire_schema
from hypograph.llm.config import LLMConfig
from hypograph.llm.trace import safe_name

MODES = ("json_schema", "json_object", "prompt")  # the negotiation's order
FORMAT_ERROR_RE = re.compile(r"response_format|json_schema|json_object|structured output|grammar", re.I)
MAX_COMPLETION_RE = re.compile(r"max_completion_tokens", re.I)


class Endpoint:
    """The facts of ``config``'s endpoint and model, read once from the cache, written when learnt."""

    def __init__(self, config: LLMConfig, cache_dir: Path):
        self.config = config
        ident = f"{config.base_url or 'https://api.openai.com/v1'}|{config.model}"
        self.path = cache_dir / "endpoints" / f"{hashlib.sha256(ident.encode()).hexdigest()[:24]}.json"
        self._facts: dict | None = None
        self._lock = threading.Lock()
        self._context_confirmed = False  # the server named its context length in this run

    def facts(self) -> dict:
        with self._lock:
            if self._facts is None:
                try:
                    facts = json.loads(read_regular(self.path, STATE_MAX, follow=True))
                except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
                    facts = {}
                self._facts = facts if isinstance(facts, dict) else {}
            return dict(self._facts)

    def learn(self, **facts) -> None:
        current = self.facts()
        with self._lock:
            self._context_confirmed = self._context_confirmed or "context_length" in facts
            self._facts = {**current, **facts}
            record = {"endpoint": self.config.describe(), **self._facts}
        write_json(self.path, record)

    def mode(self) -> str:
        """The response format to send: configured, else the one learnt, else the first."""
        if self.config.structured_output != "auto":
            return self.config.structured_output
        mode = self.facts().get("structured_output")
        return mode if mode in MODES else MODES[0]

    def context_length(self) -> int | None:
        """The configured context length, else the one the server named in this run (one recorded
        by an earlier run is asked again first: the module says why), else None."""
        learned = self.facts().get("context_length") if self._context_confirmed else None
        return self.config.context_length or (learned if isinstance(learned, int) and learned > 0 else None)

    def kwargs(self, messages: list[dict], schema: type[BaseModel], items: int | None, mode: str, budget: int) -> dict:
        """The ``chat.completions.create`` arguments of one request in response format ``mode``."""
        kwargs = {"model": self.config.model, "messages": messages, "temperature": 0}
        budget_parameter = "max_completion_tokens" if self._uses_max_completion_tokens() else "max_tokens"
        kwargs[budget_parameter] = budget
        sent = wire_schema(schema.model_json_schema(), items)
        if mode == "json_schema":
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": safe_name(schema.__name__), "schema": sent, "strict": False},
            }
        elif mode == "json_object":
            # llama.cpp's server (llama-cpp-python) constrains the answer by a grammar built from this
            kwargs["response_format"] = {"type": "json_object", "schema": sent}
        return kwargs

    def adaptation(self, error: str, kwargs: dict, mode: str) -> dict | None:
        """The fact a refusal ``error`` of the request ``kwargs`` (sent in ``mode``) teaches, or None:
        ``max_completion_tokens`` for ``max_tokens``, or (``auto``) the next response format."""
        if MAX_COMPLETION_RE.search(error) and "max_tokens" in kwargs and not self._uses_max_completion_tokens():
            return {"budget_parameter": "max_completion_tokens"}
        if mode != "prompt" and self.config.structured_output == "auto" and FORMAT_ERROR_RE.search(error):
            return {"structured_output": MODES[MODES.index(mode) + 1]}
        return None

    def _uses_max_completion_tokens(self) -> bool:
        return self.facts().get("budget_parameter") == "max_completion_tokens"
