"""The one way Hypograph talks to a language model: any OpenAI-compatible endpoint through the
official ``openai`` client, structured answers validated by pydantic, every call traced and cached.
Every decision a model may make goes through ``hypograph.llm.policy``: the model's validated
answer, or the deterministic offline decision (no model configured, the answer rejected, the
endpoint out).

The names below are imported when first asked for (PEP 562): ``hypograph.llm.config``, which every
front door reads through ``hypograph.environment``, loads without the client and its models.
"""

from importlib import import_module

_HOMES = {
    "Ask": "policy",
    "LLMClient": "client",
    "LLMConfig": "config",
    "LLMUnavailable": "client",
    "ModelPolicy": "policy",
    "OfflinePolicy": "policy",
    "Policy": "policy",
    "Rejected": "client",
    "Usage": "client",
    "policy_for": "policy",
    "usage_line": "client",
}
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


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
