"""LLM settings: a plain pydantic model built from keyword fields (the Dagster resource does that),
or from the environment by ``hypograph.environment.llm_config`` (the ``HYPOGRAPH_LLM_*``
variables: their table is in that module). The ranges below are the one place the LLM settings'
ranges live: the environment, the resource's run config and a case config's endpoints are all
validated through this model.

The maxima: a request's deadline of an hour (a slower answer is a stuck server); 10 retries (the
``openai`` client's backoff waits up to 8 s each, so 10 ride out a minute and a half of outage,
and more only hang a command on a server that is down); 64 requests in flight (more than any one
endpoint serves at once); an answer of 1,000,000 tokens and a context of 10,000,000 (the largest
served today). Numbers are finite: ``inf`` and ``nan`` are refused.

The model is what switches the LLM on: an ``OPENAI_API_KEY`` that happens to be set for other
tools never makes Hypograph spend money by itself.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr

StructuredOutput = Literal["auto", "json_schema", "json_object", "prompt"]

DEFAULT_TIMEOUT = 120.0


class LLMConfig(BaseModel):
    """One endpoint and how to use it. ``timeout`` is the deadline of one request (wall time from
    sending to the last byte, however the server streams); ``max_tokens`` overrides the answer
    budget sized from each task's schema; ``context_length`` is the endpoint's context in tokens
    when known beforehand (else it is learned from a 400 naming it); ``structured_output`` forces a
    response format instead of negotiating one (``auto``); ``retry_rejected`` asks again instead of
    serving a rejection from the cache."""

    model_config = ConfigDict(allow_inf_nan=False)

    model: str | None = Field(default=None, description="model name; none anywhere means the offline policy")
    base_url: str | None = Field(default=None, description="endpoint, e.g. http://localhost:8000/v1")
    api_key: SecretStr = Field(default=SecretStr("none"), description="key (shown in the UI only as its variable name)")
    timeout: float = Field(
        default=DEFAULT_TIMEOUT, gt=0, le=3600, description="deadline per request, total wall seconds"
    )
    max_retries: int = Field(default=3, ge=0, le=10, description="retries of a transient failure")
    concurrency: int = Field(default=4, ge=1, le=64, description="requests in flight at once (1 for llama.cpp)")
    validation_retries: int = Field(default=2, ge=0, le=10, description="re-asks after an invalid answer")
    max_tokens: int | None = Field(
        default=None, ge=16, le=1_000_000, description="answer budget of every task (else per schema)"
    )
    context_length: int | None = Field(
        default=None, ge=256, le=10_000_000, description="the endpoint's context, in tokens"
    )
    structured_output: StructuredOutput = Field(
        default="auto", description="auto, json_schema, json_object or prompt (auto tries them in turn)"
    )
    retry_rejected: bool = Field(default=False, description="ask again what the cache holds as a rejected answer")
    forced_offline: bool = Field(default=False, description="force the offline policy")

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


def _public_url(url: str) -> str:
    """The endpoint without user-info or query (where some servers take a key)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))
