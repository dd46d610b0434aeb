"""The LLM resource: hands each asset an ``LLMClient``.

Model, endpoint and key are ``EnvVar`` fields when the variable is set where the code location
loads, so the UI shows the variable's name and never its value. Unset, the model is offline.
"""

import os
from pathlib import Path

from dagster import ConfigurableResource, EnvVar
from pydantic import Field

from hypograph.llm import LLMClient, LLMConfig

ENV = {"model": "HYPOGRAPH_LLM_MODEL", "base_url": "HYPOGRAPH_LLM_BASE_URL", "api_key": "HYPOGRAPH_LLM_API_KEY"}


class LLMResource(ConfigurableResource):
    """An OpenAI-compatible endpoint, or the deterministic offline policy."""

    model: str | None = Field(default=None, description="model name; empty means the offline policy")
    base_url: str | None = Field(default=None, description="endpoint, e.g. http://localhost:8000/v1")
    api_key: str | None = Field(default=None, description="key (shown in the UI only as its variable name)")
    offline: bool = Field(default=False, description="force the offline policy even when a model is configured")

    @classmethod
    def from_environment(cls) -> "LLMResource":
        """Bind each field to its environment variable when that variable is set."""
        fields = {field: EnvVar(name) for field, name in ENV.items() if os.environ.get(name)}
        return cls(**fields, offline=os.environ.get("HYPOGRAPH_LLM") == "offline")

    def config(self) -> LLMConfig:
        """The client settings: these fields over the environment's (timeouts, retries, fallbacks)."""
        env = {**os.environ, **{name: value for field, name in ENV.items() if (value := getattr(self, field))}}
        return LLMConfig.from_env(env, offline=self.offline)

    def client(self, state_dir: Path, task: str) -> LLMClient:
        return LLMClient(self.config(), state_dir, task)
