"""The model round of a dispatch: ordered failover across configured endpoints, no sleeping.

Each endpoint is asked once through ``LLMClient`` with the openai client's own retries off
(``max_retries=0``: those back off by sleeping, and a dispatch never sleeps). The first endpoint
that answers decides: a valid answer, or an invalid one (``Rejected``; not an outage, and not
sent to the next endpoint). Only when every endpoint fails is the round an outage, which the
builder turns into a retry round with a persisted due time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hypograph import environment
from hypograph.case.config import HypothesisConfig
from hypograph.errors import HypographError, NotDone
from hypograph.llm.client import LLMClient, Rejected, Request
from hypograph.llm.config import LLMConfig

TASK = "case-hypotheses"
# The same line reaches the command and the UI (the job raises it): it names the file both ways.
NEEDS_MODEL = (
    "needs a model: set [[endpoints]] in the analysis config (the --config file; config_file in the "
    "Launchpad's resources.case) or HYPOGRAPH_LLM_MODEL (and HYPOGRAPH_LLM_BASE_URL); nothing was changed"
)


class NeedsModel(NotDone):
    """No model is configured (or ``HYPOGRAPH_LLM=offline``) for a step that needs one: exit 2."""

    def __init__(self, message: str = NEEDS_MODEL):
        super().__init__(message)


@dataclass
class RoundOutcome:
    """``answer`` (validated), or ``rejected`` (reason), or neither: an outage (``failures``)."""

    answer: object | None = None
    rejected: str | None = None
    endpoint: str | None = None
    failures: list[str] = field(default_factory=list)
    usage: dict = field(default_factory=dict)

    @property
    def outage(self) -> bool:
        return self.answer is None and self.rejected is None


class CaseGateway:
    """Ordered endpoints; ``ask`` is synchronous (the builder runs it in a worker thread)."""

    def __init__(self, endpoints: list[LLMConfig], reasks: int = 0):
        if not endpoints or any(e.offline for e in endpoints):
            raise HypographError("a case gateway needs at least one configured model endpoint")
        self.endpoints = [
            e.model_copy(update={"max_retries": 0, "validation_retries": reasks, "concurrency": 1}) for e in endpoints
        ]

    @classmethod
    def from_config(cls, config: HypothesisConfig, default: LLMConfig | None = None) -> CaseGateway | None:
        """Endpoints from ``[[endpoints]]``, else ``default`` (the Dagster resource's model), else the
        HYPOGRAPH_LLM_* environment (the CLI outside Dagster); None if no model."""
        if config.endpoints:
            return cls([e.llm_config() for e in config.endpoints], config.reasks)
        fallback = default if default is not None else environment.llm_config()
        return None if fallback.offline else cls([fallback], config.reasks)

    @classmethod
    def required(cls, config: HypothesisConfig, default: LLMConfig | None = None) -> CaseGateway:
        """The gateway of ``config``; raises NeedsModel (exit 2), before anything is written, when no
        model is configured or ``HYPOGRAPH_LLM=offline`` (case batches have no offline answer)."""
        gateway = cls.optional(config, default)
        if gateway is None:
            raise NeedsModel()
        return gateway

    @classmethod
    def optional(cls, config: HypothesisConfig, default: LLMConfig | None = None) -> CaseGateway | None:
        """The gateway of ``config`` (as ``required``), or None when no model is configured or
        ``HYPOGRAPH_LLM=offline``: a published batch is reused, and minted, without one."""
        offline = default.forced_offline if default is not None else environment.current().offline
        return None if offline else cls.from_config(config, default=default)

    def describe(self) -> list[str]:
        return [e.describe() for e in self.endpoints]

    def ask(self, request: Request, state_dir: Path, task: str = TASK) -> RoundOutcome:
        """One round of ``request`` over the endpoints in order; traces and cache under ``task``."""
        outcome = RoundOutcome()
        for config in self.endpoints:
            client = LLMClient(config, state_dir, task)
            try:
                result = client.ask(request)
            except HypographError as e:
                outcome.failures.append(str(e))
                continue
            finally:
                outcome.usage = {k: outcome.usage.get(k, 0) + v for k, v in client.usage.as_metadata().items()}
            outcome.endpoint = config.describe()
            if isinstance(result, Rejected):
                outcome.rejected = result.reason
            else:
                outcome.answer = result
            return outcome
        return outcome
