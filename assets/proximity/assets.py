"""Proximity assets (prox formats): texts -> embeddings -> similarity graph -> clusters, graph -> dupes.

Embeddings and the graph are in ``sharded.py`` (each can be split over processes or machines)."""

from dagster import AssetExecutionContext, MetadataValue, Output, asset

from assets.errors import step
from assets.groups import PROXIMITY
from assets.partitions import hypothesis_inputs
from assets.proximity.metadata import cluster_table, pair_table
from assets.proximity.resource import ProximityResource
from assets.proximity.source import hypotheses
from hypograph.hypotheses import Corpus
from hypograph.library.corpus import input_corpus
from hypograph.proximity.communities import labelled_clusters
from hypograph.proximity.dupes import pairs_at
from hypograph.proximity.embed import Embeddings
from hypograph.proximity.graph import SimilarityGraph
from resources import Inputs

# What every proximity asset takes: its group and partitions, and the IO manager that writes its
# values in the seed formats (``io_manager.py``).
ASSET = {"group_name": PROXIMITY, "partitions_def": hypothesis_inputs, "io_manager_key": "io_manager"}


@asset(**ASSET, deps=[hypotheses], kinds={"python"}, output_required=False)
@step
def hypothesis_texts(context: AssetExecutionContext, inputs: Inputs, proximity: ProximityResource) -> Output[Corpus]:
    """Every hypothesis of the input (run dir, vault, or a library's behaviors and mechanisms),
    validated; a bad file fails the run (nothing written) unless the settings say skip_bad_files.
    The run's settings are validated first: a bad one fails here, in one line, before anything is
    written."""
    settings = proximity.settings()
    corpus = input_corpus(inputs.root(context.partition_key), skip_bad=settings.skip_bad_files)
    for w in corpus.warnings:
        context.log.warning(w)
    return Output(
        corpus,
        metadata={
            "hypotheses": len(corpus.hypotheses),
            "files_read": corpus.files_read if corpus.files_read is not None else len(corpus.hypotheses),
            "input_kind": corpus.kind,
            "skipped": MetadataValue.md("\n".join(f"- {w}" for w in corpus.warnings) or "none"),
            "warnings": MetadataValue.json(corpus.warnings),
        },
    )


@asset(**ASSET, kinds={"igraph"}, output_required=False)
@step
def proximity_clusters(
    similarity_graph: SimilarityGraph,
    hypothesis_texts: Corpus,
    hypothesis_embeddings: Embeddings,
    proximity: ProximityResource,
):
    """Louvain communities (seeded), labelled C-01.. by size, each with its distinctive keywords."""
    texts = dict(zip(hypothesis_texts.ids, hypothesis_texts.texts, strict=True))
    clusters = labelled_clusters(similarity_graph, texts, proximity.settings().algorithm, terms=hypothesis_embeddings)
    return Output(
        clusters,
        metadata={
            "clusters": clusters.num_clusters,
            "algorithm": clusters.algorithm,
            "singletons": sum(len(m) == 1 for m in clusters.clusters.values()),
            "cluster_table": cluster_table(clusters, titles={h.id: h.title for h in hypothesis_texts.hypotheses}),
        },
    )


@asset(**ASSET, kinds={"python"}, output_required=False)
@step
def duplicate_pairs(
    similarity_graph: SimilarityGraph,
    hypothesis_embeddings: Embeddings,
    hypothesis_texts: Corpus,
    proximity: ProximityResource,
):
    """Near-duplicate pairs at or above the dupe threshold, by descending similarity (from the
    embeddings when the graph does not hold them all: a lower threshold, or the neighbour cap)."""
    pairs = pairs_at(similarity_graph, lambda: hypothesis_embeddings, proximity.settings().dupe_threshold)
    return Output(
        pairs,
        metadata={
            "pairs": len(pairs),
            "threshold": MetadataValue.text(
                f"{proximity.settings().dupe_threshold:g}"
            ),  # a setting: text, not a plotted number
            "top_pairs": pair_table(pairs, hypothesis_texts.hypotheses),
        },
    )
