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

Every value is checked; a bad one is one ``HypographError`` line naming the file and the key.
Numbers are finite (TOML's ``nan`` and ``inf`` are refused); the retry delays are at most
``MAX_DELAY`` (a week: a round due later is a typo, not a plan) and the factor at most
``MAX_FACTOR``; an endpoint's numbers and ``model.reasks`` have ``LLMConfig``'s ranges (checked
through it, the one place they live).
"""

from __future__ import annotations

import datetime as dt
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from hypograph import environment
from hypograph.atomic import read_regular
from hypograph.errors import HypographError, settings_line
from hypograph.llm.config import LLMConfig, StructuredOutput

UNIT = "investigation_units"
CONFIG_MAX = 1 << 20  # a config file is a few kB; a larger one is refused unread
MAX_DELAY = 7 * 86400.0  # seconds: retry.first_delay_seconds and retry.max_delay_seconds
MAX_FACTOR = 10.0  # retry.factor


@dataclass(frozen=True)
class HypothesisPolicy:
    """The counts and budget a revision's batch is generated under (saved as policy.json)."""

    min_hypotheses: int = 3
    max_hypotheses: int = 5
    initial_budget: int = 100

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
        return cls(doc["min_hypotheses"], doc["max_hypotheses"], doc["initial_budget"])


@dataclass(frozen=True)
class HypothesisLimits:
    """Operational limits (bytes, documents); independent of the package format."""

    context_bytes: int = 1 << 20
    prior_documents: int = 32
    output_bytes: int = 2 << 20
    summary_bytes: int = 2 << 20


@dataclass(frozen=True)
class ArchiveLimits:
    """What a ZIP input may hold, checked from its central directory before anything is extracted.
    Absolute or ``..`` member names and links are always refused (no key turns that off)."""

    max_members: int = 10000
    max_total_bytes: int = 1 << 30
    max_member_bytes: int = 256 << 20
    max_ratio: int = 100


@dataclass(frozen=True)
class RetryPolicy:
    """``rounds`` dispatches may fail on an unreachable model; after round k < rounds the next is
    due ``min(first_delay * factor**(k-1), max_delay)`` seconds later; after the last, BLOCKED."""

    rounds: int = 10
    first_delay_seconds: float = 60.0
    factor: float = 2.0
    max_delay_seconds: float = 3600.0

    def delay(self, failed_round: int) -> dt.timedelta:
        seconds = self.first_delay_seconds * self.factor ** (failed_round - 1)
        return dt.timedelta(seconds=min(seconds, self.max_delay_seconds))


@dataclass(frozen=True)
class Endpoint:
    """One OpenAI-compatible endpoint; the key is read from ``api_key_env`` at call time."""

    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    timeout_seconds: float = 60.0
    context_length: int | None = None  # tokens the server takes (llama.cpp's --n_ctx): larger prompts are refused
    max_tokens: int | None = None  # the answer's budget, instead of the one sized from its schema
    structured_output: str = "auto"  # auto | json_schema | json_object | prompt


@dataclass(frozen=True)
class HypothesisConfig:
    policy: HypothesisPolicy = field(default_factory=HypothesisPolicy)
    limits: HypothesisLimits = field(default_factory=HypothesisLimits)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    endpoints: tuple[Endpoint, ...] = ()
    reasks: int = 0  # re-asks of an invalid answer inside one attempt (0: the attempt is rejected)
    archives: ArchiveLimits = field(default_factory=ArchiveLimits)

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
    def from_mapping(cls, data: Mapping[str, Any], where: str = "config") -> HypothesisConfig:
        _only(data, {"hypotheses", "limits", "retry", "endpoints", "model", "archives"}, where, "")
        h = _table(data, "hypotheses", where)
        _only(h, {f for f in HypothesisPolicy.__dataclass_fields__}, where, "hypotheses.")
        policy = HypothesisPolicy(
            **{
                k: _positive_int(h, k, getattr(HypothesisPolicy, k), where, "hypotheses.")
                for k in HypothesisPolicy.__dataclass_fields__
            }
        )
        if policy.min_hypotheses > policy.max_hypotheses:
            raise HypographError(
                f"{where}: hypotheses.min_hypotheses: {policy.min_hypotheses} exceeds "
                f"hypotheses.max_hypotheses {policy.max_hypotheses}"
            )
        lt = _table(data, "limits", where)
        _only(lt, set(HypothesisLimits.__dataclass_fields__), where, "limits.")
        limits = HypothesisLimits(
            **{
                k: _positive_int(lt, k, getattr(HypothesisLimits, k), where, "limits.")
                for k in HypothesisLimits.__dataclass_fields__
            }
        )
        rt = _table(data, "retry", where)
        _only(rt, set(RetryPolicy.__dataclass_fields__), where, "retry.")
        retry = RetryPolicy(
            rounds=_positive_int(rt, "rounds", RetryPolicy.rounds, where, "retry."),
            first_delay_seconds=_positive_number(rt, "first_delay_seconds", RetryPolicy.first_delay_seconds, where),
            factor=_positive_number(rt, "factor", RetryPolicy.factor, where, MAX_FACTOR),
            max_delay_seconds=_positive_number(rt, "max_delay_seconds", RetryPolicy.max_delay_seconds, where),
        )
        model = _table(data, "model", where)
        _only(model, {"reasks"}, where, "model.")
        reasks = model.get("reasks", 0)
        if isinstance(reasks, bool) or not isinstance(reasks, int) or reasks < 0:
            raise HypographError(f"{where}: model.reasks: must be a non-negative integer, got {reasks!r}")
        _llm_ranges({"validation_retries": reasks}, {"validation_retries": "model.reasks"}, where)
        at = _table(data, "archives", where)
        _only(at, set(ArchiveLimits.__dataclass_fields__), where, "archives.")
        archives = ArchiveLimits(
            **{
                k: _positive_int(at, k, getattr(ArchiveLimits, k), where, "archives.")
                for k in ArchiveLimits.__dataclass_fields__
            }
        )
        return cls(policy, limits, retry, _endpoints(data.get("endpoints", []), where), reasks, archives)

    def describe(self) -> dict:
        return {
            "policy": asdict(self.policy),
            "limits": asdict(self.limits),
            "retry": asdict(self.retry),
            "archives": asdict(self.archives),
            "endpoints": [f"{e.model}@{e.base_url or 'default'}" for e in self.endpoints],
        }


def _table(data: Mapping, key: str, where: str) -> Mapping:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise HypographError(f"{where}: {key}: must be a table")
    return value


def _only(table: Mapping, allowed: set[str], where: str, prefix: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise HypographError(f"{where}: {prefix}{unknown[0]}: unknown key (allowed: {', '.join(sorted(allowed))})")


def _positive_int(table: Mapping, key: str, default: int, where: str, prefix: str) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise HypographError(f"{where}: {prefix}{key}: must be a positive integer, got {value!r}")
    return value


def _positive_number(table: Mapping, key: str, default: float, where: str, most: float = MAX_DELAY) -> float:
    """A finite number above 0 and at most ``most`` (TOML's ``nan`` and ``inf`` are refused)."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= most:  # nan: False
        raise HypographError(f"{where}: retry.{key}: must be a finite number > 0 and ≤ {most:g}, got {value!r}")
    return float(value)


def _llm_ranges(values: dict, names: dict[str, str], where: str) -> None:
    """``values`` (LLMConfig fields) within LLMConfig's ranges, else one line naming ``names``' keys."""
    try:
        LLMConfig(**values)
    except ValidationError as e:
        raise HypographError(f"{where}: {settings_line(LLMConfig, e, names)}") from None


def _endpoints(raw: Any, where: str) -> tuple[Endpoint, ...]:
    if not isinstance(raw, list):
        raise HypographError(f"{where}: endpoints: must be an array of tables ([[endpoints]])")
    out = []
    for i, e in enumerate(raw):
        key = f"endpoints[{i}]"
        if not isinstance(e, Mapping):
            raise HypographError(f"{where}: {key}: must be a table")
        _only(e, set(Endpoint.__dataclass_fields__), where, f"{key}.")
        if not isinstance(e.get("model"), str) or not e["model"].strip():
            raise HypographError(f"{where}: {key}.model: a model name is required")
        for k in ("base_url", "api_key_env"):
            if k in e and not isinstance(e[k], str):
                raise HypographError(f"{where}: {key}.{k}: must be a string")
        timeout = e.get("timeout_seconds", 60.0)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise HypographError(f"{where}: {key}.timeout_seconds: must be a number, got {timeout!r}")
        tokens = {k: _tokens(e, k, where, key) for k in ("context_length", "max_tokens")}
        names = {"timeout": f"{key}.timeout_seconds", "context_length": f"{key}.context_length"}
        _llm_ranges({"timeout": timeout, **tokens}, {**names, "max_tokens": f"{key}.max_tokens"}, where)
        mode = e.get("structured_output", "auto")
        if mode not in STRUCTURED_OUTPUT:
            raise HypographError(
                f"{where}: {key}.structured_output: one of {', '.join(STRUCTURED_OUTPUT)}, got {mode!r}"
            )
        out.append(
            Endpoint(
                e["model"], e.get("base_url"), e.get("api_key_env"), float(timeout), **tokens, structured_output=mode
            )
        )
    return tuple(out)


STRUCTURED_OUTPUT = get_args(StructuredOutput)


def _tokens(e: Mapping, name: str, where: str, key: str) -> int | None:
    """A token count of an endpoint (absent: None), a whole number (its range: ``LLMConfig``'s)."""
    value = e.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise HypographError(f"{where}: {key}.{name}: must be a whole number, got {value!r}")
    return value


def env_key(endpoint: Endpoint) -> str:
    """The endpoint's key from the environment (``"none"`` when it takes none)."""
    return (environment.other(endpoint.api_key_env) if endpoint.api_key_env else None) or "none"
