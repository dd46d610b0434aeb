"""Dagster resources: where each input lives, proximity settings, the LLM."""

from resources.inputs import Inputs
from resources.llm import LLMResource
from resources.proximity import ProximitySettings

__all__ = ["Inputs", "LLMResource", "ProximitySettings"]
