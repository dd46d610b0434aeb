"""Undo a merge: the absorbed node returns to ``hypotheses/`` as active, and the survivor gives
back its source, its locator entry and its ``merged_from`` link. The pair is recorded as a human
KEEP in the 4a ledger so the next structuring run does not merge it again.

If the survivor is in a cluster, the restored node joins that cluster (it answers the same
sub-question — it was taken for a duplicate), at its ascending-id place before the residual: a
person undoing a merge is the one deliberate exception to a cluster's frozen order."""

from __future__ import annotations

from pathlib import Path

from hypograph.errors import HypographError
from hypograph.ids import id_number
from hypograph.journal import Journal, Step
from hypograph.structure.baseline import read_baseline
from hypograph.structure.dispositions.ledger import PairDecision, pair_key, read_ledger, write_ledger
from hypograph.structure.members import set_members
from hypograph.vault.mint import structuring_lock
from hypograph.vault.nodes import link_target
from hypograph.vault.vault import open_vault


def unmerge(root: Path, node_id: str) -> tuple[str, str]:
    """Restore ``node_id`` (state merged). Returns (restored id, survivor id)."""
    with structuring_lock(root):  # a concurrent 4a must not write back a ledger read before this
        return _unmerge(Path(root), node_id)


def _unmerge(root: Path, node_id: str) -> tuple[str, str]:
    vault = open_vault(root)
    node = vault.nodes.get(node_id)
    if node is None or node.type != "hypothesis":
        raise HypographError(f"{root}: no hypothesis {node_id}")
    if node.meta.get("state") != "merged":
        raise HypographError(f"{node.path}: field 'state': {node_id} is {node.meta.get('state')!r}, not merged")
    survivor = vault.resolve(node.meta.get("merged_into"))
    if survivor is None:
        raise HypographError(f"{node.path}: field 'merged_into': {node.meta.get('merged_into')!r} resolves to no node")
    baseline = read_baseline(root) or {}

    meta = survivor.meta
    meta["merged_from"] = [m for m in meta.get("merged_from") or [] if link_target(m) != node_id]
    own_source = link_target(node.meta.get("source"))
    still_from = [vault.nodes[t] for t in (link_target(m) for m in meta["merged_from"]) if t in vault.nodes]
    still_sources = {link_target(n.meta.get("source")) for n in still_from}
    if own_source not in still_sources:
        meta["additional_sources"] = [s for s in meta.get("additional_sources") or [] if link_target(s) != own_source]
        if isinstance(meta.get("locator"), list) and own_source != link_target(meta.get("source")):
            meta["locator"] = [loc for loc in meta["locator"] if str(loc).split(":", 1)[0].strip() != own_source]
    if not meta["merged_from"]:
        # No longer a survivor: back to its step-3 shape (single locator, original statement).
        original = baseline.get(survivor.id, {})
        for key in ("merged_from", "additional_sources", "generalization_note"):
            meta.pop(key, None)
        if "locator" in original:
            meta["locator"] = original["locator"]
        if "statement" in original:
            meta["statement"] = original["statement"]
    elif not meta.get("additional_sources"):
        meta.pop("additional_sources", None)

    node.meta["state"] = "active"
    node.meta.pop("merged_into", None)
    steps = [Step(to=str(survivor.path), text=survivor.text())]
    cluster = vault.resolve(survivor.meta.get("cluster"))
    if cluster is not None and cluster.type == "hypothesis-cluster":
        node.meta["cluster"] = cluster.link
        steps.append(_join_cluster(vault, cluster, node))
    steps.append(Step(to=str(Path("hypotheses") / node.path.name), text=node.text(), src=str(node.path)))
    # The KEEP goes on record first: if the files then fail half-way, no later run re-merges them.
    ledger = read_ledger(root)
    ledger.pairs[pair_key(survivor.id, node_id)] = PairDecision(
        pair=(survivor.id, node_id),
        decision="KEEP",
        decided_by="human",
        rationale=f"Unmerged by hand ({node_id} from {survivor.id}).",
    )
    write_ledger(root, ledger)
    Journal(root).apply(steps)
    return node_id, survivor.id


def _join_cluster(vault, cluster, node) -> Step:
    """The journal step adding ``node`` to ``cluster`` in ascending-id order, residual last."""
    members = [
        vault.nodes[t] for t in (link_target(link) for link in cluster.meta.get("hypotheses") or []) if t in vault.nodes
    ]
    named = [m for m in members if m.meta.get("residual") is not True] + [node]
    named.sort(key=lambda m: id_number(m.id))
    ordered = named + [m for m in members if m.meta.get("residual") is True]
    # The node's link as it will be once moved back to hypotheses/ (same filename).
    set_members(cluster, ordered)
    return Step(to=str(cluster.path), text=cluster.text())
