"""Blocking asset checks: the invariants of the files each asset wrote, read back from disk."""

import json

from dagster import AssetCheckResult, asset_check

from assets.metadata import violations_table
from assets.adjudication import dedup_verdicts
from assets.proximity import duplicate_pairs, proximity_clusters, similarity_graph
from hypograph.proximity import checks, store
from hypograph.proximity.adjudicate import verdict_violations
from resources import HypographInput, ProximitySettings


def _result(violations: list[tuple[str, str]], **metadata) -> AssetCheckResult:
    return AssetCheckResult(
        passed=not violations,
        metadata={"violations": len(violations), "violation_list": violations_table(violations), **metadata},
    )


@asset_check(asset=similarity_graph, blocking=True)
def graph_covers_embedded_ids(hypograph_input: HypographInput) -> AssetCheckResult:
    """Every embedded id is a graph node, and every node was embedded."""
    root = hypograph_input.root
    ids = json.loads((store.proximity_dir(root) / "embedding-ids.json").read_text(encoding="utf-8"))
    _, doc = store.read_graph(root)
    return _result(checks.embedded_ids_in_graph(ids, doc), embedded=len(ids))


@asset_check(asset=similarity_graph, blocking=True)
def graph_is_symmetric(hypograph_input: HypographInput) -> AssetCheckResult:
    """Each edge listed on both endpoints with one similarity, none below threshold, no self-edges."""
    _, doc = store.read_graph(hypograph_input.root)
    return _result(checks.graph_symmetric(doc))


@asset_check(asset=proximity_clusters, blocking=True)
def clusters_partition_nodes(hypograph_input: HypographInput) -> AssetCheckResult:
    """Clusters partition the graph's nodes, labelled C-01.. without gaps, matching graph.json."""
    root = hypograph_input.root
    _, doc = store.read_graph(root)
    raw = json.loads((store.proximity_dir(root) / "clusters.json").read_text(encoding="utf-8"))
    violations = checks.clusters_partition(raw["clusters"], list(doc["nodes"]), raw.get("num_clusters"))
    membership = {m: c for c, ms in raw["clusters"].items() for m in ms}
    violations += [(i, f"graph.json says {n['cluster']}, clusters.json says {membership.get(i)}")
                   for i, n in doc["nodes"].items() if n["cluster"] != membership.get(i)]
    return _result(violations)


@asset_check(asset=duplicate_pairs, blocking=True)
def duplicate_pairs_are_valid(hypograph_input: HypographInput, proximity: ProximitySettings) -> AssetCheckResult:
    """Pairs unique, ordered a < b, at or above the dupe threshold, by descending similarity."""
    pairs = store.read_dupes(hypograph_input.root)
    return _result(checks.duplicate_pairs_valid(pairs, proximity.dupe_threshold), pairs=len(pairs))


@asset_check(asset=dedup_verdicts, blocking=True)
def every_pair_has_one_verdict(hypograph_input: HypographInput) -> AssetCheckResult:
    """verdicts.json holds exactly one valid MERGE/KEEP/FLAG decision per duplicate pair."""
    root = hypograph_input.root
    raw = json.loads((store.proximity_dir(root) / "verdicts.json").read_text(encoding="utf-8"))
    return _result(verdict_violations(store.read_dupes(root), raw), decisions=len(raw))


PROXIMITY_CHECKS = [
    graph_covers_embedded_ids, graph_is_symmetric, clusters_partition_nodes, duplicate_pairs_are_valid,
    every_pair_has_one_verdict,
]
