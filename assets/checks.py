"""Blocking asset checks, one per predicate, on the partition (input folder) the asset wrote.

Proximity checks read the files the IO manager wrote (the seed formats, as a reader sees them);
step-4 checks run the seed's checks on the vault with the same functions as ``hypograph check``.
"""

import json
import warnings

from dagster import AssetCheckExecutionContext, AssetCheckResult, MetadataValue, PreviewWarning, asset_check

from assets.adjudication import dedup_verdicts
from assets.casework import hypothesis_batch
from assets.library import hypothesis_library
from assets.metadata import violations_table
from assets.partitions import case_revisions, hypothesis_inputs, library_rounds, vaults
from assets.proximity import duplicate_pairs, proximity_clusters
from assets.sharded import similarity_graph
from assets.structure import hypothesis_clusters, hypothesis_dispositions
from hypograph.casework import checks as case_checks
from hypograph.casework.package import CasePackage
from hypograph.library import checks as library_checks
from hypograph.proximity import checks, graph_files, store
from hypograph.proximity.adjudicate import verdict_violations
from hypograph.structure import checks as step4
from hypograph.structure.baseline import read_baseline
from hypograph.vault.vault import open_vault
from resources import Inputs, ProximitySettings

# Checks of partitioned assets take the asset's partitions (the issue asks for it; Dagster 1.13 calls it preview).
warnings.filterwarnings("ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=PreviewWarning)
CHECK = dict(blocking=True, partitions_def=hypothesis_inputs)


def _result(violations: list[tuple[str, str]], **metadata) -> AssetCheckResult:
    return AssetCheckResult(
        passed=not violations,
        metadata={
            "violations": len(violations),
            "violation_list": violations_table(violations) if violations else MetadataValue.text("no violations"),
            **metadata,
        },
    )


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
def graph_covers_embedded_ids(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
    """Every embedded id is a graph node, and every node was embedded."""
    root = inputs.root(context.partition_key)
    ids = json.loads((store.proximity_dir(root) / "embedding-ids.json").read_text(encoding="utf-8"))
    nodes, _, _, source = _stored_graph(root)
    return _result(checks.embedded_ids_in_graph(ids, nodes), embedded=len(ids), checked=source)


@asset_check(asset=similarity_graph, **CHECK)
def graph_is_symmetric(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
    """Each edge listed on both endpoints with one similarity, none below threshold, no self-edges."""
    _, _, violations, source = _stored_graph(inputs.root(context.partition_key))
    return _result(violations, checked=source)


@asset_check(asset=proximity_clusters, **CHECK)
def clusters_partition_nodes(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
    """Clusters partition the graph's nodes, labelled C-01.. without gaps, matching graph.json."""
    root = inputs.root(context.partition_key)
    nodes, node_clusters, _, source = _stored_graph(root)
    raw = json.loads((store.proximity_dir(root) / "clusters.json").read_text(encoding="utf-8"))
    violations = checks.clusters_partition(raw["clusters"], nodes, raw.get("num_clusters"))
    membership = {m: c for c, ms in raw["clusters"].items() for m in ms}
    violations += [
        (i, f"graph.json says {c}, clusters.json says {membership.get(i)}")
        for i, c in zip(nodes, node_clusters, strict=True)
        if c != membership.get(i)
    ]
    return _result(violations, checked=source)


@asset_check(asset=duplicate_pairs, **CHECK)
def duplicate_pairs_are_valid(
    context: AssetCheckExecutionContext, inputs: Inputs, proximity: ProximitySettings
) -> AssetCheckResult:
    """Pairs unique, ordered a < b, at or above the dupe threshold, by descending similarity."""
    pairs = store.read_dupes(inputs.root(context.partition_key))
    return _result(checks.duplicate_pairs_valid(pairs, proximity.dupe_threshold), pairs=len(pairs))


@asset_check(asset=dedup_verdicts, **CHECK)
def every_pair_has_one_verdict(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
    """verdicts.json holds exactly one valid MERGE/KEEP/FLAG decision per duplicate pair."""
    root = inputs.root(context.partition_key)
    raw = json.loads((store.proximity_dir(root) / "verdicts.json").read_text(encoding="utf-8"))
    return _result(verdict_violations(store.read_dupes(root), raw), decisions=len(raw))


PROXIMITY_CHECKS = [
    graph_covers_embedded_ids,
    graph_is_symmetric,
    clusters_partition_nodes,
    duplicate_pairs_are_valid,
    every_pair_has_one_verdict,
]


def _step4_check(number: int, asset):
    """A blocking check running the seed's step-4 check ``number`` on the partition's vault."""
    name, what = step4.CHECK_NAMES[number]

    @asset_check(
        asset=asset, name=name, description=f"Step-4 check {number}: {what}.", blocking=True, partitions_def=vaults
    )
    def _check(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
        vault = open_vault(inputs.root(context.partition_key))
        return _result(step4.run_check(number, vault, read_baseline(vault.root)), check=str(number))

    return _check


STRUCTURE_CHECKS = [
    *(_step4_check(n, hypothesis_dispositions) for n in (1, 5, 6, 7)),
    *(_step4_check(n, hypothesis_clusters) for n in (2, 3, 4, 6)),
]


def _library_check(name: str, description: str):
    """A blocking check running the library key rule ``name`` on the partition's hypothesis_library.json."""

    @asset_check(
        asset=hypothesis_library, name=name, description=description, blocking=True, partitions_def=library_rounds
    )
    def _check(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
        root, _ = inputs.sub_root(context.partition_key)
        return _result(library_checks.run_checks(root)[name])

    return _check


LIBRARY_CHECKS = [
    _library_check("file_validates", "hypothesis_library.json validates against the library schema."),
    _library_check("scored", "Every behavior has an impact; every mechanism a novelty, planned data and models."),
    _library_check(
        "ids_unique_never_reused", "Ids unique, and none reused after a node was deleted (high-water mark)."
    ),
    _library_check("statements_distinct", "No two statements equal after normalisation."),
]


def _case_check(name: str, description: str):
    """A blocking check running the case-batch rule ``name`` on the partition's published batch."""

    @asset_check(
        asset=hypothesis_batch, name=name, description=description, blocking=True, partitions_def=case_revisions
    )
    def _check(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
        root, revision = inputs.sub_root(context.partition_key)
        return _result(case_checks.run_checks(CasePackage(root), int(revision[1:]))[name])

    return _check


CASE_CHECKS = [_case_check(name, description) for name, description in case_checks.CHECKS.items()]
