"""4b's writes: mint each planned cluster (or recognise one an interrupted run minted), complete
every cluster (constructed members, residual, member order, backlinks), set depends_on once every
new cluster has its id, and drop the stragglers. New nodes are minted under the vault lock
(``create_node``); edits go through the journal."""

from __future__ import annotations

from pathlib import Path

from hypograph.atomic import STATE_MAX, read_utf8
from hypograph.ids import id_number
from hypograph.journal import Step
from hypograph.structure.carving.plan import ClusterPlan, resolve
from hypograph.structure.dispositions.merge import drop
from hypograph.structure.members import embeds, member_links, set_members
from hypograph.vault.mint import Minter
from hypograph.vault.mint import create_node as mint_one
from hypograph.vault.node_view import NodeView, map_text, minted_member_meta, set_cluster
from hypograph.vault.node_view import set_depends_on as set_depends_on_field
from hypograph.vault.nodes import Node, clean_title
from hypograph.vault.vault import Vault


class Batch:
    """The nodes a batch of 4b's work changed (and where each goes), written as one journal plan."""

    def __init__(self, vault: Vault):
        self.vault = vault
        self.touched: dict[str, tuple[Node, str]] = {}

    def touch(self, node: Node, dest: str | None = None) -> None:
        old = self.touched.get(node.id)
        self.touched[node.id] = (node, dest or (old[1] if old else str(node.path)))

    def apply(self) -> int:
        steps = [
            Step(to=dest, text=node.text(), src=str(node.path))
            for node, dest in self.touched.values()
            if node.changed or dest != str(node.path)
        ]
        self.touched.clear()
        return self.vault.apply(steps)


def create_cluster(vault: Vault, plan: ClusterPlan, mint: Minter | None = None) -> str:
    """Mint the HC node with its paper members (taken into ``vault``'s index). Constructed members
    and the residual are minted by ``repair`` from the saved carve; depends_on starts empty and is
    set once every cluster of the carve has its id. Returns the HC id."""
    members = sorted((vault.nodes[i] for i in plan.members), key=lambda m: id_number(m.id))
    meta = {
        "hypotheses": member_links(members),
        "exclusivity": plan.exclusivity,
        "exhaustive_by_construction": plan.exhaustive,
        "independence": plan.independence,
        "depends_on": [],
    }
    if plan.question:
        meta["question"] = plan.question
    if plan.relevance:
        meta["relevance"] = plan.relevance
    body = f"\n{embeds(members)}\n\n## Why this carving\n\n{plan.justification}\n"
    hc_id, _ = _mint(vault, mint, "hypothesis-cluster", plan.title, meta, body)
    return hc_id


_MINTERS: dict[str, Minter] = {}  # vault root -> the minter of the batch being carved (``_mint``)


def create_node(
    root: Path, node_type: str, title: str, meta: dict | None = None, body: str = "", folder: str | None = None
) -> tuple[str, Path]:
    """``hypograph.vault.mint.create_node``, through the batch's minter when 4b holds one (one
    scan of the vault for the whole batch); the one place 4b mints."""
    mint = _MINTERS.get(str(root))
    if mint is None:
        return mint_one(root, node_type, title, meta, body, folder)
    node_id, rel, _text = mint.create(node_type, title, meta, body, folder)
    return node_id, rel


def _mint(vault: Vault, mint: Minter | None, node_type: str, title: str, meta: dict, body: str) -> tuple[str, Path]:
    """Mint a node and take it into ``vault``'s index."""
    key = str(vault.root)
    if mint is not None:
        _MINTERS[key] = mint
    try:
        node_id, rel = create_node(vault.root, node_type, title, meta, body)
    finally:
        _MINTERS.pop(key, None)
    vault.add(rel, read_utf8(vault.root / rel, STATE_MAX))
    return node_id, rel


def existing_cluster(vault: Vault, plan: ClusterPlan, taken: list) -> str | None:
    """The HC an interrupted run minted for ``plan`` before it could record the id, if any."""
    for hc in vault.of_type("hypothesis-cluster"):
        listed = set(NodeView(hc).listed_ids)
        if hc.id not in taken and hc.title == clean_title(plan.title) and set(plan.members) <= listed:
            return hc.id
    return None


def repair(vault: Vault, plans: dict[str, ClusterPlan], mint: Minter | None = None) -> list[str]:
    """Complete every cluster: mint the constructed members and the residual its plan still needs
    (adopting any an interrupted run minted already: they carry the cluster's backlink), list them
    (named members by id, residual last) and set every member's backlink; all in one journal plan.
    ``plans``: the carve's plan per HC id (a cluster without one just gets a residual if it lacks
    one). Returns the ids minted."""
    minted = []
    batch = Batch(vault)
    by_cluster: dict[str, list[Node]] = {}  # HC id -> hypotheses minted at step 4 whose backlink names it
    for h in vault.of_type("hypothesis"):
        view = NodeView(h)
        if view.minted and view.cluster_id:
            by_cluster.setdefault(view.cluster_id, []).append(h)
    for hc_id in [hc.id for hc in vault.of_type("hypothesis-cluster")]:
        work = _Completion(vault, vault.nodes[hc_id], plans.get(hc_id), mint, by_cluster)
        minted += work.complete(batch)
    for hc in vault.of_type("hypothesis-cluster"):
        for member_id in NodeView(hc).listed_ids:
            h = vault.nodes.get(member_id)
            if h is not None and NodeView(h).active and NodeView(h).cluster_id != hc.id:
                set_cluster(h, hc.link)
                batch.touch(h)
    batch.apply()
    return minted


class _Completion:
    """Completing one cluster ``hc``: mint what it still lacks (constructed members in the plan's
    order, then the residual, so minted ids follow member order), list what was minted for it, and
    resolve the plan's placeholders for its minted members. ``by_cluster``: HC id -> the hypotheses
    minted at step 4 whose backlink names it (updated as members are minted)."""

    def __init__(
        self,
        vault: Vault,
        hc: Node,
        plan: ClusterPlan | None,
        mint: Minter | None,
        by_cluster: dict[str, list[Node]],
    ):
        self.vault, self.hc, self.plan, self.mint, self.by_cluster = vault, hc, plan, mint, by_cluster
        self.minted_for_it = list(by_cluster.get(hc.id, []))  # minted by an earlier (interrupted) run
        self.minted: list[str] = []
        self.question = plan.question if plan else NodeView(hc).question

    def complete(self, batch: Batch) -> list[str]:
        """Do it all (the changes go to ``batch``); returns the ids minted."""
        constructed = [self._constructed(c) for c in (self.plan.constructed if self.plan else [])]
        listed = NodeView(self.hc).listed_ids
        residual = self._residual(listed)
        self._list_adopted(listed, batch)
        if self.plan:
            _resolve(self.vault, self.hc, constructed, residual, batch)
        return self.minted

    def _new(self, title: str, meta: dict, body: str) -> str:
        node_id, _ = _mint(self.vault, self.mint, "hypothesis", title, meta, body)
        self.by_cluster.setdefault(self.hc.id, []).append(self.vault.nodes[node_id])
        self.minted.append(node_id)
        return node_id

    def _constructed(self, c: dict) -> str:
        """The id of constructed member ``c``: one an interrupted run minted (same title), or new."""
        have = next(
            (h.id for h in self.minted_for_it if NodeView(h).constructed and h.title == clean_title(c["title"])), None
        )
        if have is not None:
            return have
        meta = minted_member_meta(c["statement"], c.get("question") or self.question, self.hc.link, residual=False)
        return self._new(c["title"], meta, f"\nConstructed complement: {c['reason']}\n")

    def _residual(self, listed: list[str | None]) -> str | None:
        """The cluster's residual: the one listed, one an interrupted run minted, or a new one
        (none for a cluster exhaustive by construction)."""
        nodes = self.vault.nodes
        residual = next(
            (i for i in listed if i in nodes and NodeView(nodes[i]).residual),
            next((h.id for h in self.minted_for_it if NodeView(h).residual), None),
        )
        if residual is not None or NodeView(self.hc).exhaustive:
            return residual
        r = self._residual_text()
        question = (self.plan.residual_question if self.plan else None) or self.question
        meta = minted_member_meta(r["statement"], question, self.hc.link, residual=True)
        return self._new(r["title"], meta, f"\n{r['note']}\n")

    def _residual_text(self) -> dict[str, str]:
        """The residual's title, statement and note: the plan's, or a plain catch-all's."""
        plan, hc = self.plan, self.hc
        if plan:
            return {"title": plan.residual_title, "statement": plan.residual_statement, "note": plan.residual_note}
        return {
            "title": f"The answer is not listed here - {hc.title}",
            "statement": f"The answer to this cluster's sub-question ({hc.title}) "
            "is something none of its other members states.",
            "note": "Residual catch-all so that exactly one member of the cluster is true.",
        }

    def _list_adopted(self, listed: list[str | None], batch: Batch) -> None:
        """List the members minted for the cluster but not listed yet: named members by id after
        the listed ones, the residual last."""
        adopted = [h for h in self.by_cluster.get(self.hc.id, []) if h.id not in listed]
        if not adopted:
            return
        members = [self.vault.nodes[i] for i in listed if i in self.vault.nodes]
        named = [m for m in members if not NodeView(m).residual]
        named += sorted((h for h in adopted if not NodeView(h).residual), key=lambda h: id_number(h.id))
        ordered = named + [m for m in members + adopted if NodeView(m).residual]
        set_members(self.hc, ordered)
        batch.touch(self.hc)


def _resolve(vault: Vault, hc, constructed: list[str], residual: str | None, batch: Batch) -> None:
    """The cluster and its minted members with the placeholders for those members replaced by
    their ids (a node without a placeholder is left as it is)."""
    for node in [hc] + [vault.nodes[i] for i in [*constructed, residual] if i in vault.nodes]:
        map_text(node, lambda text: resolve(text, constructed, residual))
        node.body = resolve(node.body, constructed, residual)
        if node.changed:
            batch.touch(node)


def set_depends_on(vault: Vault, plans: list[ClusterPlan], new_ids: list[str]) -> None:
    """Write each new cluster's depends_on notes, now that every cluster they name has an id."""
    batch = Batch(vault)
    for plan, hc_id in zip(plans, new_ids, strict=True):
        if plan.depends_on:
            hc = vault.nodes[hc_id]
            set_depends_on_field(hc, [f"{new_ids[k]}: {note}" for k, note in plan.depends_on])
            batch.touch(hc)
    batch.apply()


def drop_stragglers(vault: Vault, stragglers: dict[str, str]) -> None:
    batch = Batch(vault)
    for h_id, reason in stragglers.items():
        if NodeView(vault.nodes[h_id]).dropped:
            continue  # dropped by the run this one completes
        for node, dest in drop(vault, vault.nodes[h_id], reason):
            batch.touch(node, str(dest))
    batch.apply()
