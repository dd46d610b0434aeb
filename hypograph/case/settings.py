"""What a case step is asked to do: the one settings model that ``hypograph case``/``batch`` flags,
the Launchpad's run config and the ``case_retries_due`` sensor all become, validated before a run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from hypograph.case.config import HypothesisConfig


class CaseSettings(BaseModel):
    """Where the analysis policy comes from, the attempt id, and the vault a batch flows into."""

    model_config = ConfigDict(extra="forbid")

    config_file: str | None = Field(
        default=None, description="analysis TOML (default: the hypothesis builder spec's 3/5/100)"
    )
    attempt: str | None = Field(default=None, description="a new attempt id, to correct a rejected or blocked attempt")
    vault: str | None = Field(default=None, description="vault the accepted hypotheses are minted into as H nodes")

    @field_validator("config_file")
    @classmethod
    def _config_valid(cls, value: str | None) -> str | None:
        """The file read and checked now, so a bad one refuses the run before it exists (the
        command, the Launchpad, a sensor): one line naming the file and the key."""
        if value is not None:
            from hypograph.case.config import HypothesisConfig
            from hypograph.errors import HypographError

            try:
                HypothesisConfig.load(Path(value))
            except HypographError as e:
                raise ValueError(str(e)) from None
        return value

    def policy(self) -> HypothesisConfig:
        from hypograph.case.config import HypothesisConfig

        return HypothesisConfig.load(Path(self.config_file)) if self.config_file else HypothesisConfig()
