"""A person's MERGE (``proximity/review.json``) of a pair whose members are already clustered.

Clustered hypotheses are frozen (steps 7-8 index a cluster's members by position), so 4a never
judges them again. A person's MERGE is the one exception, as ``hypograph unmerge`` is: it is
applied, never silently ignored —

* survivor = the lower id (the seed's rule); the absorbed node gets ``state: merged`` and a one-hop
  ``merged_into``, moves to ``hypotheses/merged/`` and leaves its cluster (nodes merged into it
  follow it to the survivor); the survivor gains ``merged_from``, ``additional_sources`` and the
  per-source ``locator`` list, its statement unchanged; the survivor stays where it is;
* the cluster the absorbed node leaves lists its other members in their order and records the
  change in its body (a "Changed by hand:" line, which the structure map lists);
* the pair goes on the 4a ledger as a human MERGE.

It is refused, loudly (in the run's report and the CLI summary, every run while the review stands),
when applying it would break the vault: the cluster would keep fewer than 2 members, an exhaustive
cluster's argument names no member left, a member was minted at step 4 (residual or constructed),
or the pair was unmerged by hand (``hypograph unmerge``), which a review.json MERGE does not undo.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hypograph.ids import id_sort_key
from hypograph.journal import Step
from hypograph.proximity.adjudicate import Decision
from hypograph.structure.checks import names_a_member
from hypograph.structure.dispositions.ledger import Ledger, PairDecision, pair_key, write_ledger
from hypograph.structure.dispositions.merge import absorb, merged_into_index
from hypograph.structure.members import BY_HAND, set_members
from hypograph.structure.scope import open_to_4a
from hypograph.vault.node_view import NodeView, clear_cluster, set_merged
from hypograph.vault.nodes import Node
from hypograph.vault.vault import Vault, open_vault

REVIEW = "proximity/review.json"


def clustered_human_merges(vault: Vault, verdicts: list[Decision]) -> list[Decision]:
    """The human MERGE verdicts between two active hypotheses, at least one of them clustered."""
    open_ids = {h.id for h in open_to_4a(vault)}
    out = []
    for v in verdicts:
        nodes = [vault.nodes.get(i) for i in v.pair]
        if (
            v.decided_by == "human"
            and v.verdict == "MERGE"
            and all(n is not None and n.type == "hypothesis" and NodeView(n).open for n in nodes)
            and not set(v.pair) <= open_ids
        ):
            out.append(v)
    return out


@dataclass
class ByHand:
    """What ``apply_by_hand`` did: one line per merge applied and per merge refused (with its
    reason), and the (survivor, absorbed) ids of each merge applied, in the same order."""

    applied: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    merged: list[tuple[str, str]] = field(default_factory=list)


def apply_by_hand(vault: Vault | Path, verdicts: list[Decision], ledger: Ledger) -> ByHand:
    """Apply (or refuse) each human MERGE of clustered hypotheses, one after the other, on ``vault``
    (its index updated as the files are written; given a path, the vault is read first). Each is
    put on the ledger file before its files are written, so an interrupted run leaves no applied
    merge off the record."""
    if not isinstance(vault, Vault):
        vault = open_vault(vault)
    root = vault.root
    done = ByHand()
    applied, refused = done.applied, done.refused
    for v in clustered_human_merges(vault, verdicts):
        a, b = sorted(v.pair, key=id_sort_key)
        survivor, absorbed = vault.nodes[a], vault.nodes[b]
        gone = next((n for n in (survivor, absorbed) if not NodeView(n).open), None)
        if gone is not None:  # merged by an earlier review of this list
            refused.append(
                f"MERGE {a}/{b} from {REVIEW} refused: {gone.id} was just merged into "
                f"{NodeView(gone).merged_into_id} by another review; record that pair instead"
            )
            continue
        hc = _cluster_of(vault, b)
        reason = _refusal(vault, survivor, absorbed, hc, ledger)
        if reason:
            refused.append(f"MERGE {a}/{b} from {REVIEW} refused: {reason}")
            continue
        steps = _merge_steps(vault, survivor, absorbed, hc, v.rationale)
        ledger.pairs[pair_key(a, b)] = PairDecision(
            pair=(a, b),
            decision="MERGE",
            decided_by="human",
            rationale=f"Recorded in {REVIEW}; applied to clustered hypotheses as a deliberate exception"
            + (f" ({b} left {hc.id})." if hc else "."),
        )
        write_ledger(root, ledger)  # on record first: a re-run after a crash finds the merge done and recorded
        vault.apply(steps)
        applied.append(
            f"MERGE {a}/{b} from {REVIEW} applied: {b} merged into {a}" + (f" and left {hc.id}" if hc else "")
        )
        done.merged.append((a, b))
    return done


def _cluster_of(vault: Vault, h_id: str) -> Node | None:
    return next((hc for hc in vault.of_type("hypothesis-cluster") if h_id in NodeView(hc).listed_ids), None)


def _members_left(vault: Vault, hc: Node, absorbed: Node) -> list[Node]:
    """``hc``'s members in their order, ``absorbed`` left out."""
    return [vault.nodes[t] for t in NodeView(hc).listed_ids if t != absorbed.id and t in vault.nodes]


def _refusal(vault: Vault, survivor: Node, absorbed: Node, hc: Node | None, ledger: Ledger) -> str | None:
    """Why this merge cannot be applied, or None: the pair's own reasons first, then the cluster's."""
    return _pair_refusal(survivor, absorbed, ledger) or (_cluster_refusal(vault, absorbed, hc) if hc else None)


def _pair_refusal(survivor: Node, absorbed: Node, ledger: Ledger) -> str | None:
    """A member minted at step 4, or a pair a person kept apart (``hypograph unmerge``)."""
    minted = [n.id for n in (survivor, absorbed) if NodeView(n).minted]
    if minted:
        return f"{minted[0]} was minted at step 4 (residual or constructed member), not stated by a paper"
    earlier = ledger.pairs.get(pair_key(survivor.id, absorbed.id))
    if earlier and earlier.decided_by == "human" and earlier.decision == "KEEP":
        return (
            f"the pair was kept apart by hand ({earlier.rationale.rstrip('.')}); "
            f"remove its MERGE from {REVIEW} or merge it again deliberately"
        )
    return None


def _cluster_refusal(vault: Vault, absorbed: Node, hc: Node) -> str | None:
    """The cluster ``absorbed`` leaves would break check 2 (fewer than 2 members) or check 3 (an
    exhaustive cluster's argument naming no member left)."""
    left = _members_left(vault, hc, absorbed)
    if len(left) < 2:
        return (
            f"{absorbed.id} would leave {hc.id} with {len(left)} member(s) and a cluster needs at least 2 "
            f"(check 2, clusters are well formed); merge it by hand only after re-carving {hc.id}"
        )
    if NodeView(hc).exhaustive and not names_a_member(hc, left):
        return (
            f"{hc.id} is exhaustive by construction and its argument names no member but "
            f"{absorbed.id} (check 3, one residual or a justified exhaustive cluster)"
        )
    return None


def _merge_steps(vault: Vault, survivor: Node, absorbed: Node, hc: Node | None, rationale: str) -> list[Step]:
    """The journal steps of the merge: survivor and cluster first, then the moves."""
    followers = merged_into_index(vault).get(absorbed.id, [])
    absorb(survivor, [absorbed, *followers], None)
    steps = [Step(to=str(survivor.path), text=survivor.text())]
    if hc is not None:
        set_members(hc, _members_left(vault, hc, absorbed))
        why = " ".join(rationale.split())
        hc.body = (
            hc.body.rstrip("\n") + f"\n\n{BY_HAND} {absorbed.id} left this cluster, merged into "
            f'{survivor.id} by a person\'s MERGE in {REVIEW} ("{why}").\n'
        )
        steps.append(Step(to=str(hc.path), text=hc.text()))
    for x in (absorbed, *followers):
        set_merged(x, survivor.link)
        clear_cluster(x)  # no longer a member: the backlink is 4b's derived field
        steps.append(Step(to=str(Path("hypotheses/merged") / x.path.name), text=x.text(), src=str(x.path)))
    return steps
