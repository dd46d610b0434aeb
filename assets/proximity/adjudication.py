"""LLM-backed proximity assets: MERGE/KEEP/FLAG verdicts on duplicate pairs, cluster names."""

from dagster import AssetExecutionContext, MetadataValue, Output, asset

from assets.errors import step
from assets.proximity.assets import ASSET
from assets.proximity.metadata import cluster_report, largest_clusters, pair_table, verdict_summary
from assets.proximity.resource import ProximityResource
from hypograph.hypotheses import Corpus
from hypograph.proximity.adjudicate import (
    AdjudicationSettings,
    adjudicate,
    read_reviews,
    review_queue,
    unapplied_reviews,
)
from hypograph.proximity.cluster_names import name_clusters
from hypograph.proximity.communities import Clusters
from hypograph.proximity.dupes import DuplicatePair
from hypograph.proximity.embed import Embeddings, pair_similarity
from resources import Inputs, LLMResource


# The resources come from the context, not as parameters: with its three inputs they would be
# seven (Dagster takes them one way or the other, not both).
@asset(**ASSET, kinds={"openai"}, required_resource_keys={"inputs", "llm", "proximity"}, output_required=False)
@step
def dedup_verdicts(
    context: AssetExecutionContext,
    duplicate_pairs: list[DuplicatePair],
    hypothesis_texts: Corpus,
    hypothesis_embeddings: Embeddings,
):
    """One MERGE/KEEP/FLAG decision per duplicate pair (human review, auto-merge, model, or FLAG),
    and a person's decision on any other pair of current hypotheses."""
    inputs: Inputs = context.resources.inputs
    llm: LLMResource = context.resources.llm
    proximity: ProximityResource = context.resources.proximity
    root = inputs.root(context.partition_key)
    client = llm.client(inputs.state_dir(root), "dedup_verdicts")
    hypotheses = {h.id: h for h in hypothesis_texts.hypotheses}
    reviews = read_reviews(root, hypotheses)
    decisions = adjudicate(
        duplicate_pairs,
        hypotheses,
        reviews,
        client,
        AdjudicationSettings(auto_merge=proximity.settings().auto_merge),
        similarity=pair_similarity(hypothesis_embeddings),
    )
    queue = review_queue(decisions)
    unapplied = unapplied_reviews(reviews, hypotheses)
    for line in unapplied:
        context.log.warning(line)
    counts = {v: sum(d.verdict == v for d in decisions) for v in ("MERGE", "KEEP", "FLAG")}
    return Output(
        decisions,
        metadata={
            "pairs": len(decisions),
            **{f"verdict_{k.lower()}": n for k, n in counts.items()},
            "decided_by": MetadataValue.json(
                {s: sum(d.decided_by == s for d in decisions) for s in {d.decided_by for d in decisions}}
            ),
            "verdicts": pair_table(decisions, hypothesis_texts.hypotheses),
            "reviews_not_applied": MetadataValue.json(unapplied),
            "review_queue": pair_table(queue, hypothesis_texts.hypotheses) if queue else MetadataValue.text("empty"),
            "summary": verdict_summary(duplicate_pairs, decisions, hypothesis_texts.hypotheses),
            **client.metadata(),
        },
    )


@asset(**ASSET, kinds={"openai"}, output_required=False)
@step
def cluster_labels(
    context: AssetExecutionContext,
    proximity_clusters: Clusters,
    hypothesis_texts: Corpus,
    inputs: Inputs,
    llm: LLMResource,
):
    """A short descriptive name per cluster from the model; offline, the keyword label."""
    client = llm.client(inputs.state_dir(inputs.root(context.partition_key)), "cluster_labels")
    names = name_clusters(proximity_clusters, {h.id: h for h in hypothesis_texts.hypotheses}, client)
    return Output(
        names,
        metadata={
            "clusters": len(names),
            "report": cluster_report(proximity_clusters, {c: n["label"] for c, n in names.items()}),
            "largest": largest_clusters(proximity_clusters, names),
            **client.metadata(),
        },
    )
