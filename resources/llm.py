"""The LLM resource: hands each asset an ``LLMClient`` configured from the environment.

The key is read from the environment when a client is made, so it never appears in the
resource's config (and so never in the UI).
"""

from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field

from hypograph.llm import LLMClient, LLMConfig


class LLMResource(ConfigurableResource):
    """``offline``: force the deterministic offline policy even when a model is configured."""

    offline: bool = Field(default=False, description="force the offline policy")

    def client(self, state_dir: Path, task: str) -> LLMClient:
        return LLMClient(LLMConfig.from_env(offline=self.offline), state_dir, task)
