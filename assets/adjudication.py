"""LLM-backed proximity assets: MERGE/KEEP/FLAG verdicts on duplicate pairs, cluster names."""

from dagster import MetadataValue, Output, asset

from assets.metadata import cluster_report
from hypograph.hypotheses import Corpus
from hypograph.proximity.adjudicate import adjudicate, read_reviews, review_queue
from hypograph.proximity.cluster_names import name_clusters
from hypograph.proximity.communities import Clusters
from hypograph.proximity.dupes import DuplicatePair
from resources import HypographInput, LLMResource, ProximitySettings

GROUP = "proximity"


@asset(group_name=GROUP, io_manager_key="proximity_io", kinds={"openai"})
def dedup_verdicts(duplicate_pairs: list[DuplicatePair], hypothesis_texts: Corpus,
                   hypograph_input: HypographInput, llm: LLMResource, proximity: ProximitySettings):
    """One MERGE/KEEP/FLAG decision per duplicate pair: human review, auto-merge, model, or FLAG."""
    client = llm.client(hypograph_input.state_dir, "dedup_verdicts")
    reviews = read_reviews(hypograph_input.root)
    hypotheses = {h.id: h for h in hypothesis_texts.hypotheses}
    decisions = adjudicate(duplicate_pairs, hypotheses, reviews, client, proximity.auto_merge)
    queue = review_queue(decisions)
    counts = {v: sum(d.verdict == v for d in decisions) for v in ("MERGE", "KEEP", "FLAG")}
    return Output(decisions, metadata={
        "pairs": len(decisions), **{f"verdict_{k.lower()}": n for k, n in counts.items()},
        "decided_by": MetadataValue.json({s: sum(d.decided_by == s for d in decisions) for s in {d.decided_by for d in decisions}}),
        "review_queue": MetadataValue.md("\n".join(f"- {d.pair[0]} / {d.pair[1]} ({d.similarity}): {d.rationale}" for d in queue) or "empty"),
        **client.metadata(),
    })


@asset(group_name=GROUP, io_manager_key="proximity_io", kinds={"openai"})
def cluster_labels(proximity_clusters: Clusters, hypothesis_texts: Corpus,
                   hypograph_input: HypographInput, llm: LLMResource):
    """A short descriptive name per cluster from the model; offline, the keyword label."""
    client = llm.client(hypograph_input.state_dir, "cluster_labels")
    names = name_clusters(proximity_clusters, {h.id: h for h in hypothesis_texts.hypotheses}, client)
    return Output(names, metadata={
        "clusters": len(names),
        "report": cluster_report(proximity_clusters, {c: n["label"] for c, n in names.items()}),
        **client.metadata(),
    })
