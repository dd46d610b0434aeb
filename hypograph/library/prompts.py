"""The library's system prompts, versioned data files in ``data/prompts/<name>.v<N>.txt``.

``prompt(name)`` returns ``(version, text)`` for the version the code uses (``VERSIONS``). The
version is recorded with what the prompt produced (dedup verdicts, scores) and is part of the LLM
cache key through the text itself, so a new rubric re-asks instead of serving old answers.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

VERSIONS = {
    "generate": "generate.v2",
    "dedup": "dedup.v2",
    "queries": "queries.v1",
    "score": "score.v2",
    "topic": "topic.v1",
}


@cache
def prompt(name: str) -> tuple[str, str]:
    """``(version, text)`` of the prompt ``name`` (generate, dedup, queries, score, topic)."""
    version = VERSIONS[name]
    text = resources.files("hypograph.library").joinpath(f"data/prompts/{version}.txt").read_text(encoding="utf-8")
    return version, text.strip()
