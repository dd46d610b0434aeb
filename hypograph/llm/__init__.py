"""The one way Hypograph talks to a language model: any OpenAI-compatible endpoint through the
official ``openai`` client, structured answers validated by pydantic, every call traced and cached.
Every decision a model may make goes through ``hypograph.llm.policy``: the model's validated
answer, or the deterministic offline decision (no model configured, or the answer rejected)."""

from hypograph.llm.client import LLMClient, Rejected, Usage
from hypograph.llm.config import LLMConfig
from hypograph.llm.policy import Ask, ModelPolicy, OfflinePolicy, Policy, policy_for

__all__ = ["Ask", "LLMClient", "LLMConfig", "ModelPolicy", "OfflinePolicy", "Policy", "Rejected", "Usage", "policy_for"]
