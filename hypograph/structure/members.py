"""A cluster's member list, written in two places kept in step: the ``hypotheses`` field (links,
in order) and the body's run of ``![[…]]`` embed lines (the same members, same order)."""

from __future__ import annotations

from hypograph.vault.node_view import set_members_field
from hypograph.vault.nodes import Node

BY_HAND = "Changed by hand:"  # opens a cluster body's line recording a person's change to its members


def member_links(members: list[Node]) -> list[str]:
    """``[[ID - Title]]`` for each member, in order (the HC's ``hypotheses`` field)."""
    return [f"[[{m.path.stem}]]" for m in members]


def embeds(members: list[Node]) -> str:
    """One ``![[ID - Title]]`` line per member, blank lines between (an HC body's member block)."""
    return "\n\n".join(f"![[{m.path.stem}]]" for m in members)


def replace_embeds(body: str, members: list[Node]) -> str:
    """Rewrite the first run of ``![[…]]`` embed lines (blank lines between them included) to list
    ``members`` in order; every other line of the body is kept as it is."""
    lines = body.split("\n")
    first = next((k for k, line in enumerate(lines) if line.strip().startswith("![[")), None)
    if first is None:
        return f"\n{embeds(members)}\n" + body
    last = first
    for k in range(first, len(lines)):
        if lines[k].strip().startswith("![["):
            last = k
        elif lines[k].strip():
            break
    return "\n".join(lines[:first] + embeds(members).split("\n") + lines[last + 1 :])


def set_members(hc: Node, ordered: list[Node]) -> None:
    """List ``ordered`` as ``hc``'s members, in the field and in the body."""
    set_members_field(hc, member_links(ordered))
    hc.body = replace_embeds(hc.body, ordered)
