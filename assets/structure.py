"""Structure step 4 assets (seed 000): 4a dispositions -> 4b clusters -> the structure map -> the
proximity view of the structured vault.

Their output is the vault itself, written by the domain functions through the vault journal and
lock; each asset reports what it changed as metadata. The binary checks are in ``assets/checks``.
"""

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from assets.groups import STRUCTURE
from assets.partitions import inputs
from hypograph.hypotheses import input_fingerprint
from hypograph.llm.policy import policy_for
from hypograph.proximity.adjudicate import Decision
from hypograph.proximity.embed import Embeddings
from hypograph.structure.carving import run_clusters
from hypograph.structure.dispositions import run_dispositions
from hypograph.structure.proximity_view import refresh_proximity
from hypograph.structure.structure_map import structure_counts, write_map
from hypograph.vault.vault import open_vault
from resources import Inputs, LLMResource, ProximitySettings

ASSET = dict(group_name=STRUCTURE, partitions_def=inputs, kinds={"markdown"})


@asset(**ASSET)
def hypothesis_dispositions(context: AssetExecutionContext, dedup_verdicts: list[Decision],
                            hypothesis_embeddings: Embeddings, inputs: Inputs, llm: LLMResource) -> MaterializeResult:
    """4a: merge near-duplicates (discriminability test), drop the off-topic, state on every H."""
    root = inputs.root(context.partition_key)
    client = llm.client(inputs.state_dir(root), "hypothesis_dispositions")
    report = run_dispositions(open_vault(root), dedup_verdicts, hypothesis_embeddings, policy_for(client))
    return MaterializeResult(metadata={
        "merged": sum(map(len, report.merged.values())), "dropped": len(report.dropped),
        "active": len(report.active), "files_changed": report.files_changed,
        "merges": MetadataValue.md("\n".join(f"- {s} ← {', '.join(a)}" for s, a in report.merged.items()) or "none"),
        "drops": MetadataValue.md("\n".join(f"- {i}: {r}" for i, r in report.dropped.items()) or "none"),
        "candidate_pairs": report.candidates, "pairs_judged": report.judged,
        "merge_groups_asked_directly": report.groups_direct, "merge_groups_closed_by_chaining": report.groups_chained,
        "amended": report.amended, "merged_by_hand": report.by_hand, "refused_by_hand": report.refused,
        **client.metadata(),
    })


@asset(**ASSET, deps=[hypothesis_dispositions])
def hypothesis_clusters(context: AssetExecutionContext, inputs: Inputs, llm: LLMResource) -> MaterializeResult:
    """4b: hypothesis-cluster nodes with residuals, and each active H's cluster backlink."""
    root = inputs.root(context.partition_key)
    client = llm.client(inputs.state_dir(root), "hypothesis_clusters")
    report = run_clusters(open_vault(root), policy_for(client))
    return MaterializeResult(metadata={
        "clusters": len(report.clusters), "created": len(report.created), "minted": len(report.minted),
        "minted_hypotheses": sum(i.startswith("H-") for i in report.minted),
        "stragglers_dropped": len(report.dropped),
        "membership": MetadataValue.md("\n".join(f"- {c}: {', '.join(m)}" for c, m in report.clusters.items())
                                       or "none"),
        **client.metadata(),
    })


@asset(**ASSET, deps=[hypothesis_clusters])
def structure_map(context: AssetExecutionContext, inputs: Inputs) -> MaterializeResult:
    """agent-notes/structure.md: the cluster inventory and counts (rewritten only on change)."""
    vault = open_vault(inputs.root(context.partition_key))
    path, written = write_map(vault)
    return MaterializeResult(metadata={
        "path": MetadataValue.path(str(path)), "rewritten": written, **structure_counts(vault),
        "preview": MetadataValue.md(path.read_text(encoding="utf-8")),
    })


@asset(**ASSET, deps=[structure_map])
def structured_proximity(context: AssetExecutionContext, inputs: Inputs, llm: LLMResource,
                         proximity: ProximitySettings) -> MaterializeResult:
    """proximity/ rewritten for the structured vault, so the next run starts from what this one left."""
    root = inputs.root(context.partition_key)
    state = inputs.state_dir(root)
    counts = refresh_proximity(
        root, proximity.backend, proximity.model, proximity.graph_threshold, proximity.dupe_threshold,
        proximity.auto_merge, proximity.algorithm,
        llm.client(state, "dedup_verdicts"), llm.client(state, "cluster_labels"), proximity.max_neighbours,
    )
    return MaterializeResult(metadata={
        **counts, "path": MetadataValue.path(str(root / "proximity")),
        # hypotheses/ as step 4 left it: the hypotheses_changed sensor's "already processed"
        "hypotheses_fingerprint": input_fingerprint(root),
    })
