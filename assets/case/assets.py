"""Case batch assets, one partition per case package and analysis revision (``<case id>/r0001``):
the model's draft interpretation -> the interpretation a person confirmed -> the frozen context
(policy pinned) -> the published batch -> the
batch's H nodes in a vault. Each writes through the case package's journal and yields
``MaterializeResult``. A revision a later ``case add`` superseded, and one not confirmed yet, end
their steps with no output (``assets.errors.Skip``: nothing downstream runs, no red cell, earlier
results stay). Blocking checks are in ``checks.py`` beside this module."""

import asyncio

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from assets.case.resource import CaseResource
from assets.case.source import case_package
from assets.errors import SUPERSEDED, Skip, failure, step
from assets.groups import CASE
from assets.partitions import case_revisions
from hypograph.errors import HypographError
from hypograph.ids import key_number, numbered_key
from resources import Inputs, LLMResource

# The case domain modules are imported inside the assets that use them: every run of any job
# loads these definitions, a proximity run too.

ASSET = {"group_name": CASE, "partitions_def": case_revisions}  # what every case asset takes


def _case(context: AssetExecutionContext, inputs: Inputs):
    """(store, case id, manifest) of this partition; the revision must be the package's current one
    (an earlier one is skipped as superseded, a later one refused)."""
    from hypograph.case.package import CaseStore

    root, revision = inputs.sub_root(context.partition_key)
    store, case_id = CaseStore.for_dir(root)
    manifest = store.package(case_id).manifest()
    current = numbered_key(manifest["analysis_revision"])
    if key_number(revision) < manifest["analysis_revision"]:
        raise Skip(
            f"{root}: revision {revision} is superseded by {current} (`hypograph case add`); "
            "its results stay as they were",
            SUPERSEDED,
        )
    if revision != current:
        raise HypographError(
            f"{root}: revision {revision} is not the current one ({current}); earlier revisions stay as they were"
        )
    return store, case_id, manifest


@asset(**ASSET, deps=[case_package], kinds={"openai"}, output_required=False)
@step
def interpretation_draft(
    context: AssetExecutionContext, inputs: Inputs, case: CaseResource, llm: LLMResource
) -> MaterializeResult:
    """The model's draft interpretation of the revision (question, statements with their sources,
    divergence, failure stage, behavior) from the catalogue and bounded excerpts, validated and
    saved unconfirmed for a person to confirm; with no model, a template to fill in. An existing
    draft is kept (no call); a revision confirmed without one (the example case) shows none."""
    from hypograph.case.gateway import CaseGateway
    from hypograph.case.interpret import draft_interpretation

    store, case_id, manifest = _case(context, inputs)
    policy = case.settings().policy()
    report = draft_interpretation(
        store.root / case_id, policy, CaseGateway.optional(policy, llm.config()), manifest["analysis_revision"]
    )
    yield MaterializeResult(
        metadata={
            "drafted_by": report.drafted_by,
            "line": report.message,
            "path": MetadataValue.path(str(report.path)),
            "llm": MetadataValue.json(report.llm),
        }
    )


@asset(**ASSET, deps=[case_package, interpretation_draft], kinds={"json"}, output_required=False)
@step
def case_interpretation(context: AssetExecutionContext, inputs: Inputs) -> MaterializeResult:
    """The revision's interpretation, confirmed by a person and verified against its case files; one
    not confirmed yet is skipped, saying what to do."""
    from hypograph.case.context import NotConfirmed, verified_interpretation

    store, case_id, manifest = _case(context, inputs)
    try:
        interp, catalogue = verified_interpretation(store.package(case_id), manifest)
    except NotConfirmed as e:  # nothing wrong with it: a person confirms it first
        raise Skip(str(e)) from None
    yield MaterializeResult(
        metadata={
            "revision": manifest["analysis_revision"],
            "confirmed": interp.confirmed,
            "statements": len(interp.statements),
            "sources": len(catalogue.sources),
            "path": MetadataValue.path(str(store.root / case_id / manifest["artifacts"]["interpretation"]["path"])),
        }
    )


@asset(**ASSET, deps=[case_interpretation], kinds={"json"}, output_required=False)
@step
def case_context(
    context: AssetExecutionContext, inputs: Inputs, case: CaseResource, llm: LLMResource
) -> MaterializeResult:
    """Phase 1: the policy pinned and the prompt context frozen (policy.json, context.json), no model
    call; first, under the case lock, the batch's guards: the lock free (DEFERRED), a model unless
    the batch is published or its round recorded (nothing written without one)."""
    from hypograph.case.builder import HypothesisBuilder
    from hypograph.case.gateway import CaseGateway

    store, case_id, manifest = _case(context, inputs)
    policy = case.settings().policy()
    builder = HypothesisBuilder(store, CaseGateway.optional(policy, llm.config()), policy)
    frozen = builder.prepare(case_id, manifest["package_id"])
    yield MaterializeResult(
        metadata={"sources": len(frozen["catalogue"]), "policy": MetadataValue.json(frozen["policy"])}
    )


@asset(**ASSET, deps=[case_context], kinds={"openai"}, output_required=False)
@step
def hypothesis_batch(
    context: AssetExecutionContext, inputs: Inputs, case: CaseResource, llm: LLMResource
) -> MaterializeResult:
    """Phases 2-3: one model round, then hypotheses, registry and summary published together.
    RETRY_PENDING, DEFERRED, BLOCKED and ERROR fail the run with the dispatch's own line."""
    from hypograph.case.builder import HypothesisBuilder
    from hypograph.case.dispatch import Status
    from hypograph.case.gateway import CaseGateway

    store, case_id, manifest = _case(context, inputs)
    policy = case.settings().policy()
    gateway = CaseGateway.optional(policy, llm.config())  # none: a published batch is reused, else NeedsModel
    builder = HypothesisBuilder(store, gateway, policy)
    result = asyncio.run(builder.build(case_id, manifest["package_id"], case.settings().attempt))
    metadata = {
        "status": result.status.value,
        "line": result.line(),
        "attempt": result.attempt_id or "",
        "hypotheses": MetadataValue.json(result.hypothesis_ids),
        "reused": result.reused,
        "paths": MetadataValue.json(result.paths),
        "due_at": result.due_at or "",
    }
    if result.status is not Status.COMPLETED:
        raise failure(result.line(), "DispatchStatus", result.status.value, metadata, context)
    return MaterializeResult(metadata={**metadata, **_summary(result.paths)})


def _summary(paths: dict) -> dict:
    """The published hypotheses.md as the UI's preview of the batch (its first 64 KiB)."""
    from hypograph.atomic import read_regular

    path = paths.get("hypotheses_summary")
    if not path:
        return {}
    try:
        text = read_regular(path, 1 << 20).decode("utf-8", errors="replace")
    except (HypographError, OSError) as e:  # a preview never fails a published batch's step
        return {"summary": MetadataValue.text(f"not shown: {e}")}
    return {"summary": MetadataValue.md(text[: 1 << 16])}


@asset(**ASSET, deps=[hypothesis_batch], kinds={"markdown"}, output_required=False)
@step
def batch_vault_nodes(context: AssetExecutionContext, inputs: Inputs, case: CaseResource):
    """The accepted hypotheses minted into the case's target vault as step-3 H nodes (idempotent),
    so the batch flows on into that vault's proximity and structure. The vault is the run's
    ``case.vault``, else the one the case names (made from it, or given to ``batch --into``); with
    neither, the step is skipped with its reason logged."""
    from hypograph.case.bridge import mint_batch

    store, case_id, manifest = _case(context, inputs)
    vault = case.settings().vault or store.package(case_id).target_vault(manifest)
    if not vault:
        context.log.info(
            f"{case_id}: skipped: the case names no vault to mint into "
            "(make it from a vault, or give one with resources.case.config.vault)"
        )
        return
    report = mint_batch(store.root / case_id, vault)
    yield MaterializeResult(metadata={"line": report.line(), "vault": MetadataValue.path(str(vault))})
