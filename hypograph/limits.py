"""Limits on parsed untrusted data (a hypothesis file's JSON, a node's frontmatter): what can be
read but not processed safely. Bottom layer: imports nothing of hypograph.

* nesting deeper than ``MAX_DEPTH`` (no hypothesis field needs it; deeper data would exhaust the
  stack of a later JSON writer or validator, far from the file's name);
* a string or key holding a lone surrogate (``"\\ud800"`` parses, but can never be written as UTF-8).
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 64


def data_problem(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why parsed data ``value`` cannot be processed (too deep, a lone surrogate), or None.
    Iterative, so it never recurses itself."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        if isinstance(item, dict):
            stack.extend((k, depth + 1) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str) and not encodable(item):
            return f"text {_preview(item)} holds a lone surrogate (not valid Unicode)"
    return None


def encodable(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (no lone surrogate, e.g. from an undecodable file name)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _preview(text: str) -> str:
    return ascii(text[:40])
