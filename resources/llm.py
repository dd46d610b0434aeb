"""The LLM resource: hands each asset an ``LLMClient`` built from its fields over the environment.

The environment is read once, when a step asks for its client (``LLMConfig.from_env``, in the run's
own process: a command's, the daemon's, a worker's). A field set in the run config overrides it;
empty, the environment's value holds. Model, endpoint and key are ``EnvVar`` fields when the variable
is set where the code location loads, so the UI shows the variable's name and never its value.
Without a model, the offline policy.
"""

import os
from pathlib import Path

from dagster import ConfigurableResource, EnvVar
from pydantic import Field

from hypograph.llm import LLMClient, LLMConfig

# field -> the variables it is read from, first set wins (as LLMConfig.from_env reads them)
SECRET_ENV = {
    "model": ("HYPOGRAPH_LLM_MODEL",),
    "base_url": ("HYPOGRAPH_LLM_BASE_URL", "OPENAI_BASE_URL"),
    "api_key": ("HYPOGRAPH_LLM_API_KEY", "OPENAI_API_KEY"),
}
OFFLINE_ENV = "HYPOGRAPH_LLM"  # "offline": every run offline unless its config says otherwise


class LLMResource(ConfigurableResource):
    """An OpenAI-compatible endpoint, or the deterministic offline policy; an empty field takes the
    environment's value."""

    model: str | None = Field(default=None, description="model name; none anywhere means the offline policy")
    base_url: str | None = Field(default=None, description="endpoint, e.g. http://localhost:8000/v1")
    api_key: str | None = Field(default=None, description="key (shown in the UI only as its variable name)")
    offline: bool | None = Field(default=None, description="force the offline policy (empty: HYPOGRAPH_LLM)")
    timeout: float | None = Field(default=None, gt=0, description="deadline per request, total wall seconds")
    max_retries: int | None = Field(default=None, ge=0, description="retries of a transient failure")
    concurrency: int | None = Field(default=None, ge=1, description="requests in flight at once (1 for llama.cpp)")
    max_tokens: int | None = Field(default=None, ge=16, description="answer budget of every task (else per schema)")
    context_length: int | None = Field(default=None, ge=256, description="the endpoint's context, in tokens")
    structured_output: str | None = Field(default=None, description="auto, json_schema, json_object or prompt")
    retry_rejected: bool | None = Field(default=None, description="ask again what the cache holds as a rejected answer")

    @classmethod
    def from_environment(cls) -> "LLMResource":
        """The resource the code location loads: each secret set where it loads bound as ``EnvVar``."""
        return cls(
            **{
                field: EnvVar(name)
                for field, names in SECRET_ENV.items()
                for name in [next((n for n in names if os.environ.get(n)), None)]
                if name
            }
        )

    def config(self) -> LLMConfig:
        """The client settings: the environment's, with every field set here over it."""
        offline = self.offline if self.offline is not None else os.environ.get(OFFLINE_ENV) == "offline"
        given = {f: v for f in type(self).model_fields if f != "offline" and (v := getattr(self, f)) is not None}
        return LLMConfig.model_validate({**dict(LLMConfig.from_env(offline=offline)), **given})

    def client(self, state_dir: Path, task: str) -> LLMClient:
        return LLMClient(self.config(), state_dir, task)
