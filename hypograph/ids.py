"""Node ids (``H-12``, ``HC-3``, ``O-7``): the one pattern, their natural order and their number;
and the numbered keys of a library's rounds and a case's revisions (``r0003``), both ways.

Bottom layer: imports only ``hypograph.errors``.
"""

from __future__ import annotations

import re

from hypograph.errors import HypographError

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


NUMBERED_KEY_RE = re.compile(r"^r(\d{4,})$")


def numbered_key(n: int) -> str:
    """3 -> ``r0003``: a library round's or a case revision's key (four digits, more past 9999)."""
    return f"r{n:04d}"


def key_number(key: str) -> int:
    """``r0003`` -> 3; one HypographError line for a key of another shape (or ``r0000``)."""
    m = NUMBERED_KEY_RE.match(key)
    if not m or int(m.group(1)) < 1:
        raise HypographError(f"key {key!r}: expected r0001, r0002, …")
    return int(m.group(1))
