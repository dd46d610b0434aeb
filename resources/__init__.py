"""Dagster resources: where the input lives, proximity settings, the LLM."""

from resources.input import HypographInput
from resources.llm import LLMResource
from resources.proximity import ProximitySettings

__all__ = ["HypographInput", "LLMResource", "ProximitySettings"]
