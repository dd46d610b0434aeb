"""Case batch settings (docs/case.md), as run config."""

from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field

from hypograph.casework.config import HypothesisConfig


class CaseSettings(ConfigurableResource):
    """Where the analysis policy comes from, the attempt id, and the vault a batch flows into."""

    config_file: str | None = Field(default=None, description="analysis TOML (default: the seed's 3/5/100)")
    attempt: str | None = Field(default=None, description="a new attempt id, to correct a rejected or blocked attempt")
    vault: str | None = Field(default=None, description="vault the accepted hypotheses are minted into as H nodes")

    def policy(self) -> HypothesisConfig:
        return HypothesisConfig.load(Path(self.config_file)) if self.config_file else HypothesisConfig()
