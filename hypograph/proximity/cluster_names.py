"""Short descriptive cluster names from a model, beside the keyword labels.

One call per batch of clusters; each cluster is shown by (up to) its first members' statements.
The model answers by cluster number; offline, or when its answer is rejected, the keyword label
stands. Output per cluster: ``{"label", "keywords", "decided_by"}``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from hypograph.hypotheses import Hypothesis
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


def name_clusters(clusters: Clusters, hypotheses: dict[str, Hypothesis], llm: LLMClient | Policy,
                  batch_size: int = BATCH_SIZE) -> dict[str, dict]:
    """Map each cluster label (C-NN) to its best name and who gave it."""
    names = {c: {"label": clusters.keywords.get(c, ""), "keywords": clusters.keywords.get(c, ""),
                 "decided_by": "keywords"}
             for c in clusters.clusters}
    labels = list(clusters.clusters)
    batches = [labels[k:k + batch_size] for k in range(0, len(labels), batch_size)]
    asks = [Ask(_request(b, clusters, hypotheses),
                lambda answer, by: [(i.cluster, i.label.strip(), by) for i in answer.labels],
                lambda _note: []) for b in batches]  # offline or rejected: the keyword label stands
    for batch, named in zip(batches, policy_for(llm).decide("cluster name", asks), strict=True):
        for number, label, by in named:
            names[batch[number - 1]].update(label=label, decided_by=by)
    return names


def _request(batch: list[str], clusters: Clusters, hypotheses: dict[str, Hypothesis]) -> Request[ClusterNames]:
    blocks = []
    for n, label in enumerate(batch, start=1):
        members = clusters.clusters[label][:MEMBERS_SHOWN]
        statements = [hypotheses[m].statement or hypotheses[m].title for m in members if m in hypotheses]
        blocks.append(f"Cluster {n} ({len(clusters.clusters[label])} members):\n"
                      + untrusted("cluster", {"number": str(n)}, {"statements": statements}))

    def check(answer: ClusterNames) -> None:
        numbers = sorted(x.cluster for x in answer.labels)
        if numbers != list(range(1, len(batch) + 1)):
            raise ValueError(f"expected exactly one label for each cluster 1..{len(batch)}, got {numbers}")

    return Request(name="clusters-" + "_".join(batch), system=SYSTEM,
                   user=f"Name these {len(batch)} cluster(s).\n\n" + "\n\n".join(blocks),
                   schema=ClusterNames, check=check)
