"""4b with a model: the answer's schema, the prompt, its validation, and the answer turned into
cluster plans (members by number, never by id; "hypothesis N" in prose rewritten to the id;
"constructed K" and "the residual" to placeholders resolved to the ids minted for them)."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from hypograph.ids import id_sort_key
from hypograph.llm.answers import require_one_each
from hypograph.llm.client import Request, untrusted
from hypograph.structure.carving.plan import RESIDUAL_TOKEN, ClusterPlan, constructed_token
from hypograph.structure.checks import NUMBERISH
from hypograph.structure.scope import QUESTION_CHARS
from hypograph.vault.node_view import NodeView
from hypograph.vault.nodes import Node

BARE_OTHER = re.compile(r"^\s*(other|others|something else|none of the above|none)\W*$", re.I)
HYPOTHESIS_N = re.compile(r"\b[Hh]ypothesis (\d+)\b")
CONSTRUCTED_K = re.compile(r"\b[Cc]onstructed (?:member )?(\d+)\b")
THE_RESIDUAL = re.compile(r"\b[Tt]he residual(?: member)?\b")
CONSTRUCTED_PREFIX = re.compile(r"^\s*constructed complement\s*[:\-—–]?\s*", re.I)


class DependsOn(BaseModel):
    cluster: int = Field(ge=1, description="number of another cluster in this answer")
    note: str


class Constructed(BaseModel):
    title: str = Field(min_length=5, max_length=120)
    statement: str = Field(min_length=10)
    reason: str = Field(min_length=5, description="one line: why logic needs this member no paper stated")
    question: str | None = Field(default=None, description="its own sub-question, if not the cluster's")


class CarvedCluster(BaseModel):
    name: str = Field(min_length=5, max_length=120, description="noun phrase naming the dimension the members answer")
    question: str | None = Field(default=None, description="the precise sub-question, one sentence ending ?")
    members: list[int] = Field(description="hypothesis numbers")
    exclusivity: str = Field(min_length=10)
    independence: str = Field(min_length=10)
    depends_on: list[DependsOn] = Field(default_factory=list)
    relevance: str | None = None
    exhaustive_by_construction: bool = False
    exhaustiveness_argument: str | None = Field(
        default=None, description="if exhaustive: failure mode and the member (by number) it would favour"
    )
    residual_title: str | None = None
    residual_statement: str | None = Field(default=None, description="names the concrete escape; never a bare 'other'")
    residual_note: str | None = Field(default=None, description="what the escape covers and why the cluster needs it")
    residual_question: str | None = Field(default=None, description="the residual's own question, if not the cluster's")
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
exactly once, as a member or a straggler. Give the residual a note saying what its escape covers.
A constructed member or residual may have its own question when it answers a narrower one.
Refer to hypotheses as "hypothesis N" (N their number), to a cluster's own constructed members as
"constructed K" (K its place in that cluster's constructed list, from 1) and to its residual as
"the residual": these are replaced by the ids minted for them, so an exhaustiveness argument may
name a constructed member. Apart from that, write no numbers, probabilities, weights or ranks."""


def carve_request(hyps: list[Node], existing: list[Node], obs: list[Node], question: str) -> Request[Carving]:
    user = (
        "Main question:\n"
        + untrusted("main-question", {}, {"text": question[:QUESTION_CHARS]})
        + "\n\nExisting clusters (fixed; do not repeat their sub-questions):\n"
        + (
            "\n".join(untrusted("cluster", {}, {"name": c.title, "question": NodeView(c).question}) for c in existing)
            or "none"
        )
        + "\n\nObservations:\n"
        + (
            "\n".join(untrusted("observation", {}, {"statement": NodeView(o).statement or o.title}) for o in obs)
            or "none"
        )
        + "\n\nHypotheses to carve:\n"
        + "\n".join(
            untrusted(
                "hypothesis",
                {"number": str(n)},
                {"title": h.title, "statement": NodeView(h).statement, "question": NodeView(h).question},
            )
            for n, h in enumerate(hyps, start=1)
        )
    )

    def check(c: Carving) -> None:
        _check_carving(c, len(hyps))

    return Request(name="carve", system=CARVE_SYSTEM, user=user, schema=Carving, check=check)


def _check_carving(c: Carving, count: int) -> None:
    """Raise ValueError (the model is asked again) unless hypotheses 1..``count`` each appear exactly
    once and every cluster and straggler keeps the carving rules."""
    seen = [m for cl in c.clusters for m in cl.members] + [s.hypothesis for s in c.stragglers]
    require_one_each(seen, count, "place (a cluster or the stragglers) for each hypothesis")
    for k, cl in enumerate(c.clusters, start=1):
        _check_cluster(k, cl, len(c.clusters))
    for s in c.stragglers:
        if "\n" in s.drop_reason.strip() or NUMBERISH.search(s.drop_reason):
            raise ValueError(f"straggler {s.hypothesis}: a one-line drop_reason without numbers or weights")


def _check_cluster(k: int, cl: CarvedCluster, clusters: int) -> None:
    """Cluster ``k`` of ``clusters``: members, residual or exhaustiveness, depends_on, one-line fields."""
    _check_members(k, cl)
    _check_depends_on(k, cl, clusters)
    _check_one_line_fields(k, cl)
    _check_placeholders(k, cl)
    if cl.exhaustive_by_construction:
        _check_exhaustiveness_argument(k, cl)


def _check_members(k: int, cl: CarvedCluster) -> None:
    """An exhaustive cluster has >= 2 members and its argument; any other a residual naming the escape."""
    named = len(cl.members) + len(cl.constructed)
    if cl.exhaustive_by_construction:
        if named < 2 or not cl.exhaustiveness_argument:
            raise ValueError(f"cluster {k}: exhaustive needs >= 2 members and an exhaustiveness_argument")
    elif not cl.residual_statement or BARE_OTHER.match(cl.residual_statement) or not cl.residual_title:
        raise ValueError(
            f"cluster {k}: a non-exhaustive cluster needs a residual title and a statement naming the escape"
        )
    if named < 1:
        raise ValueError(f"cluster {k}: no members")


def _check_depends_on(k: int, cl: CarvedCluster, clusters: int) -> None:
    for d in cl.depends_on:
        if not 1 <= d.cluster <= clusters or d.cluster == k:
            raise ValueError(f"cluster {k}: depends_on names cluster {d.cluster}, not another cluster of this answer")


def _check_one_line_fields(k: int, cl: CarvedCluster) -> None:
    """One-line fields and titles hold no line breaks, numbers or weights; a residual_note is text."""
    one_line = [
        cl.exclusivity,
        cl.independence,
        cl.question or "",
        cl.relevance or "",
        cl.name,
        cl.residual_title or "",
        cl.residual_question or "",
        *[d.note for d in cl.depends_on],
        *[x.title for x in cl.constructed],
        *[x.question or "" for x in cl.constructed],
    ]
    if any("\n" in text.strip() or NUMBERISH.search(text) for text in one_line):
        raise ValueError(f"cluster {k}: one-line fields and titles hold no line breaks, numbers or weights")
    if cl.residual_note is not None and (not cl.residual_note.strip() or NUMBERISH.search(cl.residual_note)):
        raise ValueError(f"cluster {k}: the residual_note is text without numbers or weights")


def _check_exhaustiveness_argument(k: int, cl: CarvedCluster) -> None:
    """An exhaustive cluster's argument names the member a failure would favour."""
    named = {int(n) for n in HYPOTHESIS_N.findall(cl.exhaustiveness_argument or "")}
    constructed = {int(n) for n in CONSTRUCTED_K.findall(cl.exhaustiveness_argument or "")}
    if not named & set(cl.members) and not constructed & set(range(1, len(cl.constructed) + 1)):
        raise ValueError(
            f"cluster {k}: the exhaustiveness_argument must name the member a failure would "
            "favour as 'hypothesis N' (one of this cluster's members) or 'constructed K'"
        )


def _check_placeholders(k: int, cl: CarvedCluster) -> None:
    """'constructed K' must name one of the cluster's constructed members; 'the residual' needs one."""
    texts = [
        cl.exclusivity,
        cl.independence,
        cl.relevance or "",
        cl.carving_justification,
        cl.exhaustiveness_argument or "",
        cl.residual_statement or "",
        cl.residual_note or "",
        *[d.note for d in cl.depends_on],
        *[t for x in cl.constructed for t in (x.statement, x.reason)],
    ]
    bad = sorted({int(n) for t in texts for n in CONSTRUCTED_K.findall(t)} - set(range(1, len(cl.constructed) + 1)))
    if bad:
        raise ValueError(
            f"cluster {k}: 'constructed {bad[0]}' names no constructed member of this cluster "
            f"(it has {len(cl.constructed)})"
        )
    if cl.exhaustive_by_construction and any(THE_RESIDUAL.search(t) for t in texts):
        raise ValueError(f"cluster {k}: exhaustive by construction, so it has no residual for 'the residual' to name")


def plans_from_model(c: Carving, hyps: list[Node]) -> tuple[list[ClusterPlan], dict[str, str]]:
    """The model's carving as plans: members by id, "hypothesis N" in prose turned into ids and
    "constructed K" / "the residual" into placeholders resolved once those members are minted."""
    ids = [h.id for h in hyps]

    def prose(text: str | None) -> str:
        text = THE_RESIDUAL.sub(RESIDUAL_TOKEN, renumber(text, ids))
        return CONSTRUCTED_K.sub(lambda m: constructed_token(int(m.group(1))), text).strip()

    plans = []
    for cl in c.clusters:
        plans.append(
            ClusterPlan(
                title=cl.name,
                members=sorted((ids[m - 1] for m in cl.members), key=id_sort_key),
                exclusivity=prose(cl.exclusivity),
                independence=prose(cl.independence),
                justification=prose(cl.carving_justification)
                + ("\n\n" + prose(cl.exhaustiveness_argument) if cl.exhaustive_by_construction else ""),
                question=cl.question,
                relevance=prose(cl.relevance) or None,
                depends_on=[(d.cluster - 1, prose(d.note)) for d in cl.depends_on],
                exhaustive=cl.exhaustive_by_construction,
                residual_title=cl.residual_title or "",
                residual_statement=prose(cl.residual_statement),
                residual_note=(
                    prose(cl.residual_note) or "Residual catch-all so that exactly one member of the cluster is true."
                ),
                residual_question=cl.residual_question,
                constructed=[
                    {
                        **x.model_dump(),
                        "statement": prose(x.statement),
                        "reason": CONSTRUCTED_PREFIX.sub("", prose(x.reason), count=1),
                    }
                    for x in cl.constructed
                ],
            )
        )
    return plans, {ids[s.hypothesis - 1]: renumber(s.drop_reason, ids).strip() for s in c.stragglers}


def renumber(text: str | None, ids: list[str]) -> str:
    """'hypothesis 2' in a model's prose -> the id it stands for (the model never writes ids)."""
    return HYPOTHESIS_N.sub(
        lambda m: ids[int(m.group(1)) - 1] if 1 <= int(m.group(1)) <= len(ids) else m.group(0), text or ""
    )
