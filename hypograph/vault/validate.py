"""What step 4 can check in a vault before it writes anything, so a run never half-rewrites a vault
and only then finds a problem it cannot fix.

Step 4a/4b rewrite and move hypothesis nodes and rewrite cluster nodes; they cannot repair a node a
person left inconsistent (a ``merged`` node without ``merged_into``, a ``dropped`` one without a
``drop_reason``, a file in the wrong folder, an unknown state), nor write a file whose name leaves
no room for the temporary name of a safe write. Such a node would fail check 1 (or the write) only
after the other nodes were rewritten; here it is refused first, in one line naming the file and
the field. (Nodes 4a fixes itself — an active hypothesis without ``state`` — pass.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from hypograph.errors import HypographError
from hypograph.paths import name_problem
from hypograph.vault.node_view import NodeView
from hypograph.vault.nodes import Node
from hypograph.vault.vault import Vault

FOLDER = {"active": Path("hypotheses"), "merged": Path("hypotheses/merged"), "dropped": Path("hypotheses/dropped")}
REWRITTEN = ("hypothesis", "hypothesis-cluster")  # the node types step 4 may rewrite or move


def validate_before_structuring(vault: Vault) -> None:
    """Raise one HypographError naming the first node step 4 could not leave consistent (and how
    many more there are); return when there is none. Writes nothing."""
    problems = list(structuring_problems(vault))
    if problems:
        more = f" (and {len(problems) - 1} more; fix them and re-run)" if len(problems) > 1 else ""
        raise HypographError(f"{problems[0]}{more}; nothing was changed")


def structuring_problems(vault: Vault) -> Iterator[str]:
    """``"<file>: field '<name>': <what is wrong>"`` for each problem, in id order."""
    for node_type in REWRITTEN:
        for node in vault.of_type(node_type):
            problem = name_problem(node.path.name)
            if problem:
                yield f"{vault.root / node.path}: {problem}"
    for h in vault.of_type("hypothesis"):
        problem = _state_problem(vault, h)
        if problem:
            yield f"{vault.root / h.path}: {problem}"


def _state_problem(vault: Vault, h: Node) -> str | None:
    view = NodeView(h)
    state = view.state
    if state is None and h.path.parent == FOLDER["active"]:
        return None  # not dispositioned yet: 4a makes it active
    if state not in FOLDER:
        return f"field 'state': {state!r} is not one of active, merged, dropped"
    if h.path.parent != FOLDER[state]:
        return f"field 'state': {state} but the file is in {h.path.parent}/, not {FOLDER[state]}/"
    if state == "merged":
        return _merge_problem(vault, view)
    if state == "dropped":
        reason = view.drop_reason
        if not isinstance(reason, str) or not reason.strip():
            return "field 'drop_reason': empty, but the node is dropped"
    return None


def _merge_problem(vault: Vault, view: NodeView) -> str | None:
    """A merged node's ``merged_into`` must name an active (or not yet dispositioned) hypothesis."""
    target = vault.resolve(view.merged_into)
    if target is None or target.type != "hypothesis":
        return f"field 'merged_into': {view.merged_into!r} does not link to a hypothesis node"
    if not NodeView(target).open:
        return f"field 'merged_into': {target.id} is {NodeView(target).state}, not active (one hop)"
    return None
