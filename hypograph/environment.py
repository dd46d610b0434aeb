"""Every environment variable Hypograph reads, parsed in this one module and nowhere else.

``current()`` is the process environment as an ``Environment`` (a pydantic-settings model), parsed
once per distinct set of values; a bad value raises one ``HypographError`` line naming the variable,
what it allows and the value given (``HYPOGRAPH_READ_WAIT: must be ≥ 0 and ≤ 86400 (got 'nan')``).
Every front door calls it before anything else: ``hypograph`` and ``prox`` before any run or file is
touched, the code location (``pipelines/definitions.py``) when it loads. ``llm_config()`` is the
model's settings; their ranges live in ``hypograph.llm.config.LLMConfig`` (the
``HYPOGRAPH_LLM_*`` values are validated through it, not repeated here).

=================================  ===================================================  ==========================
variable                           meaning and range                                    default
=================================  ===================================================  ==========================
HYPOGRAPH_EXECUTOR                 in_process, multiprocess, celery or k8s              in_process
HYPOGRAPH_CELERY_CONFIG            the workers' YAML (celery): a regular file           (none; needed by celery)
HYPOGRAPH_SHARD_STORAGE            where a sharded step's ranges travel (any UPath)     $DAGSTER_HOME/storage
HYPOGRAPH_WORKSPACE                folder the inputs_discovered sensor registers from   (none: sensor off)
HYPOGRAPH_READ_WAIT                seconds a reader waits for a structuring, 0-86400    30
HYPOGRAPH_MEMORY_LIMIT             bytes a graph may use: 1K-1024T (e.g. 512M, 4G)      MemAvailable / cgroup
HYPOGRAPH_ARXIV_URL                arXiv Atom endpoint, an http(s) URL                  export.arxiv.org
HYPOGRAPH_SEARCH_URL               the older name of HYPOGRAPH_ARXIV_URL                (none)
HYPOGRAPH_OPENALEX_URL             OpenAlex works endpoint, an http(s) URL              api.openalex.org
HYPOGRAPH_OPENALEX_MAILTO          address for OpenAlex's polite pool (has an @)        (none)
HYPOGRAPH_LLM                      offline (every run offline) or auto                  auto
HYPOGRAPH_LLM_MODEL                model name; unset means offline                      (offline)
HYPOGRAPH_LLM_BASE_URL             endpoint, an http(s) URL: http://localhost:8000/v1   OPENAI_BASE_URL, else OpenAI
HYPOGRAPH_LLM_API_KEY              key                                                  OPENAI_API_KEY, else "none"
HYPOGRAPH_LLM_TIMEOUT              deadline per request, wall seconds: >0, ≤3600        120
HYPOGRAPH_LLM_MAX_RETRIES          retries of a transient failure: 0-10                 3
HYPOGRAPH_LLM_CONCURRENCY          requests in flight at once: 1-64                     4
HYPOGRAPH_LLM_MAX_TOKENS           answer budget of every task: 16-1,000,000            (per schema)
HYPOGRAPH_LLM_CONTEXT_LENGTH       the endpoint's context in tokens: 256-10,000,000     (learned from a 400)
HYPOGRAPH_LLM_STRUCTURED_OUTPUT    auto, json_schema, json_object or prompt             auto
HYPOGRAPH_LLM_RETRY_REJECTED       1/0 (true/false, yes/no): ask again what was         0
                                   rejected
=================================  ===================================================  ==========================

An empty variable means its default. Numbers are finite (``nan``/``inf`` refused). The maxima are
where a larger value is a mistake rather than a need: a reader waiting over a day for a lock is
waiting for a dead holder; openai's backoff waits up to 8 s per retry, so 10 retries already ride
out a minute and a half of outage; no endpoint serves more than 10M tokens of context.

Variables that are not Hypograph's (``DAGSTER_HOME``, ``XDG_CACHE_HOME``, the key variable a case
config's ``api_key_env`` names) are read through ``other(name)``, here too, unparsed: they belong
to Dagster, the desktop or the user.
"""

from __future__ import annotations

import math
import os
import re
import stat
from functools import lru_cache
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, BeforeValidator, Field, SecretStr, ValidationError, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from hypograph.errors import HypographError, settings_line
from hypograph.llm.config import LLMConfig

PREFIX = "HYPOGRAPH_"
OPENAI_FALLBACKS = ("OPENAI_BASE_URL", "OPENAI_API_KEY")
KILO = 1024
MEMORY_MAX = KILO**5  # 1024T: more than any one machine holds; a larger value is a typo
SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMGT]?)i?B?\s*", re.IGNORECASE)


def _bytes(value: object) -> int:
    """``512M``, ``4G``, ``1.5T`` or plain bytes, as bytes from 1K to 1024T."""
    m = SIZE.fullmatch(value) if isinstance(value, str) else None
    number = float(m.group(1)) * KILO ** "_KMGT".index((m.group(2) or "_").upper()) if m else math.nan
    if not KILO <= number <= MEMORY_MAX:  # nan (no size) too
        raise PydanticCustomError("size", "must be bytes or a size like 512M or 4G, from 1K to 1024T")
    return int(number)


def _http_url(value: str | None) -> str | None:
    parts = urlsplit(value) if value else None
    if parts is not None and (parts.scheme not in ("http", "https") or not parts.netloc):
        raise PydanticCustomError("url", "must be an http:// or https:// URL with a host")
    return value


MemoryBytes = Annotated[int, BeforeValidator(_bytes)]
LLM_FIELDS = ("timeout", "max_retries", "concurrency", "max_tokens", "context_length", "structured_output")


class Environment(BaseSettings):
    """The ``HYPOGRAPH_*`` variables (and the two ``OPENAI_*`` fallbacks), each with its range; the
    table of the module's docstring says them all. The ``llm_*`` number fields stay text here:
    ``LLMConfig`` parses and bounds them (``llm_config``)."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX, env_ignore_empty=True, extra="ignore", frozen=True, allow_inf_nan=False
    )

    executor: Literal["in_process", "multiprocess", "celery", "k8s"] = "in_process"
    celery_config: str | None = None
    shard_storage: str | None = None
    workspace: str | None = None
    read_wait: float = Field(default=30.0, ge=0, le=86400)
    memory_limit: MemoryBytes | None = None
    arxiv_url: str | None = None
    search_url: str | None = None
    openalex_url: str | None = None
    openalex_mailto: str | None = Field(default=None, pattern=r"^[^@\s]+@[^@\s]+$", max_length=254)
    llm: Literal["offline", "auto"] = "auto"
    llm_model: str | None = None
    llm_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices(f"{PREFIX}LLM_BASE_URL", "OPENAI_BASE_URL")
    )
    llm_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices(f"{PREFIX}LLM_API_KEY", "OPENAI_API_KEY")
    )
    llm_timeout: str | None = None
    llm_max_retries: str | None = None
    llm_concurrency: str | None = None
    llm_max_tokens: str | None = None
    llm_context_length: str | None = None
    llm_structured_output: str | None = None
    llm_retry_rejected: str | None = None

    check_urls = field_validator("arxiv_url", "search_url", "openalex_url", "llm_base_url")(_http_url)

    @field_validator("celery_config")
    @classmethod
    def _regular_file(cls, value: str | None) -> str | None:
        """The workers' settings are read by ``pipelines/executor.py``: a FIFO or device would block it."""
        if value is not None:
            try:
                mode = os.stat(value).st_mode
            except OSError as e:
                raise PydanticCustomError("file", "cannot be read ({why})", {"why": e.strerror}) from None
            if not stat.S_ISREG(mode):
                raise PydanticCustomError("file", "must name a regular file (a FIFO, device or folder is never read)")
        return value

    @property
    def offline(self) -> bool:
        """``HYPOGRAPH_LLM=offline``: every run offline unless its own config says otherwise."""
        return self.llm == "offline"

    @property
    def search_endpoint(self) -> str | None:
        return self.arxiv_url or self.search_url

    def llm_config(self, offline: bool = False) -> LLMConfig:
        """The model's settings from ``HYPOGRAPH_LLM_*``, validated (and bounded) by ``LLMConfig``;
        ``offline`` forces the offline policy."""
        given = {f: raw for f in LLM_FIELDS if (raw := getattr(self, f"llm_{f}")) is not None}
        try:
            return LLMConfig(
                model=self.llm_model or None,
                base_url=self.llm_base_url or None,
                api_key=self.llm_api_key or SecretStr("none"),
                retry_rejected=self.llm_retry_rejected or False,
                forced_offline=offline,
                **given,
            )
        except ValidationError as e:
            names = {f: variable(f"llm_{f}") for f in (*LLM_FIELDS, "retry_rejected")}
            raise HypographError(settings_line(LLMConfig, e, names)) from None


def variable(field: str) -> str:
    """The name of the variable ``field`` of ``Environment`` is read from (the first, of two)."""
    return _names(field)[0]


def current() -> Environment:
    """The process environment, parsed and checked (its LLM settings included); a bad value is one
    ``HypographError`` line. Parsed again only when one of its variables changed."""
    key = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(PREFIX) or k in OPENAI_FALLBACKS))
    return _parsed(key)


@lru_cache(maxsize=8)
def _parsed(key: tuple[tuple[str, str], ...]) -> Environment:
    """``Environment()`` reads ``os.environ`` itself; ``key`` (its relevant items) only keys the cache."""
    try:
        env = Environment()
    except ValidationError as e:
        raise HypographError(
            settings_line(Environment, e, {f: variable(f) for f in Environment.model_fields})
        ) from None
    env.llm_config()  # its ranges are LLMConfig's: a bad HYPOGRAPH_LLM_* is refused here, with the rest
    return env


def llm_config(offline: bool = False) -> LLMConfig:
    """The model's settings of this process's environment (``offline``: forced offline)."""
    return current().llm_config(offline)


def llm_secret_variables() -> dict[str, str]:
    """``model``, ``base_url``, ``api_key`` -> the variable each is set by (the first set of its
    names), for the Dagster resource's ``EnvVar`` fields: the UI shows the name, never the value."""
    current()  # checked first, as every read here
    names = {field: _names(f"llm_{field}") for field in ("model", "base_url", "api_key")}
    return {field: name for field, choices in names.items() if (name := _set(choices))}


def _names(field: str) -> tuple[str, ...]:
    alias = Environment.model_fields[field].validation_alias
    return tuple(alias.choices) if isinstance(alias, AliasChoices) else (f"{PREFIX}{field.upper()}",)


def _set(names: tuple[str, ...]) -> str | None:
    return next((n for n in names if os.environ.get(n)), None)


def other(name: str) -> str | None:
    """A variable that is not Hypograph's (``DAGSTER_HOME``, ``XDG_CACHE_HOME``, an endpoint's
    ``api_key_env``), as set; None when unset or empty."""
    return os.environ.get(name) or None
