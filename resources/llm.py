"""The LLM resource: hands each asset an ``LLMClient`` built from its fields over the environment.

Its fields are ``LLMConfig``'s (one declaration: ``hypograph/llm/config.py``), each optional: an
empty field takes the environment's value, read through ``hypograph.environment`` (``llm_config``,
in the run's own process: a command's, the daemon's, a worker's; a bad value was refused when the
code location loaded); ``offline`` is ``forced_offline``. Model, endpoint and key are ``EnvVar``
fields when the variable is set where the code location loads, so the UI shows the variable's name
and never its value. Without a model, the offline policy. A value out of ``LLMConfig``'s range is
one ``SettingRefused`` line, as for the products' settings.
"""

from pathlib import Path
from typing import Literal, get_origin

from dagster import ConfigurableResource, EnvVar
from pydantic import Field, ValidationError, create_model

from hypograph import environment
from hypograph.errors import SettingRefused, settings_line
from hypograph.llm import LLMClient, LLMConfig

# LLMConfig's name -> the resource's (``forced_offline`` reads as ``offline`` in the Launchpad).
RENAMED = {"forced_offline": "offline"}


def _optional(name: str) -> tuple:
    """``LLMConfig.name`` as an optional run-config field: the key as plain text (an ``EnvVar``), a
    choice as text (Dagster takes no optional ``Literal``; ``config()`` names the choices)."""
    info = LLMConfig.model_fields[name]
    annotation = str if name == "api_key" or get_origin(info.annotation) is Literal else info.annotation
    return (annotation | None, Field(default=None, description=info.description))


_Fields = create_model(
    "_LLMFields",
    __base__=ConfigurableResource,
    **{RENAMED.get(name, name): _optional(name) for name in LLMConfig.model_fields},
)


class LLMResource(_Fields):
    """An OpenAI-compatible endpoint, or the deterministic offline policy; an empty field takes the
    environment's value."""

    @classmethod
    def from_environment(cls) -> "LLMResource":
        """The resource the code location loads: each secret set where it loads bound as ``EnvVar``."""
        return cls(**{field: EnvVar(name) for field, name in environment.llm_secret_variables().items()})

    def config(self) -> LLMConfig:
        """The client settings: the environment's, with every field set here over it."""
        offline = self.offline if self.offline is not None else environment.current().offline
        given = {
            name: value
            for name in LLMConfig.model_fields
            if name != "forced_offline" and (value := getattr(self, name)) is not None
        }
        try:
            return LLMConfig.model_validate({**dict(environment.llm_config(offline=offline)), **given})
        except ValidationError as e:
            raise SettingRefused(settings_line(LLMConfig, e)) from None

    def client(self, state_dir: Path, task: str) -> LLMClient:
        return LLMClient(self.config(), state_dir, task)
