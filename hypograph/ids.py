"""Node ids (``H-12``, ``HC-3``, ``O-7``): the one pattern, their natural order and their number.

Bottom layer: imports nothing of hypograph.
"""

from __future__ import annotations

import re

ID_RE = re.compile(r"^([A-Z]+)-(\d+)$")


def id_sort_key(node_id: str) -> tuple[str, int, str]:
    """Natural order for ids: H-2 < H-10; ids of another shape sort after, as strings."""
    m = ID_RE.match(node_id)
    return (m.group(1), int(m.group(2)), "") if m else ("~", 0, node_id)


def id_number(node_id: str) -> int:
    """``H-12`` -> 12; ValueError for anything that is not an id."""
    m = ID_RE.match(node_id)
    if not m:
        raise ValueError(f"not an id: {node_id!r}")
    return int(m.group(2))


def canonical_id(node_id: str) -> str:
    """``H-0012`` and ``H-12`` -> ``H-12``: the id two spellings share (to find collisions only;
    an id is kept and written as spelled). Anything that is not an id is returned as it is."""
    m = ID_RE.match(node_id)
    return f"{m.group(1)}-{int(m.group(2))}" if m else node_id
