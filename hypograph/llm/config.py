"""LLM settings: a plain pydantic model built from keyword fields (the Dagster resource does that),
or from the environment by ``LLMConfig.from_env`` (the ``prox`` CLI, the case gateway's default).

=================================  ==============================================  ==========
variable                           meaning                                         default
=================================  ==============================================  ==========
HYPOGRAPH_LLM_MODEL                model name; unset means offline                 (offline)
HYPOGRAPH_LLM_BASE_URL             endpoint, e.g. http://localhost:8000/v1         OPENAI_BASE_URL, else OpenAI
HYPOGRAPH_LLM_API_KEY              key                                             OPENAI_API_KEY, else "none"
HYPOGRAPH_LLM_TIMEOUT              deadline per request: total wall seconds        120
HYPOGRAPH_LLM_MAX_RETRIES          retries of a transient failure                  3
HYPOGRAPH_LLM_CONCURRENCY          requests in flight at once on the endpoint      4
HYPOGRAPH_LLM_MAX_TOKENS           answer budget of every task (else per schema)   (per schema)
HYPOGRAPH_LLM_CONTEXT_LENGTH       the endpoint's context length in tokens         (learned from a 400)
HYPOGRAPH_LLM_STRUCTURED_OUTPUT    auto, json_schema, json_object or prompt        auto
HYPOGRAPH_LLM_RETRY_REJECTED       1: ask again what the cache holds as rejected   0
=================================  ==============================================  ==========

The model is what switches the LLM on: an ``OPENAI_API_KEY`` that happens to be set for other
tools never makes Hypograph spend money by itself. Nothing else below the Dagster resource reads
these variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, Field, SecretStr, ValidationError

from hypograph.errors import HypographError

StructuredOutput = Literal["auto", "json_schema", "json_object", "prompt"]

ENV_NAMES = {
    "timeout": "HYPOGRAPH_LLM_TIMEOUT",
    "max_retries": "HYPOGRAPH_LLM_MAX_RETRIES",
    "concurrency": "HYPOGRAPH_LLM_CONCURRENCY",
    "max_tokens": "HYPOGRAPH_LLM_MAX_TOKENS",
    "context_length": "HYPOGRAPH_LLM_CONTEXT_LENGTH",
    "structured_output": "HYPOGRAPH_LLM_STRUCTURED_OUTPUT",
}
DEFAULT_TIMEOUT = 120.0


class LLMConfig(BaseModel):
    """One endpoint and how to use it. ``timeout`` is the deadline of one request (wall time from
    sending to the last byte, however the server streams); ``max_tokens`` overrides the answer
    budget sized from each task's schema; ``context_length`` is the endpoint's context in tokens
    when known beforehand (else it is learned from a 400 naming it); ``structured_output`` forces a
    response format instead of negotiating one (``auto``); ``retry_rejected`` asks again instead of
    serving a rejection from the cache."""

    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr = SecretStr("none")
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    max_retries: int = Field(default=3, ge=0)
    concurrency: int = Field(default=4, ge=1)
    validation_retries: int = Field(default=2, ge=0, description="re-asks after an invalid answer")
    max_tokens: int | None = Field(default=None, ge=16)
    context_length: int | None = Field(default=None, ge=256)
    structured_output: StructuredOutput = "auto"
    retry_rejected: bool = False
    forced_offline: bool = False

    @property
    def offline(self) -> bool:
        return self.forced_offline or not self.model

    def describe(self) -> str:
        """``offline`` or ``model@endpoint`` — safe to show (never the key)."""
        if self.forced_offline:
            return "offline (forced)"
        if not self.model:
            return "offline (HYPOGRAPH_LLM_MODEL not set)"
        return f"{self.model}@{_public_url(self.base_url) if self.base_url else 'api.openai.com'}"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, offline: bool = False) -> LLMConfig:
        env = os.environ if env is None else env

        def number(name: str, kind, default):
            raw = env.get(name)
            if raw in (None, ""):
                return default
            try:
                return kind(raw)
            except ValueError:
                raise HypographError(f"environment variable {name}: {raw!r} is not a {kind.__name__}") from None

        try:
            return cls._from_values(env, number, offline)
        except ValidationError as e:
            err = e.errors()[0]
            name = ENV_NAMES.get(str(err["loc"][0]), str(err["loc"][0]))
            raise HypographError(f"environment variable {name}: {err['msg']}") from None

    @classmethod
    def _from_values(cls, env, number, offline: bool) -> LLMConfig:
        return cls(
            model=env.get("HYPOGRAPH_LLM_MODEL") or None,
            base_url=env.get("HYPOGRAPH_LLM_BASE_URL") or env.get("OPENAI_BASE_URL") or None,
            api_key=SecretStr(env.get("HYPOGRAPH_LLM_API_KEY") or env.get("OPENAI_API_KEY") or "none"),
            timeout=number("HYPOGRAPH_LLM_TIMEOUT", float, DEFAULT_TIMEOUT),
            max_retries=number("HYPOGRAPH_LLM_MAX_RETRIES", int, 3),
            concurrency=number("HYPOGRAPH_LLM_CONCURRENCY", int, 4),
            max_tokens=number("HYPOGRAPH_LLM_MAX_TOKENS", int, None),
            context_length=number("HYPOGRAPH_LLM_CONTEXT_LENGTH", int, None),
            structured_output=env.get("HYPOGRAPH_LLM_STRUCTURED_OUTPUT") or "auto",
            retry_rejected=(env.get("HYPOGRAPH_LLM_RETRY_REJECTED") or "0").lower() in ("1", "true", "yes"),
            forced_offline=offline,
        )


def _public_url(url: str) -> str:
    """The endpoint without user-info or query (where some servers take a key)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))
