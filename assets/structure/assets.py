"""Structure step 4 assets (vaults): 4a dispositions -> 4b clusters -> the structure map.

Partitioned by ``vaults``; each reads its vault's proximity (``dedup_verdicts``,
``hypothesis_embeddings``, partitioned by ``hypothesis_inputs`` under the same id) through the
identity mapping. Their output is the vault itself, written by the domain functions through the
vault's journal and lock (so they return ``MaterializeResult``; no IO manager writes a node); a
structuring interrupted between them, or run twice at once, ends as one uninterrupted run (the
marker in ``.hypograph/structuring.json``, see ``hypograph/structure/session.py``). The
map reports the new version of the vault's ``hypotheses`` it leaves, so the change sensor does not
take step 4's own writes for a person's; the vault's proximity is then stale and is materialized
again (``hypograph structure`` does it at once, the sensor on its next tick). The binary checks are
in ``checks.py`` beside this module.

Each step writes into the vault only while its run is the newest of the vault's partition and has
not ended (``io_managers/fleet.py``): it asks under the vault's structuring lock and keeps the lock
to its last write (``newest_only``), so a run created after the answer writes after this step.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from dagster import (
    Any,
    AssetExecutionContext,
    AssetIn,
    IdentityPartitionMapping,
    MaterializeResult,
    MetadataValue,
    asset,
)

from assets.errors import step
from assets.groups import STRUCTURE
from assets.partitions import vaults
from assets.proximity.source import report_rewrite
from hypograph.atomic import STATE_MAX, read_utf8
from hypograph.proximity.adjudicate import Decision
from hypograph.proximity.embed import Embeddings
from io_managers.fleet import fence
from resources import Inputs, LLMResource

# Step 4's domain modules are imported inside the assets that run them: every run of any job loads
# these definitions, a proximity run too (the types the inputs are annotated with stay here).

STRUCTURED = {"group_name": STRUCTURE, "partitions_def": vaults, "kinds": {"markdown"}}
SAME_INPUT = IdentityPartitionMapping()  # a vault's id is its key in hypothesis_inputs too


@contextmanager
def newest_only(context: AssetExecutionContext, root) -> Iterator[None]:
    """The block (a step's whole work on vault ``root``) under the vault's structuring lock, which
    4a, 4b and the map take for every write, after the fence: a run that is no longer the newest of
    the partition, or has ended (a step delivered late), gets one HypographError and writes nothing."""
    from hypograph.structure.session import structuring

    with structuring(root, run=context.run_id[:8]):
        fence(context.instance, context.run_id, context.asset_key)
        yield


def _lines(items) -> MetadataValue:
    return MetadataValue.md("\n".join(f"- {line}" for line in items) or "none")


@asset(
    **STRUCTURED,
    ins={
        "dedup_verdicts": AssetIn(partition_mapping=SAME_INPUT, dagster_type=Any),
        "hypothesis_embeddings": AssetIn(partition_mapping=SAME_INPUT, dagster_type=Any),
    },
    output_required=False,
)
@step
def hypothesis_dispositions(
    context: AssetExecutionContext,
    dedup_verdicts: list[Decision],
    hypothesis_embeddings: Embeddings,
    inputs: Inputs,
    llm: LLMResource,
) -> MaterializeResult:
    """4a: merge near-duplicates (discriminability test), drop the off-topic, state on every H."""
    from hypograph.llm.policy import policy_for
    from hypograph.structure.dispositions import run_dispositions

    root = inputs.root(context.partition_key)
    client = llm.client(inputs.state_dir(root), "hypothesis_dispositions")
    with newest_only(context, root):
        report = run_dispositions(root, dedup_verdicts, hypothesis_embeddings, policy_for(client))
    return MaterializeResult(
        metadata={
            "merged": sum(map(len, report.merged.values())),
            "dropped": len(report.dropped),
            "active": len(report.active),
            "files_changed": report.files_changed,
            "merges": _lines(f"{s} ← {', '.join(a)}" for s, a in report.merged.items()),
            "drops": _lines(f"{i}: {r}" for i, r in report.dropped.items()),
            "candidate_pairs": report.candidates,
            "pairs_judged": report.judged,
            "merge_groups_asked_directly": report.groups_direct,
            "merge_groups_closed_by_chaining": report.groups_chained,
            "amended": report.amended,
            "merged_by_hand": report.by_hand,
            "refused_by_hand": report.refused,
            "joins_blocked_by_keep": _lines(report.blocked_by_keep),
            "resumed": report.resumed or "",
            **client.metadata(),
        }
    )


@asset(**STRUCTURED, deps=[hypothesis_dispositions], output_required=False)
@step
def hypothesis_clusters(context: AssetExecutionContext, inputs: Inputs, llm: LLMResource) -> MaterializeResult:
    """4b: hypothesis-cluster nodes, and each active H's cluster backlink. A cluster whose members
    may not cover every answer gets a residual: a minted catch-all member, "the answer is not listed
    here"; a complement is a minted answer the cluster needs that no source stated
    (``minted_hypotheses`` counts both)."""
    from hypograph.llm.policy import policy_for
    from hypograph.structure.carving import run_clusters

    root = inputs.root(context.partition_key)
    client = llm.client(inputs.state_dir(root), "hypothesis_clusters")
    with newest_only(context, root):
        report = run_clusters(root, policy_for(client))
    return MaterializeResult(
        metadata={
            "clusters": len(report.clusters),
            "created": len(report.created),
            "minted": len(report.minted),
            "minted_hypotheses": sum(i.startswith("H-") for i in report.minted),
            "stragglers_dropped": len(report.dropped),
            "membership": _lines(f"{c}: {', '.join(m)}" for c, m in report.clusters.items()),
            **client.metadata(),
        }
    )


@asset(**STRUCTURED, deps=[hypothesis_clusters], output_required=False)
@step
def structure_map(context: AssetExecutionContext, inputs: Inputs) -> MaterializeResult:
    """agent-notes/structure.md: the cluster inventory and counts (rewritten only on change); the
    vault's hypotheses as step 4 left them reported as a new observation."""
    from hypograph.structure.structure_map import structure_counts, vault_summary, write_map
    from hypograph.vault.vault import open_vault

    root = inputs.root(context.partition_key)
    with newest_only(context, root):
        path, written = write_map(root)
        vault = open_vault(root)
    version = report_rewrite(context, inputs)
    return MaterializeResult(
        metadata={
            "path": MetadataValue.path(str(path)),
            "rewritten": written,
            **structure_counts(vault),
            "vault_now": MetadataValue.json(vault_summary(vault)),  # what `hypograph structure` prints of it
            "hypotheses_version": version,
            "preview": MetadataValue.md(read_utf8(path, STATE_MAX)),
        }
    )
