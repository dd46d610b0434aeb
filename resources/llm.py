"""The LLM resource: hands each asset an ``LLMClient`` built from its fields over the environment.

The environment is read through ``hypograph.environment`` (``llm_config``, in the run's own
process: a command's, the daemon's, a worker's; a bad value was refused when the code location
loaded). A field set in the run config overrides it;
empty, the environment's value holds. Model, endpoint and key are ``EnvVar`` fields when the variable
is set where the code location loads, so the UI shows the variable's name and never its value.
Without a model, the offline policy.
"""

from pathlib import Path

from dagster import ConfigurableResource, EnvVar
from pydantic import Field

from hypograph import environment
from hypograph.llm import LLMClient, LLMConfig


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
        return cls(**{field: EnvVar(name) for field, name in environment.llm_secret_variables().items()})

    def config(self) -> LLMConfig:
        """The client settings: the environment's, with every field set here over it."""
        offline = self.offline if self.offline is not None else environment.current().offline
        given = {f: v for f in type(self).model_fields if f != "offline" and (v := getattr(self, f)) is not None}
        return LLMConfig.model_validate({**dict(environment.llm_config(offline=offline)), **given})

    def client(self, state_dir: Path, task: str) -> LLMClient:
        return LLMClient(self.config(), state_dir, task)
