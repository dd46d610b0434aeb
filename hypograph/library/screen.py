"""Screens for a model's free text before it can reach the library.

A model answers by item number; library ids (``B3``, ``B3-M2``) in its prose would be ids taken
from a model, and instruction-like text would carry an injection from the quoted data into the
file. Either makes the answer invalid: the client re-asks with the reason, then rejects it.
"""

from __future__ import annotations

import re

LIBRARY_ID_RE = re.compile(r"\bB\d+(?:-M\d+)?\b")
INJECTION_RE = re.compile(
    r"ignore (?:all |any |the )?(?:previous|prior|above|earlier) (?:instructions|prompts?|rules)"
    r"|disregard (?:all |the )?(?:previous|prior|above) "
    r"|system prompt|you are now|new instructions?:|developer mode"
    r"|</?(?:system|assistant|user|hypothesis|behavior|banlist|candidate|search|landscape)\b"
    r"|<\|[a-z_]+\|>",
    re.I,
)


def screen(field: str, text: str, allowed_ids: set[str] = frozenset()) -> None:
    """Raise ValueError naming ``field`` if ``text`` carries a library id or injection text."""
    ids = set(LIBRARY_ID_RE.findall(text)) - set(allowed_ids)
    if ids:
        raise ValueError(f"{field}: names library id(s) {', '.join(sorted(ids))}; refer to items by number only")
    m = INJECTION_RE.search(text)
    if m:
        raise ValueError(f"{field}: contains instruction-like text ({m.group(0)!r}); answer with content only")


def screen_all(prefix: str, value, allowed_ids: set[str] = frozenset()) -> None:
    """``screen`` every string inside a dumped answer (dicts and lists walked)."""
    if isinstance(value, str):
        screen(prefix, value, allowed_ids)
    elif isinstance(value, dict):
        for k, v in value.items():
            screen_all(f"{prefix}.{k}" if prefix else str(k), v, allowed_ids)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            screen_all(f"{prefix}[{i}]", v, allowed_ids)
