"""4b with a model: the answer's schema, the prompt, its validation, and the answer turned into
cluster plans (members by number, never by id; "hypothesis N" in prose rewritten to the id)."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from hypograph.ids import id_sort_key
from hypograph.llm.client import Request, untrusted
from hypograph.structure.carving.plan import ClusterPlan
from hypograph.structure.checks import NUMBERISH
from hypograph.structure.scope import QUESTION_CHARS
from hypograph.vault.nodes import Node

BARE_OTHER = re.compile(r"^\s*(other|others|something else|none of the above|none)\W*$", re.I)


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


def carve_request(hyps: list[Node], existing: list[Node], obs: list[Node], question: str) -> Request[Carving]:
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


def plans_from_model(c: Carving, hyps: list[Node]) -> tuple[list[ClusterPlan], dict[str, str]]:
    ids = [h.id for h in hyps]

    def prose(text: str | None) -> str:
        """The model's prose with its "hypothesis N" references turned into the ids they mean."""
        return renumber(text, ids).strip()

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


def renumber(text: str | None, ids: list[str]) -> str:
    """'hypothesis 2' in a model's prose -> the id it stands for (the model never writes ids)."""
    return re.sub(r"\b[Hh]ypothesis (\d+)\b",
                  lambda m: ids[int(m.group(1)) - 1] if 1 <= int(m.group(1)) <= len(ids) else m.group(0), text or "")
