"""Step 4b: carve the active hypotheses into hypothesis-cluster (HC) nodes with residuals.

* Existing HC nodes are never re-carved or reordered. Active hypotheses in no cluster are carved
  into new clusters; they never join an existing one (that would shift its frozen member order).
* With a model: a validated structured answer gives each new cluster its members (by number,
  never by id), name, question, exclusivity, independence, depends_on, relevance, and a residual
  statement naming the escape (or an exhaustiveness argument), plus constructed complements and
  stragglers to drop.
* Offline (deterministic, heuristic): members grouped by their ``question`` hints (TF-IDF cosine
  >= 0.5, connected components), a leftover joining its most similar group if its hint is similar
  enough (>= 0.25), else forming its own cluster; one residual each;
  justification lines say plainly they are heuristic.
* The whole carve (plans, stragglers) is saved to ``.hypograph/carving.json`` before anything is
  minted, with each HC id recorded as it is minted; a run that died half-way is completed from it
  by the next one, which asks no model again and mints nothing twice (an HC minted just before a
  crash is recognised by its title and members).
* A repair pass then makes every cluster whole: its constructed members and residual are minted
  (or adopted, when an interrupted run minted them already: they carry the cluster's backlink) and
  every member's ``cluster`` backlink is set.

New nodes are minted under the vault lock (``create_node``); edits go through the journal.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field
from scipy.sparse.csgraph import connected_components

from hypograph.atomic import write_json
from hypograph.ids import id_number, id_sort_key
from hypograph.journal import Journal, Step
from hypograph.llm.client import LLMClient, Rejected, Request, untrusted
from hypograph.proximity.embed import embed_tfidf
from hypograph.structure.checks import NUMBERISH
from hypograph.structure.dispositions import QUESTION_CHARS, active_hypotheses, drop, observations
from hypograph.structure.members import embeds, member_links, set_members
from hypograph.vault.mint import create_node, structuring_lock
from hypograph.vault.nodes import Node, clean_title, link_target
from hypograph.vault.validate import validate_before_structuring
from hypograph.vault.vault import Vault, open_vault

CARVE = Path(".hypograph") / "carving.json"  # a carve being applied: plans, stragglers, minted HC ids
QUESTION_LINK = 0.5
LONE_JOIN = 0.25  # offline: a lone hypothesis joins a group only if its hint is at least this similar
BARE_OTHER = re.compile(r"^\s*(other|others|something else|none of the above|none)\W*$", re.I)
HEURISTIC = "Heuristic (offline, no model):"


@dataclass
class ClusterPlan:
    """A cluster to create: what 4b decided, before any id is minted."""

    title: str
    members: list[str]
    exclusivity: str
    independence: str
    justification: str
    question: str | None = None
    relevance: str | None = None
    depends_on: list[tuple[int, str]] = field(default_factory=list)  # (index of another new cluster, note)
    exhaustive: bool = False
    residual_title: str = ""
    residual_statement: str = ""
    residual_note: str = ""
    constructed: list[dict] = field(default_factory=list)  # {"title", "statement", "reason"}


@dataclass
class ClusterReport:
    created: list[str] = field(default_factory=list)
    minted: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)
    clusters: dict[str, list[str]] = field(default_factory=dict)


# -- model carving ----------------------------------------------------------------------------------

class DependsOn(BaseModel):
    cluster: int = Field(ge=1, description="number of another cluster in this answer")
    note: str


class Constructed(BaseModel):
    title: str = Field(min_length=5, max_length=120)
    statement: str = Field(min_length=10)
    reason: str = Field(min_length=5, description="one line: why logic needs this member no paper stated")


class CarvedCluster(BaseModel):
    name: str = Field(min_length=5, max_length=120, description="noun phrase naming the dimension the members answer")
    question: str | None = Field(default=None, description="the precise sub-question, one sentence ending ?")
    members: list[int] = Field(description="hypothesis numbers")
    exclusivity: str = Field(min_length=10)
    independence: str = Field(min_length=10)
    depends_on: list[DependsOn] = Field(default_factory=list)
    relevance: str | None = None
    exhaustive_by_construction: bool = False
    exhaustiveness_argument: str | None = Field(default=None, description="if exhaustive: failure mode and the member (by number) it would favour")
    residual_title: str | None = None
    residual_statement: str | None = Field(default=None, description="names the concrete escape; never a bare 'other'")
    constructed: list[Constructed] = Field(default_factory=list)
    carving_justification: str = Field(min_length=10)


class Straggler(BaseModel):
    hypothesis: int = Field(ge=1)
    drop_reason: str = Field(min_length=5)


class Carving(BaseModel):
    clusters: list[CarvedCluster]
    stragglers: list[Straggler] = Field(default_factory=list)


CARVE_SYSTEM = """You structure hypotheses into hypothesis clusters (step 4b of an analysis).
Group the numbered hypotheses bottom-up by the sub-question they answer (the question field is only
a hint; trust the statements). Each cluster is one sub-question whose members are mutually
exclusive answers at comparable grain. Never make two clusters that slice one sub-question two
ways. For each cluster give: a noun-phrase name of the dimension; the precise question if one clean
sentence exists; one-line exclusivity (why at most one member holds); one-line independence (why
its prior factorizes from the other clusters); depends_on notes for dependences you leave
un-merged (ideally none); relevance to the main question. Unless the members logically cover the
answer space (then exhaustive_by_construction true plus an argument naming what analysis failure
would break it and which member it would favour), give a residual title and statement naming the
concrete escape ("some driver other than the above, e.g. disease") — never a bare "other". Add
constructed members only when the cluster's logic needs an answer no paper stated. A hypothesis
that fits no cluster is a straggler with a one-line drop reason. Every hypothesis number appears
exactly once, as a member or a straggler. Refer to hypotheses as "hypothesis N" (N their number);
apart from that, write no numbers, probabilities, weights or ranks anywhere."""


def _carve_request(hyps: list[Node], existing: list[Node], obs: list[Node], question: str) -> Request[Carving]:
    user = (
        "Main question:\n" + untrusted("main-question", {}, {"text": question[:QUESTION_CHARS]})
        + "\n\nExisting clusters (fixed; do not repeat their sub-questions):\n"
        + ("\n".join(untrusted("cluster", {}, {"name": c.title, "question": c.meta.get("question")}) for c in existing) or "none")
        + "\n\nObservations:\n"
        + ("\n".join(untrusted("observation", {}, {"statement": o.meta.get("statement") or o.title}) for o in obs) or "none")
        + "\n\nHypotheses to carve:\n"
        + "\n".join(untrusted("hypothesis", {"number": str(n)}, {"title": h.title, "statement": h.meta.get("statement"),
                                                                "question": h.meta.get("question")})
                    for n, h in enumerate(hyps, start=1))
    )

    def check(c: Carving) -> None:
        seen = [m for cl in c.clusters for m in cl.members] + [s.hypothesis for s in c.stragglers]
        if sorted(seen) != list(range(1, len(hyps) + 1)):
            raise ValueError(f"every hypothesis 1..{len(hyps)} must appear exactly once; got {sorted(seen)}")
        for k, cl in enumerate(c.clusters, start=1):
            named = len(cl.members) + len(cl.constructed)
            if cl.exhaustive_by_construction:
                if named < 2 or not cl.exhaustiveness_argument:
                    raise ValueError(f"cluster {k}: exhaustive needs >= 2 members and an exhaustiveness_argument")
            elif not cl.residual_statement or BARE_OTHER.match(cl.residual_statement) or not cl.residual_title:
                raise ValueError(f"cluster {k}: a non-exhaustive cluster needs a residual title and a statement naming the escape")
            if named < 1:
                raise ValueError(f"cluster {k}: no members")
            for d in cl.depends_on:
                if not 1 <= d.cluster <= len(c.clusters) or d.cluster == k:
                    raise ValueError(f"cluster {k}: depends_on names cluster {d.cluster}, not another cluster of this answer")
            for text in [cl.exclusivity, cl.independence, cl.question or "", cl.relevance or "", cl.name,
                         cl.residual_title or "", *[d.note for d in cl.depends_on], *[x.title for x in cl.constructed]]:
                if "\n" in text.strip() or NUMBERISH.search(text):
                    raise ValueError(f"cluster {k}: one-line fields and titles hold no line breaks, numbers or weights")
            if cl.exhaustive_by_construction:
                named = {int(n) for n in re.findall(r"\b[Hh]ypothesis (\d+)\b", cl.exhaustiveness_argument or "")}
                if not named & set(cl.members):
                    raise ValueError(f"cluster {k}: the exhaustiveness_argument must name the member a failure would "
                                     "favour as 'hypothesis N', N one of this cluster's members")
        for s in c.stragglers:
            if "\n" in s.drop_reason.strip() or NUMBERISH.search(s.drop_reason):
                raise ValueError(f"straggler {s.hypothesis}: a one-line drop_reason without numbers or weights")

    return Request(name="carve", system=CARVE_SYSTEM, user=user, schema=Carving, check=check)


def _plans_from_model(c: Carving, hyps: list[Node]) -> tuple[list[ClusterPlan], dict[str, str]]:
    ids = [h.id for h in hyps]

    def prose(text: str | None) -> str:
        """The model's prose with its "hypothesis N" references turned into the ids they mean."""
        return _renumber(text, ids).strip()

    plans = []
    for cl in c.clusters:
        plans.append(ClusterPlan(
            title=cl.name, members=sorted((ids[m - 1] for m in cl.members), key=id_sort_key),
            exclusivity=prose(cl.exclusivity), independence=prose(cl.independence),
            justification=prose(cl.carving_justification) + (
                "\n\n" + prose(cl.exhaustiveness_argument) if cl.exhaustive_by_construction else ""),
            question=cl.question, relevance=prose(cl.relevance) or None,
            depends_on=[(d.cluster - 1, prose(d.note)) for d in cl.depends_on],
            exhaustive=cl.exhaustive_by_construction,
            residual_title=cl.residual_title or "", residual_statement=prose(cl.residual_statement),
            residual_note="Residual catch-all so that exactly one member of the cluster is true.",
            constructed=[{**x.model_dump(), "statement": prose(x.statement), "reason": prose(x.reason)} for x in cl.constructed],
        ))
    return plans, {ids[s.hypothesis - 1]: prose(s.drop_reason) for s in c.stragglers}


def _renumber(text: str | None, ids: list[str]) -> str:
    """'hypothesis 2' in a model's prose -> the id it stands for (the model never writes ids)."""
    return re.sub(r"\b[Hh]ypothesis (\d+)\b",
                  lambda m: ids[int(m.group(1)) - 1] if 1 <= int(m.group(1)) <= len(ids) else m.group(0), text or "")


# -- offline carving --------------------------------------------------------------------------------

def offline_plans(hyps: list[Node]) -> list[ClusterPlan]:
    """Group by question-hint similarity; each group a cluster with a residual; stated as heuristic."""
    if not hyps:
        return []
    hints = [str(h.meta.get("question") or h.meta.get("statement") or h.title) for h in hyps]
    m, _ = embed_tfidf(hints)
    sims = (m @ m.T).toarray()
    _, labels = connected_components(sims >= QUESTION_LINK, directed=False)
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(labels):
        groups.setdefault(int(g), []).append(i)
    # A lone hypothesis joins the group whose hints it is most similar to, if any is similar at all.
    big = [g for g, members in groups.items() if len(members) > 1]
    for g, members in list(groups.items()):
        if len(members) == 1 and big:
            i = members[0]
            best = max(big, key=lambda b: max(sims[i, j] for j in groups[b]))
            if max(sims[i, j] for j in groups[best]) >= LONE_JOIN:
                groups[best].append(i)
                del groups[g]
    plans = []
    for members in sorted(groups.values(), key=lambda ms: min(id_sort_key(hyps[i].id) for i in ms)):
        nodes = sorted((hyps[i] for i in members), key=lambda h: id_sort_key(h.id))
        question = _central_question(nodes, [hints[i] for i in members], sims, members)
        topic = question.rstrip("?").strip()
        plans.append(ClusterPlan(
            title=f"Answers to - {topic}" if len(topic) < 110 else f"Answers to - {topic[:105].rsplit(' ', 1)[0]}",
            members=[h.id for h in nodes],
            # A hint like "Did rainfall drop by 30%?" stays out of the number-free step-4 fields.
            question=question if question.endswith("?") and not NUMBERISH.search(question) else None,
            exclusivity=f"{HEURISTIC} the members were posed against the same sub-question and are read as alternative answers to it, at most one true; not verified.",
            independence=f"{HEURISTIC} assumed to factorize from the other clusters because its sub-question differs; not verified.",
            justification=(f"{HEURISTIC} grouped because the papers posed these hypotheses against similar sub-questions "
                           "(question-field similarity); exclusivity, independence and grain have not been judged. "
                           "Re-run with a model configured, or review by hand."),
            residual_title=f"The answer is not listed here - {topic}"[:140],
            residual_statement=(f"The answer to \"{question}\" is something none of {', '.join(h.id for h in nodes)} states "
                                "— a cause, mechanism or outcome that no source in this vault proposed."),
            residual_note=f"{HEURISTIC} catch-all so that exactly one member of the cluster is true; it names no concrete escape because none was judged.",
        ))
    return plans


def _central_question(nodes: list[Node], hints: list[str], sims, members: list[int]) -> str:
    """The members' question hint most similar to the others (ties: lowest id)."""
    best = max(range(len(members)), key=lambda k: (sum(sims[members[k], j] for j in members), -k))
    return next((str(n.meta.get("question")) for n in nodes if n.meta.get("question") == hints[best]), hints[best])


# -- apply ----------------------------------------------------------------------------------------

def _create_cluster(vault: Vault, plan: ClusterPlan) -> str:
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


def _existing_cluster(vault: Vault, plan: ClusterPlan, taken: list) -> str | None:
    """The HC an interrupted run minted for ``plan`` before it could record the id, if any."""
    for hc in vault.of_type("hypothesis-cluster"):
        listed = {link_target(l) for l in hc.meta.get("hypotheses") or []}
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
        for member_id in (link_target(l) for l in hc.meta.get("hypotheses") or []):
            h = vault.nodes.get(member_id)
            if h is not None and h.meta.get("state") == "active" and link_target(h.meta.get("cluster")) != hc.id:
                h.meta["cluster"] = hc.link
                steps.append(Step(to=str(h.path), text=h.text()))
    Journal(vault.root).apply(steps)
    return minted


def _complete_cluster(vault: Vault, hc_id: str, plan: ClusterPlan | None) -> tuple[list[str], bool]:
    """Mint what cluster ``hc_id`` still lacks and list it. Returns (ids minted, whether anything was written)."""
    hc = vault.nodes[hc_id]
    minted_for_it = [h for h in vault.of_type("hypothesis")
                     if h.meta.get("origin") and link_target(h.meta.get("cluster")) == hc_id]
    minted = []
    question = plan.question if plan else hc.meta.get("question")
    for c in plan.constructed if plan else []:
        if not any(h.meta.get("origin") == "step-4-constructed" and h.title == clean_title(c["title"]) for h in minted_for_it):
            node_id, _ = create_node(vault.root, "hypothesis", c["title"], {
                "statement": c["statement"], "question": question, "source": None, "locator": None,
                "state": "active", "cluster": hc.link, "origin": "step-4-constructed"},
                body=f"\nConstructed complement: {c['reason']}\n")
            minted.append(node_id)
    listed = [link_target(l) for l in hc.meta.get("hypotheses") or []]
    if minted:
        vault = open_vault(vault.root)
    has_residual = any(vault.nodes[i].meta.get("residual") is True for i in listed if i in vault.nodes) or any(
        h.meta.get("residual") is True for h in minted_for_it)
    if hc.meta.get("exhaustive_by_construction") is not True and not has_residual:
        r = {"title": plan.residual_title, "statement": plan.residual_statement, "note": plan.residual_note} if plan else {
            "title": f"The answer is not listed here - {hc.title}",
            "statement": f"The answer to this cluster's sub-question ({hc.title}) is something none of its other members states.",
            "note": "Residual catch-all so that exactly one member of the cluster is true."}
        node_id, _ = create_node(vault.root, "hypothesis", r["title"], {
            "statement": r["statement"], "question": question, "source": None,
            "locator": None, "state": "active", "cluster": hc.link, "residual": True, "origin": "step-4-residual"},
            body=f"\n{r['note']}\n")
        minted.append(node_id)
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
        Journal(vault.root).apply([Step(to=str(hc.path), text=hc.text())])
    return minted, bool(minted or adopted)


def run_clusters(vault: Vault, llm: LLMClient) -> ClusterReport:
    """4b end to end: carve the unclustered active hypotheses, create clusters, repair, report."""
    with structuring_lock(vault.root):
        vault = open_vault(vault.root)
        validate_before_structuring(vault)  # refuse what 4b cannot fix before its first write
        return _run_clusters(vault, llm)


def _run_clusters(vault: Vault, llm: LLMClient) -> ClusterReport:
    root = vault.root
    report = ClusterReport()
    carve = _read_carve(root)  # the decision of a run that died before finishing it
    if carve is None:
        report.minted += repair(vault, {})  # a cluster someone left without its residual
        vault = open_vault(root)
        clustered = {link_target(l) for hc in vault.of_type("hypothesis-cluster") for l in hc.meta.get("hypotheses") or []}
        todo = [h for h in active_hypotheses(vault) if h.id not in clustered and h.meta.get("residual") is not True]
        if todo:
            plans, stragglers = _plan(vault, todo, llm)
            carve = {"plans": [asdict(p) for p in plans], "stragglers": stragglers, "hc_ids": [None] * len(plans)}
            write_json(root / CARVE, carve)  # the whole decision on record before anything is minted
    if carve is not None:
        plans = [ClusterPlan(**p) for p in carve["plans"]]
        for k, plan in enumerate(plans):
            if carve["hc_ids"][k] is None:
                vault = open_vault(root)
                hc_id = _existing_cluster(vault, plan, carve["hc_ids"])
                if hc_id is None:
                    hc_id = _create_cluster(vault, plan)
                    report.minted.append(hc_id)
                carve["hc_ids"][k] = hc_id
                write_json(root / CARVE, carve)
            report.created.append(carve["hc_ids"][k])
        _set_depends_on(open_vault(root), plans, carve["hc_ids"])
        _drop_stragglers(open_vault(root), carve["stragglers"])
        report.dropped = carve["stragglers"]
        report.minted += repair(open_vault(root), dict(zip(carve["hc_ids"], plans)))
        (root / CARVE).unlink()  # tool state, not a node: the carve is complete
    vault = open_vault(root)
    report.clusters = {hc.id: [link_target(l) for l in hc.meta.get("hypotheses") or []] for hc in vault.of_type("hypothesis-cluster")}
    return report


def _read_carve(root: Path) -> dict | None:
    path = root / CARVE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _plan(vault: Vault, todo: list[Node], llm: LLMClient) -> tuple[list[ClusterPlan], dict[str, str]]:
    if llm.offline:
        return offline_plans(todo), {}
    answer = llm.ask(_carve_request(todo, vault.of_type("hypothesis-cluster"), observations(vault), vault.main_question()))
    if isinstance(answer, Rejected):
        plans = offline_plans(todo)
        for p in plans:
            p.justification += f"\n\nThe model's carving was rejected ({answer.reason}); this offline grouping stands in."
        return plans, {}
    return _plans_from_model(answer, todo)


def _set_depends_on(vault: Vault, plans: list[ClusterPlan], new_ids: list[str]) -> None:
    """Write each new cluster's depends_on notes, now that every cluster they name has an id."""
    steps = []
    for plan, hc_id in zip(plans, new_ids):
        if plan.depends_on:
            hc = vault.nodes[hc_id]
            hc.meta["depends_on"] = [f"{new_ids[k]}: {note}" for k, note in plan.depends_on]
            steps.append(Step(to=str(hc.path), text=hc.text()))
    Journal(vault.root).apply(steps)


def _drop_stragglers(vault: Vault, stragglers: dict[str, str]) -> None:
    steps = []
    for h_id, reason in stragglers.items():
        if vault.nodes[h_id].meta.get("state") == "dropped":
            continue  # dropped by the run this one completes
        for node, dest in drop(vault, vault.nodes[h_id], reason):
            steps.append(Step(to=str(dest), text=node.text(), src=str(node.path)))
    Journal(vault.root).apply(steps)
