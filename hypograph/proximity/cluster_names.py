"""Short descriptive cluster names from a model, beside the keyword labels.

One call per batch of clusters; each cluster is shown by (up to) its first members' statements.
The model answers by cluster number; offline, or when the model does not answer (a rejected
answer, an outage, a batch over the endpoint's context that cannot be halved further), the
keyword label stands, per batch, counted in the client's ``llm_fallback``: naming is optional and
never fails a run. With a model, a one-member cluster is named by its member's title
(``decided_by: "title"``) without asking it: there is no theme to find. Output per cluster:
``{"label", "keywords", "decided_by"}``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from hypograph.hypotheses import Hypothesis
from hypograph.llm.answers import require_one_each
from hypograph.llm.client import LLMClient, Request, untrusted
from hypograph.llm.policy import Ask, Policy, policy_for
from hypograph.proximity.communities import Clusters

BATCH_SIZE = 10
MEMBERS_SHOWN = 8


class ClusterName(BaseModel):
    cluster: int = Field(ge=1)
    label: str = Field(min_length=3, max_length=80, pattern=r"^[^\n\r]+$")


class ClusterNames(BaseModel):
    labels: list[ClusterName]


SYSTEM = """You name clusters of research hypotheses for a supervisor's overview.
For each numbered cluster, give a short descriptive label (3 to 8 words, e.g. "Gut-brain axis and
neuroinflammation") naming the shared theme or mechanism of its members. No ids, no quotes."""


def name_clusters(
    clusters: Clusters, hypotheses: dict[str, Hypothesis], llm: LLMClient | Policy, batch_size: int = BATCH_SIZE
) -> dict[str, dict]:
    """Map each cluster label (C-NN) to its best name and who gave it."""
    names = {
        c: {"label": clusters.keywords.get(c, ""), "keywords": clusters.keywords.get(c, ""), "decided_by": "keywords"}
        for c in clusters.clusters
    }
    policy = policy_for(llm)
    labels = []
    for c, members in clusters.clusters.items():
        # offline every cluster keeps its keywords, as before (so offline outputs do not change)
        title = _title(hypotheses.get(members[0])) if len(members) == 1 and not policy.offline else ""
        if title:
            names[c].update(label=title, decided_by="title")
        else:
            labels.append(c)
    batches = [labels[k : k + batch_size] for k in range(0, len(labels), batch_size)]
    for named in policy.decide("cluster name", [_ask(b, clusters, hypotheses) for b in batches]):
        for label, name, by in named:
            names[label].update(label=name, decided_by=by)
    return names


def _title(h: Hypothesis | None) -> str:
    """A member's title as a label: one line, at most 80 characters."""
    text = " ".join((h.title or h.statement or "").split()) if h is not None else ""
    return text if len(text) <= 80 else text[:79].rstrip() + "…"


def _ask(batch: list[str], clusters: Clusters, hypotheses: dict[str, Hypothesis]) -> Ask:
    """The question for ``batch``; decisions are ``(cluster label, name, decided_by)``, none when
    the keyword labels stand. Split in halves when the endpoint's context cannot take it."""

    def split():
        half = (len(batch) + 1) // 2
        return _ask(batch[:half], clusters, hypotheses), _ask(batch[half:], clusters, hypotheses)

    return Ask(
        _request(batch, clusters, hypotheses),
        lambda answer, by: [(batch[i.cluster - 1], i.label.strip(), by) for i in answer.labels],
        lambda _note: [],  # offline or not answered: the keyword label stands
        split if len(batch) > 1 else None,
    )


def _request(batch: list[str], clusters: Clusters, hypotheses: dict[str, Hypothesis]) -> Request[ClusterNames]:
    blocks = []
    for n, label in enumerate(batch, start=1):
        members = clusters.clusters[label][:MEMBERS_SHOWN]
        statements = [hypotheses[m].statement or hypotheses[m].title for m in members if m in hypotheses]
        blocks.append(
            f"Cluster {n} ({len(clusters.clusters[label])} members):\n"
            + untrusted("cluster", {"number": str(n)}, {"statements": statements})
        )

    def check(answer: ClusterNames) -> None:
        require_one_each((x.cluster for x in answer.labels), len(batch), "label for each cluster")

    return Request(
        name="clusters-" + "_".join(batch),
        system=SYSTEM,
        user=f"Name these {len(batch)} cluster(s).\n\n" + "\n\n".join(blocks),
        schema=ClusterNames,
        check=check,
        items=len(batch),
    )
