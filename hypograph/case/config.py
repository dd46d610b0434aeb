"""The analysis configuration of case batches: ``HypothesisConfig.load(path)`` from TOML.

```toml
[hypotheses]              # the generation policy, pinned per analysis revision
min_hypotheses = 3
max_hypotheses = 5
initial_budget = 100      # investigation units allocated to every accepted hypothesis

[limits]                  # operational limits; reaching one is an error, never a truncation
context_bytes = 1048576
prior_documents = 32
output_bytes = 2097152
summary_bytes = 2097152

[archives]                # ZIP inputs: checked before anything is extracted; one over is a refusal
max_members = 10000
max_total_bytes = 1073741824    # uncompressed, all members
max_member_bytes = 268435456    # uncompressed, one member
max_ratio = 100                 # uncompressed / compressed size of one member

[retry]                   # an unreachable model: rounds, each due later; blocked after the last
rounds = 10
first_delay_seconds = 60
factor = 2.0
max_delay_seconds = 3600

[[endpoints]]             # tried in this order in every dispatch (failover); none: HYPOGRAPH_LLM_*
model = "llama3.1"
base_url = "http://localhost:11434/v1"
api_key_env = "OLLAMA_API_KEY"
timeout_seconds = 120
context_length = 8192     # optional: the server's context (tokens); a larger prompt is refused, not sent
max_tokens = 1024         # optional: the answer's budget (default: sized from the answer's schema)
structured_output = "auto"  # optional: json_schema | json_object | prompt (auto tries them in turn)
```

Declared once, as the pydantic models below (``extra="forbid"``, strict numbers: TOML's ``true``
is no count, ``nan`` and ``inf`` no number): a bad value is one ``HypographError`` line naming the
file and the key (``analysis.toml: hypotheses.min_hypotheses: must be ≥ 1 (got 0)``). The retry
delays are at most ``MAX_DELAY`` (a week: a round due later is a typo, not a plan) and the factor
at most ``MAX_FACTOR``; an endpoint's fields and ``model.reasks`` are ``LLMConfig``'s own fields
(their ranges declared there, the one place they live). ``CaseSettings`` validates its config file
through ``load`` before any run of a case step, whichever door it comes in by.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from hypograph import environment
from hypograph.atomic import read_regular
from hypograph.errors import HypographError, settings_line
from hypograph.llm.config import LLMConfig, StructuredOutput

UNIT = "investigation_units"
CONFIG_MAX = 1 << 20  # a config file is a few kB; a larger one is refused unread
MAX_DELAY = 7 * 86400.0  # seconds: retry.first_delay_seconds and retry.max_delay_seconds
MAX_FACTOR = 10.0  # retry.factor

Count = Annotated[int, Field(ge=1, strict=True)]  # a positive whole number (TOML's true is none)
Seconds = Annotated[float, Field(gt=0, le=MAX_DELAY, strict=True)]


def _llm(field: str, default: Any = None) -> Any:
    """``LLMConfig.field``'s type and range (declared there), under this model's default."""
    info = LLMConfig.model_fields[field]
    return Annotated[info.annotation, Field(default, strict=True), *info.metadata]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class HypothesisPolicy(_Table):
    """The counts and budget a revision's batch is generated under (saved as policy.json)."""

    min_hypotheses: Count = 3
    max_hypotheses: Annotated[int, Field(ge=1, strict=True, validate_default=True)] = 5
    initial_budget: Count = 100

    @field_validator("max_hypotheses")
    @classmethod
    def _at_least_min(cls, value: int, info):
        least = info.data.get("min_hypotheses")
        if least is not None and value < least:
            raise ValueError(f"{value} is below hypotheses.min_hypotheses {least}")
        return value

    def document(self, revision: int, prompt_version: str) -> dict:
        return {
            "analysis_revision": revision,
            "min_hypotheses": self.min_hypotheses,
            "max_hypotheses": self.max_hypotheses,
            "initial_budget": self.initial_budget,
            "budget_unit": UNIT,
            "prompt_version": prompt_version,
        }

    @classmethod
    def from_document(cls, doc: dict) -> HypothesisPolicy:
        return cls(
            min_hypotheses=doc["min_hypotheses"],
            max_hypotheses=doc["max_hypotheses"],
            initial_budget=doc["initial_budget"],
        )


class HypothesisLimits(_Table):
    """Operational limits (bytes, documents); independent of the package format."""

    context_bytes: Count = 1 << 20
    prior_documents: Count = 32
    output_bytes: Count = 2 << 20
    summary_bytes: Count = 2 << 20


class ArchiveLimits(_Table):
    """What a ZIP input may hold, checked from its central directory before anything is extracted.
    Absolute or ``..`` member names and links are always refused (no key turns that off)."""

    max_members: Count = 10000
    max_total_bytes: Count = 1 << 30
    max_member_bytes: Count = 256 << 20
    max_ratio: Count = 100


class RetryPolicy(_Table):
    """``rounds`` dispatches may fail on an unreachable model; after round k < rounds the next is
    due ``min(first_delay * factor**(k-1), max_delay)`` seconds later; after the last, BLOCKED."""

    rounds: Count = 10
    first_delay_seconds: Seconds = 60.0
    factor: Annotated[float, Field(gt=0, le=MAX_FACTOR, strict=True)] = 2.0
    max_delay_seconds: Seconds = 3600.0

    def delay(self, failed_round: int) -> dt.timedelta:
        seconds = self.first_delay_seconds * self.factor ** (failed_round - 1)
        return dt.timedelta(seconds=min(seconds, self.max_delay_seconds))


class Endpoint(_Table):
    """One OpenAI-compatible endpoint: ``LLMConfig``'s fields (``timeout`` as ``timeout_seconds``,
    the key read from ``api_key_env`` at call time)."""

    model: Annotated[str, Field(strict=True)]
    base_url: _llm("base_url")
    api_key_env: Annotated[str | None, Field(None, strict=True)]
    timeout_seconds: _llm("timeout", 60.0)
    context_length: _llm("context_length")  # tokens the server takes (llama.cpp's --n_ctx)
    max_tokens: _llm("max_tokens")  # the answer's budget, instead of the one sized from its schema
    structured_output: StructuredOutput = "auto"

    @field_validator("model")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a model name is required")
        return value

    def llm_config(self) -> LLMConfig:
        """The client settings of this endpoint, its key taken from the environment now."""
        return LLMConfig(
            **self.model_dump(exclude={"api_key_env", "timeout_seconds"}),
            timeout=self.timeout_seconds,
            api_key=SecretStr(env_key(self)),
        )


class ModelTable(_Table):
    reasks: _llm("validation_retries", 0)  # re-asks of an invalid answer inside one attempt (0: rejected)


class HypothesisConfig(_Table):
    """The analysis config: the TOML's tables, each a model above (``[hypotheses]`` is ``policy``)."""

    model_config = ConfigDict(populate_by_name=True)

    policy: HypothesisPolicy = Field(default_factory=HypothesisPolicy, alias="hypotheses")
    limits: HypothesisLimits = Field(default_factory=HypothesisLimits)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    endpoints: tuple[Endpoint, ...] = ()
    model: ModelTable = Field(default_factory=ModelTable)
    archives: ArchiveLimits = Field(default_factory=ArchiveLimits)

    @property
    def reasks(self) -> int:
        return self.model.reasks

    @classmethod
    def load(cls, path: str | Path) -> HypothesisConfig:
        """Read and check ``path``; errors name the file and the key."""
        path = Path(path)
        try:
            data = tomllib.loads(read_regular(path, CONFIG_MAX, follow=True).decode("utf-8"))
        except FileNotFoundError:
            raise HypographError(f"{path}: no such config file (copy config/analysis.example.toml)") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise HypographError(f"{path}: not valid TOML: {e}") from None
        return cls.from_mapping(data, str(path))

    @classmethod
    def from_mapping(cls, data: Any, where: str = "config") -> HypothesisConfig:
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise HypographError(f"{where}: {settings_line(cls, e)}") from None

    def describe(self) -> dict:
        return {
            "policy": self.policy.model_dump(),
            "limits": self.limits.model_dump(),
            "retry": self.retry.model_dump(),
            "archives": self.archives.model_dump(),
            "endpoints": [f"{e.model}@{e.base_url or 'default'}" for e in self.endpoints],
        }


def env_key(endpoint: Endpoint) -> str:
    """The endpoint's key from the environment (``"none"`` when it takes none)."""
    return (environment.other(endpoint.api_key_env) if endpoint.api_key_env else None) or "none"
