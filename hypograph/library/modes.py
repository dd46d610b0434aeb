"""Library rounds' mode resolution: ``behavior-source`` is the only selector.

==================  ===============  =========================================================
--behavior-source   --behavior       outcome
==================  ===============  =========================================================
(omitted)           absent           discover
(omitted)           present          given
discover            absent           discover
discover            present          discover; one line reports the mismatch, behavior ignored
given               present          given
given               absent           halt: asks for the behavior (never a silent fallback)
==================  ===============  =========================================================

``--mode`` is accepted and ignored with a one-line note. In ``given``, the behavior is an existing
node id (reused; an unknown id is an error) or free text (one new behavior node, ``source:
given``; a text equal after normalisation to an existing statement reuses that node).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from hypograph.errors import HypographError
from hypograph.library.schema import Library
from hypograph.text import normalise

Source = Literal["discover", "given"]
ID_LIKE_RE = re.compile(r"^\s*[Bb]([1-9]\d*)\s*$")


@dataclass
class Resolution:
    """The resolved selector: ``source``, the behavior argument kept for generation, notes to print."""

    source: Source
    behavior: str | None
    notes: list[str] = field(default_factory=list)


@dataclass
class Target:
    """The given-mode behavior: an existing node (``existing_id``) or a new one from ``statement``."""

    statement: str
    existing_id: str | None = None


def resolve_mode(behavior_source: str | None, behavior: str | None, mode: str | None = None) -> Resolution:
    """Apply the table above; HypographError for ``given`` without a behavior or an unknown source."""
    notes = []
    if mode is not None:
        notes.append(f"--mode {mode!r} ignored: behavior-source (discover|given) is the only selector")
    behavior = behavior.strip() if behavior and behavior.strip() else None
    if behavior_source is None:
        return Resolution("given" if behavior else "discover", behavior, notes)
    if behavior_source not in ("discover", "given"):
        raise HypographError(f"--behavior-source {behavior_source!r}: choose discover or given")
    if behavior_source == "given" and behavior is None:
        raise HypographError(
            "--behavior-source given needs a behavior: pass --behavior B<n> (an existing node) "
            'or --behavior "<one-sentence phenomenon>"'
        )
    if behavior_source == "discover" and behavior is not None:
        notes.append(
            f"--behavior {behavior!r} ignored: --behavior-source discover was given explicitly "
            "(mismatch; discover generates its own behaviors)"
        )
        return Resolution("discover", None, notes)
    return Resolution(behavior_source, behavior, notes)


def resolve_target(library: Library | None, behavior: str) -> Target:
    """The given-mode target for ``behavior`` in ``library`` (None: no file yet)."""
    m = ID_LIKE_RE.match(behavior)
    if m:
        bid = f"B{m.group(1)}"
        node = library.behavior(bid) if library else None
        if node is None:
            known = ", ".join(b.id for b in library.behaviors[:10]) if library and library.behaviors else "none"
            raise HypographError(f"--behavior {bid}: no such behavior in hypothesis_library.json (behaviors: {known})")
        return Target(node.statement, bid)
    key = normalise(behavior)
    for node in library.behaviors if library else []:
        if normalise(node.statement) == key:
            return Target(node.statement, node.id)
    return Target(behavior.strip())
