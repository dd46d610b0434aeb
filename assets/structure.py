"""Structure step 4 assets (seed 000): 4a dispositions -> 4b clusters -> the structure map.

Their output is the vault itself, written by the domain functions through the vault journal and
lock; each asset reports what it changed as metadata. The binary checks are in ``assets/checks``.
"""

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from assets.adjudication import dedup_verdicts
from hypograph.proximity.adjudicate import Decision
from hypograph.structure.carving import run_clusters
from hypograph.structure.dispositions import run_dispositions
from hypograph.structure.structure_map import structure_counts, write_map
from hypograph.vault.vault import open_vault
from resources import HypographInput, LLMResource

GROUP = "structure"


@asset(group_name=GROUP, kinds={"markdown"}, deps=[dedup_verdicts])
def hypothesis_dispositions(hypograph_input: HypographInput, llm: LLMResource) -> MaterializeResult:
    """4a: merge near-duplicates (discriminability test), drop the off-topic, state on every H."""
    from hypograph.proximity.store import read_verdicts

    client = llm.client(hypograph_input.state_dir, "hypothesis_dispositions")
    verdicts: list[Decision] = read_verdicts(hypograph_input.root)
    report = run_dispositions(open_vault(hypograph_input.root), verdicts, client)
    return MaterializeResult(metadata={
        "merged": sum(map(len, report.merged.values())), "dropped": len(report.dropped),
        "active": len(report.active), "files_changed": report.files_changed,
        "merges": MetadataValue.md("\n".join(f"- {s} ← {', '.join(a)}" for s, a in report.merged.items()) or "none"),
        "drops": MetadataValue.md("\n".join(f"- {i}: {r}" for i, r in report.dropped.items()) or "none"),
        **client.metadata(),
    })


@asset(group_name=GROUP, kinds={"markdown"}, deps=[hypothesis_dispositions])
def hypothesis_clusters(hypograph_input: HypographInput, llm: LLMResource) -> MaterializeResult:
    """4b: hypothesis-cluster nodes with residuals, and each active H's cluster backlink."""
    client = llm.client(hypograph_input.state_dir, "hypothesis_clusters")
    report = run_clusters(open_vault(hypograph_input.root), client)
    return MaterializeResult(metadata={
        "clusters": len(report.clusters), "created": len(report.created), "minted": len(report.minted),
        "stragglers_dropped": len(report.dropped),
        "membership": MetadataValue.md("\n".join(f"- {c}: {', '.join(m)}" for c, m in report.clusters.items()) or "none"),
        **client.metadata(),
    })


@asset(group_name=GROUP, kinds={"markdown"}, deps=[hypothesis_clusters])
def structure_map(context: AssetExecutionContext, hypograph_input: HypographInput) -> MaterializeResult:
    """agent-notes/structure.md: the cluster inventory and counts (rewritten only on change)."""
    vault = open_vault(hypograph_input.root)
    path, written = write_map(vault)
    return MaterializeResult(metadata={
        "path": str(path), "rewritten": written, **structure_counts(vault),
        "preview": MetadataValue.md(path.read_text(encoding="utf-8")),
    })
