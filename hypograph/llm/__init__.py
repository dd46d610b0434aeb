"""The one way Hypograph talks to a language model: any OpenAI-compatible endpoint through the
official ``openai`` client, structured answers validated by pydantic, every call traced and cached.
Every decision a model may make goes through ``hypograph.llm.policy``: the model's validated
answer, or the deterministic offline decision (no model configured, the answer rejected, the
endpoint out)."""

from hypograph.llm.client import LLMClient, LLMUnavailable, Rejected, Usage, usage_line
from hypograph.llm.config import LLMConfig
from hypograph.llm.policy import Ask, ModelPolicy, OfflinePolicy, Policy, policy_for

__all__ = [
    "Ask",
    "LLMClient",
    "LLMConfig",
    "LLMUnavailable",
    "ModelPolicy",
    "OfflinePolicy",
    "Policy",
    "Rejected",
    "Usage",
    "policy_for",
    "usage_line",
]
