"""Blocking checks of the proximity files, read as a reader of the seed formats sees them."""

import json

from dagster import AssetCheckExecutionContext, AssetCheckResult, asset_check

from assets.errors import project_errors
from assets.metadata import check_result as _result
from assets.partitions import hypothesis_inputs
from assets.proximity.adjudication import dedup_verdicts
from assets.proximity.assets import duplicate_pairs, proximity_clusters
from assets.proximity.resource import ProximityResource
from assets.proximity.sharded import similarity_graph
from hypograph.atomic import DATA_MAX, read_regular
from hypograph.proximity import checks, graph_files, store
from hypograph.proximity.adjudicate import verdict_violations
from resources import Inputs

CHECK = dict(blocking=True, partitions_def=hypothesis_inputs)


def _stored_graph(root) -> tuple[list[str], list[str | None], list[tuple[str, str]], str]:
    """The graph's node ids, each node's cluster, the edge violations, and which file they come from:
    graph.npz when it is graph.json's digest twin (what clusters and dupes read; checked vectorised),
    else graph.json itself (written by another tool, or edited)."""
    stored = graph_files.read_graph_npz(store.proximity_dir(root))
    if stored is not None:
        return stored.graph.ids, stored.clusters, checks.graph_edges_valid(stored.graph), "graph.npz"
    _, clusters, doc = graph_files.parse_graph_json(store.proximity_dir(root) / graph_files.GRAPH_JSON)
    return list(doc["nodes"]), clusters, checks.graph_symmetric(doc), "graph.json"


@asset_check(asset=similarity_graph, **CHECK)
@project_errors
def graph_covers_embedded_ids(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
    """Every embedded id is a graph node, and every node was embedded."""
    root = inputs.root(context.partition_key)
    ids = json.loads(read_regular(store.proximity_dir(root) / "embedding-ids.json", DATA_MAX, follow=True))
    nodes, _, _, source = _stored_graph(root)
    return _result(checks.embedded_ids_in_graph(ids, nodes), embedded=len(ids), checked=source)


@asset_check(asset=similarity_graph, **CHECK)
@project_errors
def graph_is_symmetric(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
    """Each edge listed on both endpoints with one similarity, none below threshold, no self-edges."""
    _, _, violations, source = _stored_graph(inputs.root(context.partition_key))
    return _result(violations, checked=source)


@asset_check(asset=proximity_clusters, **CHECK)
@project_errors
def clusters_partition_nodes(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
    """Clusters partition the graph's nodes, labelled C-01.. without gaps, matching graph.json."""
    root = inputs.root(context.partition_key)
    nodes, node_clusters, _, source = _stored_graph(root)
    raw = json.loads(read_regular(store.proximity_dir(root) / "clusters.json", DATA_MAX, follow=True))
    violations = checks.clusters_partition(raw["clusters"], nodes, raw.get("num_clusters"))
    membership = {m: c for c, ms in raw["clusters"].items() for m in ms}
    violations += [
        (i, f"graph.json says {c}, clusters.json says {membership.get(i)}")
        for i, c in zip(nodes, node_clusters, strict=True)
        if c != membership.get(i)
    ]
    return _result(violations, checked=source)


@asset_check(asset=duplicate_pairs, **CHECK)
@project_errors
def duplicate_pairs_are_valid(
    context: AssetCheckExecutionContext, inputs: Inputs, proximity: ProximityResource
) -> AssetCheckResult:
    """Pairs unique, ordered a < b, at or above the dupe threshold, by descending similarity."""
    pairs = store.read_dupes(inputs.root(context.partition_key))
    return _result(checks.duplicate_pairs_valid(pairs, proximity.settings().dupe_threshold), pairs=len(pairs))


@asset_check(asset=dedup_verdicts, **CHECK)
@project_errors
def every_pair_has_one_verdict(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
    """verdicts.json holds exactly one valid MERGE/KEEP/FLAG decision per duplicate pair."""
    root = inputs.root(context.partition_key)
    raw = json.loads(read_regular(store.proximity_dir(root) / "verdicts.json", DATA_MAX, follow=True))
    return _result(verdict_violations(store.read_dupes(root), raw), decisions=len(raw))


CHECKS = [
    graph_covers_embedded_ids,
    graph_is_symmetric,
    clusters_partition_nodes,
    duplicate_pairs_are_valid,
    every_pair_has_one_verdict,
]
