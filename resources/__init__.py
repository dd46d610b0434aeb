"""Dagster resources: where each input lives, the LLM, and each product's settings."""

from resources.casework import CaseResource
from resources.inputs import Inputs
from resources.library import LibraryResource
from resources.llm import LLMResource
from resources.proximity import ProximityResource

__all__ = ["CaseResource", "Inputs", "LLMResource", "LibraryResource", "ProximityResource"]
