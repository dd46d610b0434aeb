"""4b's writes: mint each planned cluster (or recognise one an interrupted run minted), complete
every cluster (constructed members, residual, member order, backlinks), set depends_on once every
new cluster has its id, and drop the stragglers. New nodes are minted under the vault lock
(``create_node``); edits go through the journal."""

from __future__ import annotations

from hypograph.ids import id_number
from hypograph.journal import Journal, Step
from hypograph.structure.carving.plan import ClusterPlan, resolve
from hypograph.structure.dispositions.merge import drop
from hypograph.structure.members import embeds, member_links, set_members
from hypograph.vault.mint import create_node
from hypograph.vault.nodes import clean_title, link_target
from hypograph.vault.vault import Vault, open_vault


def create_cluster(vault: Vault, plan: ClusterPlan) -> str:
    """Mint the HC node with its paper members. Constructed members and the residual are minted by
    ``repair`` from the saved carve; depends_on starts empty and is set once every cluster of the
    carve has its id. Returns the HC id."""
    members = sorted((vault.nodes[i] for i in plan.members), key=lambda m: id_number(m.id))
    meta = {"hypotheses": member_links(members), "exclusivity": plan.exclusivity,
            "exhaustive_by_construction": plan.exhaustive, "independence": plan.independence,
            "depends_on": []}
    if plan.question:
        meta["question"] = plan.question
    if plan.relevance:
        meta["relevance"] = plan.relevance
    body = f"\n{embeds(members)}\n\n## Why this carving\n\n{plan.justification}\n"
    hc_id, _ = create_node(vault.root, "hypothesis-cluster", plan.title, meta, body)
    return hc_id


def existing_cluster(vault: Vault, plan: ClusterPlan, taken: list) -> str | None:
    """The HC an interrupted run minted for ``plan`` before it could record the id, if any."""
    for hc in vault.of_type("hypothesis-cluster"):
        listed = {link_target(link) for link in hc.meta.get("hypotheses") or []}
        if hc.id not in taken and hc.title == clean_title(plan.title) and set(plan.members) <= listed:
            return hc.id
    return None


def repair(vault: Vault, plans: dict[str, ClusterPlan]) -> list[str]:
    """Complete every cluster: mint the constructed members and the residual its plan still needs
    (adopting any an interrupted run minted already: they carry the cluster's backlink), list them
    (named members by id, residual last) and set every member's backlink. ``plans``: the carve's
    plan per HC id (a cluster without one just gets a residual if it lacks one). Returns the ids minted."""
    minted = []
    for hc_id in [hc.id for hc in vault.of_type("hypothesis-cluster")]:
        new, changed = _complete_cluster(vault, hc_id, plans.get(hc_id))
        minted += new
        if changed:  # re-read only after a write: a complete vault costs one read, not one per cluster
            vault = open_vault(vault.root)
    steps = []
    for hc in vault.of_type("hypothesis-cluster"):
        for member_id in (link_target(link) for link in hc.meta.get("hypotheses") or []):
            h = vault.nodes.get(member_id)
            if h is not None and h.meta.get("state") == "active" and link_target(h.meta.get("cluster")) != hc.id:
                h.meta["cluster"] = hc.link
                steps.append(Step(to=str(h.path), text=h.text()))
    Journal(vault.root).apply(steps)
    return minted


def _complete_cluster(vault: Vault, hc_id: str, plan: ClusterPlan | None) -> tuple[list[str], bool]:
    """Mint what cluster ``hc_id`` still lacks, list it, and resolve the plan's placeholders for
    its minted members. Returns (ids minted, whether anything was written)."""
    hc = vault.nodes[hc_id]
    minted_for_it = [h for h in vault.of_type("hypothesis")
                     if h.meta.get("origin") and link_target(h.meta.get("cluster")) == hc_id]
    minted, constructed = [], []
    question = plan.question if plan else hc.meta.get("question")
    # Constructed members first, in the plan's order, then the residual: minted ids follow member order.
    for c in plan.constructed if plan else []:
        have = next((h.id for h in minted_for_it
                     if h.meta.get("origin") == "step-4-constructed" and h.title == clean_title(c["title"])), None)
        if have is None:
            reason = c["reason"]
            have, _ = create_node(vault.root, "hypothesis", c["title"], {
                "statement": c["statement"], "question": c.get("question") or question, "source": None, "locator": None,
                "state": "active", "cluster": hc.link, "origin": "step-4-constructed"},
                body=f"\nConstructed complement: {reason}\n")
            minted.append(have)
        constructed.append(have)
    listed = [link_target(link) for link in hc.meta.get("hypotheses") or []]
    if minted:
        vault = open_vault(vault.root)
    residual = next((i for i in listed if i in vault.nodes and vault.nodes[i].meta.get("residual") is True),
                    next((h.id for h in minted_for_it if h.meta.get("residual") is True), None))
    if hc.meta.get("exhaustive_by_construction") is not True and residual is None:
        r = ({"title": plan.residual_title, "statement": plan.residual_statement, "note": plan.residual_note}
             if plan else {
                 "title": f"The answer is not listed here - {hc.title}",
                 "statement": f"The answer to this cluster's sub-question ({hc.title}) "
                              "is something none of its other members states.",
                 "note": "Residual catch-all so that exactly one member of the cluster is true."})
        residual, _ = create_node(vault.root, "hypothesis", r["title"], {
            "statement": r["statement"], "question": (plan.residual_question if plan else None) or question,
            "source": None, "locator": None, "state": "active", "cluster": hc.link, "residual": True,
            "origin": "step-4-residual"},
            body=f"\n{r['note']}\n")
        minted.append(residual)
        vault = open_vault(vault.root)
    hc = vault.nodes[hc_id]
    adopted = [h for h in vault.of_type("hypothesis")
               if h.meta.get("origin") and link_target(h.meta.get("cluster")) == hc_id and h.id not in listed]
    if adopted:
        members = [vault.nodes[i] for i in listed if i in vault.nodes]
        named = [m for m in members if m.meta.get("residual") is not True]
        named += sorted((h for h in adopted if h.meta.get("residual") is not True), key=lambda h: id_number(h.id))
        ordered = named + [m for m in members + adopted if m.meta.get("residual") is True]
        set_members(hc, ordered)
    steps = _resolved(vault, hc, constructed, residual) if plan else []
    if adopted and not any(st.to == str(hc.path) for st in steps):
        steps.append(Step(to=str(hc.path), text=hc.text()))
    Journal(vault.root).apply(steps)
    return minted, bool(minted or steps)


def _resolved(vault: Vault, hc, constructed: list[str], residual: str | None) -> list[Step]:
    """Journal steps writing the cluster and its minted members with the placeholders for those
    members replaced by their ids (none for a node without a placeholder)."""
    steps = []
    for node in [hc] + [vault.nodes[i] for i in [*constructed, residual] if i in vault.nodes]:
        for key, value in list(node.meta.items()):
            if isinstance(value, str):
                node.meta[key] = resolve(value, constructed, residual)
            elif isinstance(value, list):
                node.meta[key] = [resolve(v, constructed, residual) if isinstance(v, str) else v for v in value]
        node.body = resolve(node.body, constructed, residual)
        if node.changed:
            steps.append(Step(to=str(node.path), text=node.text()))
    return steps


def set_depends_on(vault: Vault, plans: list[ClusterPlan], new_ids: list[str]) -> None:
    """Write each new cluster's depends_on notes, now that every cluster they name has an id."""
    steps = []
    for plan, hc_id in zip(plans, new_ids, strict=True):
        if plan.depends_on:
            hc = vault.nodes[hc_id]
            hc.meta["depends_on"] = [f"{new_ids[k]}: {note}" for k, note in plan.depends_on]
            steps.append(Step(to=str(hc.path), text=hc.text()))
    Journal(vault.root).apply(steps)


def drop_stragglers(vault: Vault, stragglers: dict[str, str]) -> None:
    steps = []
    for h_id, reason in stragglers.items():
        if vault.nodes[h_id].meta.get("state") == "dropped":
            continue  # dropped by the run this one completes
        for node, dest in drop(vault, vault.nodes[h_id], reason):
            steps.append(Step(to=str(dest), text=node.text(), src=str(node.path)))
    Journal(vault.root).apply(steps)
