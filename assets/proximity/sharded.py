"""The two proximity steps that split across processes or machines: embedding and the graph.

Each is a graph-backed asset of three ops: one plans row ranges and fans out (``DynamicOut``), one
computes a range (mapped, one step per range), one joins the ranges into the asset's value. With
``proximity.shards: 1`` (default) there is one range and it uses this machine's cores; with N, the
run's executor runs the N steps in parallel (``HYPOGRAPH_EXECUTOR=multiprocess`` on one machine,
``celery``: a task each on Celery workers, ``k8s``: a pod each). Ranges and their results pass
between steps through ``shard_io_manager`` (in memory in a one-process run; else npz files, never
pickles, under a UPath: local disk, or object storage for steps on other machines).

Where each step may run (``dagster-celery``'s queue per step, op tag ``dagster-celery/queue``): the
fan-out and join ops read or write the input's folder (through the ``io_manager``), so they stay on
the default queue ``dagster``, served by workers that mount the inputs. The per-range ops read and
write nothing but the shard store -- the fan-out op puts the corpus (or the embeddings) there for
them -- so they go to the queue ``shards``, which any worker that reaches the shard store may serve.
Other executors ignore the tag.
"""

from dagster import DynamicOut, DynamicOutput, MetadataValue, OpExecutionContext, Out, Output, graph_asset, op

from assets.errors import project_errors
from assets.groups import PROXIMITY
from assets.partitions import hypothesis_inputs
from assets.proximity.resource import ProximityResource
from hypograph.hypotheses import Corpus
from hypograph.proximity import shards
from hypograph.proximity.embed import Embeddings, embed, embedding_ranges, join_embeddings
from hypograph.proximity.forks import available_cpus
from hypograph.proximity.graph import SimilarityGraph, assemble_graph, plan_graph
from hypograph.proximity.hints import sparse_graph_hint

SHARDS = "shard_io_manager"
GRAPH_ASSET = dict(group_name=PROXIMITY, partitions_def=hypothesis_inputs)
# dagster-celery's queue for a step that needs no input folder (deploy/README-deployment.md)
ANY_HOST = {"dagster-celery/queue": "shards"}
FAN_OUT = {"rows": DynamicOut(io_manager_key=SHARDS), "data": Out(io_manager_key=SHARDS)}


def _fan_out(ranges: list[tuple[int, int]], data):
    """``data`` (what every range step reads) once into the shard store, then one output per range."""
    yield Output(data, "data")
    for a, b in ranges:
        yield DynamicOutput((a, b), mapping_key=f"rows_{a}_{b}", output_name="rows")


@op(out=FAN_OUT)
@project_errors
def embedding_shards(hypothesis_texts: Corpus, proximity: ProximityResource):
    """Row ranges to embed separately (one for tfidf, whose IDF needs the whole corpus), and the
    corpus for the steps that embed them."""
    settings = proximity.settings()
    ranges = embedding_ranges(len(hypothesis_texts.ids), settings.backend, settings.shards)
    yield from _fan_out(ranges, hypothesis_texts)


@op(out=Out(io_manager_key=SHARDS), tags=ANY_HOST)
@project_errors
def embed_shard(hypothesis_texts: Corpus, rows, proximity: ProximityResource) -> Embeddings:
    """The embeddings of hypotheses [a, b)."""
    a, b = rows
    settings = proximity.settings()
    return embed(hypothesis_texts.ids[a:b], hypothesis_texts.texts[a:b], settings.backend, settings.model)


@op(out=Out(io_manager_key="io_manager"))
@project_errors
def join_embedding_shards(parts: list[Embeddings]) -> Output[Embeddings]:
    """L2-normalised rows, one per hypothesis, in the input's order."""
    emb = join_embeddings(parts)
    return Output(
        emb,
        metadata={
            "hypotheses": len(emb.ids),
            "backend": emb.backend,
            "model": emb.model,
            "dim": emb.dim,
            "shards": len(parts),
            "notes": MetadataValue.json(emb.notes),
        },
    )


@graph_asset(**GRAPH_ASSET, kinds={"scikitlearn"})
def hypothesis_embeddings(hypothesis_texts):
    """L2-normalised rows, one per hypothesis: TF-IDF (sparse) or sentence-transformers (dense),
    sbert embedded in ``shards`` row ranges."""
    ranges, corpus = embedding_shards(hypothesis_texts)
    parts = ranges.map(lambda rows: embed_shard(corpus, rows))
    return join_embedding_shards(parts.collect())


def _plan(emb: Embeddings, proximity: ProximityResource):
    settings = proximity.settings()
    return plan_graph(emb.rows, settings.graph_threshold, settings.max_neighbours, settings.dupe_threshold)


@op(out=FAN_OUT)
@project_errors
def similarity_shards(hypothesis_embeddings: Embeddings, proximity: ProximityResource):
    """Position ranges of about equal work (the plan is deterministic: every step rebuilds it), and
    the embeddings for the steps that search them."""
    ranges = shards.shard_ranges(_plan(hypothesis_embeddings, proximity), proximity.settings().shards)
    yield from _fan_out(ranges, hypothesis_embeddings)


@op(out=Out(io_manager_key=SHARDS), tags=ANY_HOST)
@project_errors
def similarity_shard(hypothesis_embeddings: Embeddings, rows, proximity: ProximityResource):
    """The edges found from one range: (block, how). One shard uses every core here; one of
    several uses one, the executor running the others beside it."""
    workers = available_cpus() if proximity.settings().shards == 1 else 1
    return shards.range_edges(_plan(hypothesis_embeddings, proximity), *rows, workers)


@op(out=Out(io_manager_key="io_manager"))
@project_errors
def merge_similarity_shards(
    context: OpExecutionContext, hypothesis_embeddings: Embeddings, parts: list, proximity: ProximityResource
) -> Output[SimilarityGraph]:
    """Cosine similarity graph: an edge for every pair at or above the graph threshold (at most K
    strongest per node, duplicates whatever K)."""
    emb = hypothesis_embeddings
    graph = assemble_graph(
        emb.ids,
        _plan(emb, proximity),
        [block for block, _ in parts],
        emb.describe(),
        parts[0][1],
        proximity.settings().dupe_threshold,
    )
    hint = sparse_graph_hint(len(graph.ids), graph.num_edges, graph.threshold, emb.rows, emb.backend)
    if hint:
        context.log.warning(hint)
    return Output(
        graph,
        metadata={
            "nodes": len(graph.ids),
            "edges": graph.num_edges,
            "threshold": MetadataValue.text(f"{graph.threshold:g}"),  # a setting: text, not plotted across runs
            "graph_threshold": MetadataValue.json({"value": graph.threshold}),  # as the summary prints it
            "backend": emb.backend,
            "model": emb.model,
            "shards": len(parts),
            "neighbour_cap": _cap_note(graph.info.get("max_neighbours", 0), proximity.settings().dupe_threshold),
            "built": MetadataValue.json(graph.info),
            **({"hint": hint} if hint else {}),
        },
    )


def _cap_note(cap: int, dupe_threshold: float) -> str:
    """What the graph's neighbour cap is, said where the asset is shown (prox graph has none by default)."""
    if not cap:
        return "none: every pair at or above the threshold (the original prox's graph)"
    return (
        f"{cap} strongest edges per node, and every pair >= {dupe_threshold} (proximity.max_neighbours; "
        "0 gives the original prox's graph, prox graph's default)"
    )


@graph_asset(**GRAPH_ASSET, kinds={"python"})
def similarity_graph(hypothesis_embeddings):
    """Cosine similarity graph, computed in ``shards`` row ranges merged into one."""
    ranges, embeddings = similarity_shards(hypothesis_embeddings)
    parts = ranges.map(lambda rows: similarity_shard(embeddings, rows))
    return merge_similarity_shards(hypothesis_embeddings, parts.collect())
