"""Step 4b: carve the active hypotheses into hypothesis-cluster (HC) nodes with residuals.

* Existing HC nodes are never re-carved or reordered. Active hypotheses in no cluster are carved
  into new clusters; they never join an existing one (that would shift its frozen member order).
* With a model: a validated structured answer gives each new cluster its members (by number,
  never by id), name, question, exclusivity, independence, depends_on, relevance, and a residual
  statement naming the escape (or an exhaustiveness argument), plus constructed complements and
  stragglers to drop.
* Offline (deterministic, heuristic; ``offline``): members grouped by what their questions mean
  (TF-IDF and sentence embeddings of the question hints, sentence embeddings of the statements;
  TF-IDF alone when the sentence model is missing, said in every justification), the proximity
  graph's near-duplicate pairs (``proximity/dupes.json``) never split but for a recorded reason; one residual each;
  justification lines say plainly they are heuristic. The carving is asked of a policy
  (``hypograph.llm.policy``): a rejected model answer falls back to this grouping, saying so.
* The whole carve (plans, stragglers) is saved to ``.hypograph/carving.json`` before anything is
  minted, with each HC id recorded as it is minted; a run that died half-way is completed from it
  by the next one, which asks no model again and mints nothing twice (an HC minted just before a
  crash is recognised by its title and members).
* A repair pass then makes every cluster whole: its constructed members and residual are minted
  (or adopted, when an interrupted run minted them already: they carry the cluster's backlink) and
  every member's ``cluster`` backlink is set.

New nodes are minted under the vault lock (``create_node``); edits go through the journal.

One module per concern: ``plan`` (what a cluster will be), ``prompt`` (the model's schema, request
and answer -> plans), ``offline`` (the heuristic), ``apply`` (mint, complete, repair);
``run_clusters`` here runs them under the structuring lock and keeps the carve file.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hypograph.atomic import STATE_MAX, read_regular, write_json
from hypograph.llm.policy import Ask, Policy
from hypograph.paths import OURS
from hypograph.proximity import store
from hypograph.structure import session
from hypograph.structure.carving.apply import create_cluster, drop_stragglers, existing_cluster, repair, set_depends_on
from hypograph.structure.carving.offline import Pair, offline_plans
from hypograph.structure.carving.plan import ClusterPlan
from hypograph.structure.carving.prompt import CARVE_SYSTEM, carve_request, plans_from_model
from hypograph.structure.scope import active_hypotheses, observations
from hypograph.vault.locking import structuring_lock
from hypograph.vault.mint import minting
from hypograph.vault.node_view import NodeView
from hypograph.vault.nodes import Node
from hypograph.vault.validate import validate_before_structuring
from hypograph.vault.vault import Vault

__all__ = ["CARVE", "CARVE_SYSTEM", "ClusterPlan", "ClusterReport", "offline_plans", "repair", "run_clusters"]

CARVE = Path(OURS) / "carving.json"  # a carve being applied: plans, stragglers, minted HC ids


@dataclass
class ClusterReport:
    created: list[str] = field(default_factory=list)
    minted: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)
    clusters: dict[str, list[str]] = field(default_factory=dict)


def run_clusters(vault: Vault | Path, policy: Policy) -> ClusterReport:
    """4b end to end: carve the unclustered active hypotheses, create clusters, repair, report.
    ``vault``: the vault's root (or a Vault: only its root is used; the vault is read under the
    structuring lock, once, and kept as the index of what 4b writes and mints)."""
    root = Path(vault.root if isinstance(vault, Vault) else vault)
    with structuring_lock(root):
        try:
            vault = session.open_for_step(root)
            validate_before_structuring(vault)  # refuse what 4b cannot fix before its first write
            session.refuse_if_4a_interrupted(root)
            report = _run_clusters(vault, policy)
        except BaseException:
            session.forget(root)
            raise
        session.keep(vault)
        return report


def _run_clusters(vault: Vault, policy: Policy) -> ClusterReport:
    """Carve (or take up the carve of a run that died before finishing it), then apply it."""
    root = vault.root
    report = ClusterReport()
    carve = _read_carve(root)  # the decision of a run that died before finishing it
    if carve is None:
        carve = _carve(vault, policy, report)
    if carve is not None:
        _apply_carve(vault, carve, report)
        (root / CARVE).unlink()  # tool state, not a node: the carve is complete
    session.clear(root)  # every hypothesis 4a handed over is clustered: the structuring's 4a is over
    report.clusters = {hc.id: NodeView(hc).listed_ids for hc in vault.of_type("hypothesis-cluster")}
    return report


def _carve(vault: Vault, policy: Policy, report: ClusterReport) -> dict | None:
    """Complete the clusters there are, then carve the active hypotheses in none; the carve is
    written before anything is minted. Returns it, or None when nothing is left to carve."""
    with minting(vault.root) as mint:
        report.minted += repair(vault, {}, mint)  # a cluster someone left without its residual
    clustered = {t for hc in vault.of_type("hypothesis-cluster") for t in NodeView(hc).listed_ids}
    todo = [h for h in active_hypotheses(vault) if h.id not in clustered and not NodeView(h).residual]
    if not todo:
        return None
    plans, stragglers = _plan(vault, todo, policy)
    carve = {"plans": [asdict(p) for p in plans], "stragglers": stragglers, "hc_ids": [None] * len(plans)}
    write_json(vault.root / CARVE, carve)  # the whole decision on record before anything is minted
    return carve


def _apply_carve(vault: Vault, carve: dict, report: ClusterReport) -> None:
    """Mint each planned cluster (its id recorded in the carve as soon as it has one), set
    depends_on, drop the stragglers and complete every cluster."""
    root = vault.root
    plans = [ClusterPlan(**p) for p in carve["plans"]]
    with minting(root) as mint:  # one hold of the minting lock, one scan of the vault, for the batch
        for k, plan in enumerate(plans):
            if carve["hc_ids"][k] is None:
                hc_id = existing_cluster(vault, plan, carve["hc_ids"])
                if hc_id is None:
                    hc_id = create_cluster(vault, plan, mint)
                    report.minted.append(hc_id)
                carve["hc_ids"][k] = hc_id
                write_json(root / CARVE, carve)
            report.created.append(carve["hc_ids"][k])
        set_depends_on(vault, plans, carve["hc_ids"])
        drop_stragglers(vault, carve["stragglers"])
        report.dropped = carve["stragglers"]
        report.minted += repair(vault, dict(zip(carve["hc_ids"], plans, strict=True)), mint)


def near_duplicates(root: Path) -> tuple[list[Pair], str]:
    """The proximity graph's near-duplicate pairs (``proximity/dupes.json``, written by the
    proximity job before step 4), and a line saying so when there are none to read."""
    if not (store.proximity_dir(root) / "dupes.json").exists():
        return [], "No proximity/dupes.json was found, so no near-duplicate pair was kept together."
    return [Pair(p.a, p.b, p.similarity) for p in store.read_dupes(root)], ""


def _frozen(vault: Vault) -> dict[str, str]:
    """Hypothesis id -> the existing cluster that lists it (frozen: new hypotheses never join one)."""
    return {m: hc.id for hc in vault.of_type("hypothesis-cluster") for m in NodeView(hc).listed_ids if m}


def _read_carve(root: Path) -> dict | None:
    try:  # bounded: a FIFO or a device here is one line, never waited on
        return json.loads(read_regular(root / CARVE, STATE_MAX, follow=True))
    except FileNotFoundError:
        return None


def _plan(vault: Vault, todo: list[Node], policy: Policy) -> tuple[list[ClusterPlan], dict[str, str]]:
    """The carve of ``todo``: (plans, stragglers to drop with their reasons)."""

    def offline(note: str | None) -> tuple[list[ClusterPlan], dict[str, str]]:
        pairs, missing = near_duplicates(vault.root)
        plans = offline_plans(todo, pairs, _frozen(vault), missing)
        for p in plans if note else []:
            p.justification += f"\n\n{note[0].upper()}{note[1:]}; this offline grouping stands in."
        return plans, {}

    request = carve_request(todo, vault.of_type("hypothesis-cluster"), observations(vault), vault.main_question())
    return policy.decide("carving", [Ask(request, lambda answer, _by: plans_from_model(answer, todo), offline)])[0]
