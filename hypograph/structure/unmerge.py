"""Undo a merge: the absorbed node returns to ``hypotheses/`` as active, and the survivor gives
back its source, its locator entry and its ``merged_from`` link. The pair is recorded as a human
KEEP in 4a's ledger so the next structuring run does not merge it again.

If the survivor is in a cluster, the restored node joins that cluster (it answers the same
sub-question — it was taken for a duplicate), at its ascending-id place before the residual: a
person undoing a merge is the one deliberate exception to a cluster's frozen order.

Only the fields that change are rewritten (``Node.text`` keeps every other field's YAML as it was)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hypograph.errors import HypographError
from hypograph.ids import id_number
from hypograph.journal import Journal, Step
from hypograph.structure.baseline import read_baseline
from hypograph.structure.dispositions.ledger import PairDecision, pair_key, read_ledger, write_ledger
from hypograph.structure.members import set_members
from hypograph.vault.mint import structuring_lock
from hypograph.vault.node_view import (
    NodeView,
    remove_fields,
    restore_active,
    set_additional_sources,
    set_cluster,
    set_locator,
    set_merged_from,
    set_statement,
)
from hypograph.vault.nodes import Node, link_target
from hypograph.vault.vault import Vault, open_vault


@dataclass(frozen=True)
class Unmerged:
    """What ``unmerge_node`` did: the node restored, its former survivor, and the cluster the
    restored node joined (None when the survivor is in none: the next structuring clusters it)."""

    restored: str
    survivor: str
    cluster: str | None

    def summary(self) -> str:
        """One line for a person: what happened and what, if anything, is left to do."""
        gave_back = f"{self.survivor} gave back its source and locator"
        if self.cluster is None:
            return (
                f"{self.restored} restored to hypotheses/ (active); {gave_back}. "
                "Run `hypograph structure` to cluster it."
            )
        return (
            f"{self.restored} restored to hypotheses/ (active) and placed in {self.cluster}, "
            f"{self.survivor}'s cluster; {gave_back}."
        )


def unmerge(root: Path, node_id: str) -> tuple[str, str]:
    """Restore ``node_id`` (state merged). Returns (restored id, survivor id)."""
    done = unmerge_node(root, node_id)
    return done.restored, done.survivor


def unmerge_node(root: Path, node_id: str) -> Unmerged:
    """Restore ``node_id`` (state merged); says which cluster, if any, it joined."""
    with structuring_lock(root):  # a concurrent 4a must not write back a ledger read before this
        return _unmerge(Path(root), node_id)


def _unmerge(root: Path, node_id: str) -> Unmerged:
    vault = open_vault(root)
    node, survivor = _merged_pair(vault, node_id)
    _give_back(vault, survivor, node, read_baseline(root) or {})
    restore_active(node)
    steps = [Step(to=str(survivor.path), text=survivor.text())]
    cluster = vault.resolve(NodeView(survivor).cluster)
    if cluster is None or cluster.type != "hypothesis-cluster":
        cluster = None
    else:
        set_cluster(node, cluster.link)
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
    return Unmerged(node_id, survivor.id, cluster.id if cluster is not None else None)


def _merged_pair(vault: Vault, node_id: str) -> tuple[Node, Node]:
    """The merged hypothesis ``node_id`` and the survivor it was merged into; refused otherwise."""
    node = vault.nodes.get(node_id)
    if node is None or node.type != "hypothesis":
        raise HypographError(f"{vault.root}: no hypothesis {node_id}")
    view = NodeView(node)
    if not view.merged:
        raise HypographError(f"{node.path}: field 'state': {node_id} is {view.state!r}, not merged")
    survivor = vault.resolve(view.merged_into)
    if survivor is None:
        raise HypographError(f"{node.path}: field 'merged_into': {view.merged_into!r} resolves to no node")
    return node, survivor


def _give_back(vault: Vault, survivor: Node, node: Node, baseline: dict) -> None:
    """The survivor drops ``node`` from ``merged_from``, and its source and locator entry unless
    another node still merged into it cites that source; a survivor left with no merged node
    returns to its step-3 shape (single locator, original statement)."""
    merged_from = [m for m in NodeView(survivor).merged_from or [] if link_target(m) != node.id]
    set_merged_from(survivor, merged_from)
    own_source = NodeView(node).source_id
    still_from = [vault.nodes[t] for t in (link_target(m) for m in merged_from) if t in vault.nodes]
    if own_source not in {NodeView(n).source_id for n in still_from}:
        _drop_source(survivor, own_source)
    if not merged_from:
        _step3_shape(survivor, baseline.get(survivor.id, {}))
    elif not NodeView(survivor).additional_sources:
        remove_fields(survivor, "additional_sources")


def _drop_source(survivor: Node, source: str | None) -> None:
    """``source`` leaves the survivor's ``additional_sources`` and, unless it is the survivor's own,
    its locator entries."""
    view = NodeView(survivor)
    set_additional_sources(survivor, [s for s in view.additional_sources or [] if link_target(s) != source])
    if isinstance(view.locator, list) and source != view.source_id:
        set_locator(survivor, [loc for loc in view.locator if str(loc).split(":", 1)[0].strip() != source])


def _step3_shape(survivor: Node, original: dict) -> None:
    """No longer a survivor: the merge fields go, the step-3 locator and statement come back."""
    remove_fields(survivor, "merged_from", "additional_sources", "generalization_note")
    if "locator" in original:
        set_locator(survivor, original["locator"])
    if "statement" in original:
        set_statement(survivor, original["statement"])


def _join_cluster(vault: Vault, cluster: Node, node: Node) -> Step:
    """The journal step adding ``node`` to ``cluster`` in ascending-id order, residual last."""
    members = [vault.nodes[t] for t in NodeView(cluster).listed_ids if t in vault.nodes]
    named = [m for m in members if not NodeView(m).residual] + [node]
    named.sort(key=lambda m: id_number(m.id))
    ordered = named + [m for m in members if NodeView(m).residual]
    # The node's link as it will be once moved back to hypotheses/ (same filename).
    set_members(cluster, ordered)
    return Step(to=str(cluster.path), text=cluster.text())
