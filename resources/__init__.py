"""Dagster resources every product shares: where each input lives, the LLM, and the base of each
product's settings resource (``resources/settings.py``; the products' own are in ``assets/<product>/resource.py``)."""

from resources.inputs import Inputs
from resources.llm import LLMResource

__all__ = ["Inputs", "LLMResource"]
