"""4b's writes: mint each planned cluster (or recognise one an interrupted run minted), complete
every cluster (constructed members, residual, member order, backlinks), set depends_on once every
new cluster has its id, and drop the stragglers. New nodes are minted under the vault lock
(``create_node``); edits go through the journal."""

from __future__ import annotations

from pathlib import Path

from hypograph.ids import id_number
from hypograph.journal import Step
from hypograph.structure.carving.plan import ClusterPlan, resolve
from hypograph.structure.dispositions.merge import drop
from hypograph.structure.members import embeds, member_links, set_members
from hypograph.vault.mint import Minter
from hypograph.vault.mint import create_node as mint_one
from hypograph.vault.nodes import Node, clean_title, link_target
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
    vault.add(rel, (vault.root / rel).read_text(encoding="utf-8"))
    return node_id, rel


def existing_cluster(vault: Vault, plan: ClusterPlan, taken: list) -> str | None:
    """The HC an interrupted run minted for ``plan`` before it could record the id, if any."""
    for hc in vault.of_type("hypothesis-cluster"):
        listed = {link_target(link) for link in hc.meta.get("hypotheses") or []}
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
        if h.meta.get("origin"):
            target = link_target(h.meta.get("cluster"))
            if target:
                by_cluster.setdefault(target, []).append(h)
    for hc_id in [hc.id for hc in vault.of_type("hypothesis-cluster")]:
        minted += _complete_cluster(vault, hc_id, plans.get(hc_id), mint, by_cluster, batch)
    for hc in vault.of_type("hypothesis-cluster"):
        for member_id in (link_target(link) for link in hc.meta.get("hypotheses") or []):
            h = vault.nodes.get(member_id)
            if h is not None and h.meta.get("state") == "active" and link_target(h.meta.get("cluster")) != hc.id:
                h.meta["cluster"] = hc.link
                batch.touch(h)
    batch.apply()
    return minted


def _complete_cluster(
    vault: Vault,
    hc_id: str,
    plan: ClusterPlan | None,
    mint: Minter | None,
    by_cluster: dict[str, list[Node]],
    batch: Batch,
) -> list[str]:
    """Mint what cluster ``hc_id`` still lacks, list it, and resolve the plan's placeholders for
    its minted members (the changes go to ``batch``). Returns the ids minted."""
    hc = vault.nodes[hc_id]
    minted_for_it = list(by_cluster.get(hc_id, []))
    minted, constructed = [], []
    question = plan.question if plan else hc.meta.get("question")

    def new(title: str, meta: dict, body: str) -> str:
        node_id, _ = _mint(vault, mint, "hypothesis", title, meta, body)
        by_cluster.setdefault(hc_id, []).append(vault.nodes[node_id])
        minted.append(node_id)
        return node_id

    # Constructed members first, in the plan's order, then the residual: minted ids follow member order.
    for c in plan.constructed if plan else []:
        have = next(
            (
                h.id
                for h in minted_for_it
                if h.meta.get("origin") == "step-4-constructed" and h.title == clean_title(c["title"])
            ),
            None,
        )
        if have is None:
            have = new(
                c["title"],
                {
                    "statement": c["statement"],
                    "question": c.get("question") or question,
                    "source": None,
                    "locator": None,
                    "state": "active",
                    "cluster": hc.link,
                    "origin": "step-4-constructed",
                },
                f"\nConstructed complement: {c['reason']}\n",
            )
        constructed.append(have)
    listed = [link_target(link) for link in hc.meta.get("hypotheses") or []]
    residual = next(
        (i for i in listed if i in vault.nodes and vault.nodes[i].meta.get("residual") is True),
        next((h.id for h in minted_for_it if h.meta.get("residual") is True), None),
    )
    if hc.meta.get("exhaustive_by_construction") is not True and residual is None:
        r = (
            {"title": plan.residual_title, "statement": plan.residual_statement, "note": plan.residual_note}
            if plan
            else {
                "title": f"The answer is not listed here - {hc.title}",
                "statement": f"The answer to this cluster's sub-question ({hc.title}) "
                "is something none of its other members states.",
                "note": "Residual catch-all so that exactly one member of the cluster is true.",
            }
        )
        residual = new(
            r["title"],
            {
                "statement": r["statement"],
                "question": (plan.residual_question if plan else None) or question,
                "source": None,
                "locator": None,
                "state": "active",
                "cluster": hc.link,
                "residual": True,
                "origin": "step-4-residual",
            },
            f"\n{r['note']}\n",
        )
    adopted = [h for h in by_cluster.get(hc_id, []) if h.id not in listed]
    if adopted:
        members = [vault.nodes[i] for i in listed if i in vault.nodes]
        named = [m for m in members if m.meta.get("residual") is not True]
        named += sorted((h for h in adopted if h.meta.get("residual") is not True), key=lambda h: id_number(h.id))
        ordered = named + [m for m in members + adopted if m.meta.get("residual") is True]
        set_members(hc, ordered)
        batch.touch(hc)
    if plan:
        _resolve(vault, hc, constructed, residual, batch)
    return minted


def _resolve(vault: Vault, hc, constructed: list[str], residual: str | None, batch: Batch) -> None:
    """The cluster and its minted members with the placeholders for those members replaced by
    their ids (a node without a placeholder is left as it is)."""
    for node in [hc] + [vault.nodes[i] for i in [*constructed, residual] if i in vault.nodes]:
        for key, value in list(node.meta.items()):
            if isinstance(value, str):
                node.meta[key] = resolve(value, constructed, residual)
            elif isinstance(value, list):
                node.meta[key] = [resolve(v, constructed, residual) if isinstance(v, str) else v for v in value]
        node.body = resolve(node.body, constructed, residual)
        if node.changed:
            batch.touch(node)


def set_depends_on(vault: Vault, plans: list[ClusterPlan], new_ids: list[str]) -> None:
    """Write each new cluster's depends_on notes, now that every cluster they name has an id."""
    batch = Batch(vault)
    for plan, hc_id in zip(plans, new_ids, strict=True):
        if plan.depends_on:
            hc = vault.nodes[hc_id]
            hc.meta["depends_on"] = [f"{new_ids[k]}: {note}" for k, note in plan.depends_on]
            batch.touch(hc)
    batch.apply()


def drop_stragglers(vault: Vault, stragglers: dict[str, str]) -> None:
    batch = Batch(vault)
    for h_id, reason in stragglers.items():
        if vault.nodes[h_id].meta.get("state") == "dropped":
            continue  # dropped by the run this one completes
        for node, dest in drop(vault, vault.nodes[h_id], reason):
            batch.touch(node, str(dest))
    batch.apply()
