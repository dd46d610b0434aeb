"""The LLM resource: hands each asset an ``LLMClient`` built from its own fields.

Model, endpoint and key are ``EnvVar`` fields when the variable is set where the code location
loads, so the UI shows the variable's name and never its value; the other settings are read once,
at load, with the checks of ``LLMConfig.from_env``. Unset, the model is offline.
"""

import os
from pathlib import Path

from dagster import ConfigurableResource, EnvVar
from pydantic import Field

from hypograph.llm import LLMClient, LLMConfig
from hypograph.llm.config import DEFAULT_TIMEOUT, StructuredOutput

# field -> the variables it is read from, first set wins (as LLMConfig.from_env reads them)
SECRET_ENV = {
    "model": ("HYPOGRAPH_LLM_MODEL",),
    "base_url": ("HYPOGRAPH_LLM_BASE_URL", "OPENAI_BASE_URL"),
    "api_key": ("HYPOGRAPH_LLM_API_KEY", "OPENAI_API_KEY"),
}
SETTINGS = (
    "timeout",
    "max_retries",
    "concurrency",
    "max_tokens",
    "context_length",
    "structured_output",
    "retry_rejected",
)


class LLMResource(ConfigurableResource):
    """An OpenAI-compatible endpoint, or the deterministic offline policy."""

    model: str | None = Field(default=None, description="model name; empty means the offline policy")
    base_url: str | None = Field(default=None, description="endpoint, e.g. http://localhost:8000/v1")
    api_key: str | None = Field(default=None, description="key (shown in the UI only as its variable name)")
    offline: bool = Field(default=False, description="force the offline policy even when a model is configured")
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, description="deadline per request, total wall seconds")
    max_retries: int = Field(default=3, ge=0, description="retries of a transient failure")
    concurrency: int = Field(default=4, ge=1, description="requests in flight at once (1 for llama.cpp)")
    max_tokens: int | None = Field(default=None, ge=16, description="answer budget of every task (else per schema)")
    context_length: int | None = Field(default=None, ge=256, description="the endpoint's context, in tokens")
    structured_output: StructuredOutput = Field(default="auto", description="auto, json_schema, json_object, prompt")
    retry_rejected: bool = Field(default=False, description="ask again what the cache holds as a rejected answer")

    @classmethod
    def from_environment(cls) -> "LLMResource":
        """The resource the code location loads: secrets bound as ``EnvVar``, the rest parsed once."""
        parsed = LLMConfig.from_env()
        secrets = {
            field: EnvVar(name)
            for field, names in SECRET_ENV.items()
            for name in [next((n for n in names if os.environ.get(n)), None)]
            if name
        }
        return cls(
            **secrets, **{f: getattr(parsed, f) for f in SETTINGS}, offline=os.environ.get("HYPOGRAPH_LLM") == "offline"
        )

    def config(self) -> LLMConfig:
        """The client settings, from these fields alone."""
        return LLMConfig(
            model=self.model,
            base_url=self.base_url,
            api_key=self.api_key or "none",
            forced_offline=self.offline,
            **{f: getattr(self, f) for f in SETTINGS},
        )

    def client(self, state_dir: Path, task: str) -> LLMClient:
        return LLMClient(self.config(), state_dir, task)
