"""The one way Hypograph talks to a language model: any OpenAI-compatible endpoint through the
official ``openai`` client, structured answers validated by pydantic, every call traced and cached.
With no model configured, callers fall back to their deterministic offline policy."""

from hypograph.llm.client import LLMClient, Rejected, Usage
from hypograph.llm.config import LLMConfig

__all__ = ["LLMClient", "LLMConfig", "Rejected", "Usage"]
