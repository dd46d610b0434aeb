"""Blocking asset checks: the invariants of the files each asset wrote, read back from disk."""

import json

from dagster import AssetCheckResult, asset_check

from assets.metadata import violations_table
from assets.adjudication import dedup_verdicts
from assets.structure import hypothesis_clusters, hypothesis_dispositions
from assets.proximity import duplicate_pairs, proximity_clusters, similarity_graph
from hypograph.proximity import checks, store
from hypograph.proximity.adjudicate import verdict_violations
from hypograph.structure import checks as step4
from hypograph.structure.baseline import read_baseline
from hypograph.vault.vault import open_vault
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


def _step4_check(number: int, asset, description: str):
    """A blocking check running the seed's step-4 check ``number`` on the vault."""

    @asset_check(asset=asset, name=f"check_{number}_{asset.key.path[-1]}", blocking=True, description=description)
    def _check(hypograph_input: HypographInput) -> AssetCheckResult:
        vault = open_vault(hypograph_input.root)
        return _result(step4.run_check(number, vault, read_baseline(vault.root)))

    return _check


STRUCTURE_CHECKS = [
    _step4_check(1, hypothesis_dispositions, "Check 1: every H has one state; merged resolves in one hop; drops have reasons; folders match; nothing deleted."),
    _step4_check(5, hypothesis_dispositions, "Check 5: survivors' merged_from, sources, locators and generalization notes; sourceless H are residual or constructed."),
    _step4_check(6, hypothesis_dispositions, "Check 6: no step-4 field holds a number, probability, weight or rank."),
    _step4_check(2, hypothesis_clusters, "Check 2: HC nodes well-formed: folder, id, >= 2 active members in order, required keys."),
    _step4_check(3, hypothesis_clusters, "Check 3: exactly one residual listed last, or a justified exhaustive cluster."),
    _step4_check(4, hypothesis_clusters, "Check 4: every active H in exactly one HC, its backlink naming it."),
    _step4_check(6, hypothesis_clusters, "Check 6: no step-4 field holds a number, probability, weight or rank."),
]
