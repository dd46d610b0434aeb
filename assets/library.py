"""Library round assets (seed 001): per round (a partition ``input|rNNNN``) generation, two-layer
dedup, scoring and persistence, then the whole ``hypothesis_library.json`` per input.

Generation runs in the ``library_generation`` pool (limit 1): rounds build on each other, so they
generate one at a time, and a round asked for before its predecessors persisted refuses in one line.
Re-scoring is its own asset: a backfill of ``round_scores`` (and ``round_persisted``) over all
rounds re-scores them with another model or with web grounding, regenerating nothing, keeping ids.
"""

from dagster import AssetExecutionContext, AutomationCondition, MaterializeResult, MetadataValue, Output, asset

from assets.groups import LIBRARY
from assets.partitions import input_partition, inputs, library_rounds
from hypograph.library.dedup import dedup_round
from hypograph.library.generate import generate_round
from hypograph.library.persist import assemble_library, persist_round
from hypograph.library.report import build_report, round_ledger
from hypograph.library.rounds import PersistPlan, RoundCandidates, RoundDedup, RoundScores
from hypograph.library.run import settings_for_round
from hypograph.library.score import score_round
from hypograph.library.search import ArxivSearch
from hypograph.library.state import TRACE_TASK, round_keys
from resources import Inputs, LLMResource
from resources.library import LibrarySettings

ROUND = dict(group_name=LIBRARY, partitions_def=library_rounds, io_manager_key="io_manager", kinds={"openai"})


def _round(context: AssetExecutionContext, inputs: Inputs):
    """(input folder, round key) of this run's partition."""
    where = input_partition(context.partition_key)
    return inputs.root(where.input), where.sub


@asset(**ROUND, pool="library_generation")
def round_candidates(context: AssetExecutionContext, inputs: Inputs, llm: LLMResource,
                     library: LibrarySettings) -> Output[RoundCandidates]:
    """One generation call: behaviors and mechanisms for the round, the banlist built from the library
    as the earlier rounds left it (cached: a round never regenerates)."""
    root, key = _round(context, inputs)
    client = llm.client(inputs.state_dir(root), TRACE_TASK)
    candidates = generate_round(root, key, settings_for_round(root, key, library.round_settings()), client)
    return Output(candidates, metadata={
        "behaviors": len(candidates.behaviors), "mechanisms": sum(len(b.mechanisms) for b in candidates.behaviors),
        "banlist": MetadataValue.json(candidates.banlist.model_dump()), **client.metadata(),
    })


@asset(**ROUND)
def round_dedup(context: AssetExecutionContext, round_candidates: RoundCandidates, inputs: Inputs,
                llm: LLMResource) -> Output[RoundDedup]:
    """Embedding prefilter against the library, then the model's new / duplicate-of judgement."""
    root, key = _round(context, inputs)
    client = llm.client(inputs.state_dir(root), TRACE_TASK)
    dedup = dedup_round(root, key, round_candidates, client)
    return Output(dedup, metadata={
        "survivors": len(dedup.survivors),
        **{f"removed_{layer}_{by}": dedup.removed(layer, by) for layer in ("behavior", "mechanism")
           for by in ("prefilter", "model")},
        **client.metadata(),
    })


@asset(**ROUND)
def round_scores(context: AssetExecutionContext, round_dedup: RoundDedup, inputs: Inputs, llm: LLMResource,
                 library: LibrarySettings) -> Output[RoundScores]:
    """Impact per surviving behavior, novelty per mechanism, stamped with method and date."""
    root, key = _round(context, inputs)
    client = llm.client(inputs.state_dir(root), TRACE_TASK)
    web = library.web
    scores = score_round(root, key, round_dedup, client, ArxivSearch(library.search_url) if web else None, web=web)
    for warning in scores.warnings:
        context.log.warning(warning)
    return Output(scores, metadata={"behaviors": len(scores.behaviors), "model": scores.model, "web": web,
                                    "warnings": MetadataValue.json(scores.warnings), **client.metadata()})


@asset(**ROUND)
def round_persisted(context: AssetExecutionContext, round_dedup: RoundDedup, round_scores: RoundScores,
                    inputs: Inputs) -> Output[PersistPlan]:
    """The round merged into hypothesis_library.json (ids minted max+1, never reused; atomic write)."""
    root, key = _round(context, inputs)
    plan = persist_round(root, key, round_dedup, round_scores)
    ledger = round_ledger(root, key)
    return Output(plan, metadata={"added_behaviors": plan.added_behaviors, "ids": MetadataValue.json(plan.ids),
                                  "unique_yield": ledger.unique_yield, "removed": MetadataValue.json(ledger.removed)})


@asset(group_name=LIBRARY, partitions_def=inputs, deps=[round_persisted], kinds={"json"},
       automation_condition=AutomationCondition.eager())
def hypothesis_library(context: AssetExecutionContext, inputs: Inputs) -> MaterializeResult:
    """hypothesis_library.json as the rounds left it, validated, with the Phase-7 report."""
    root = inputs.root(context.partition_key)
    assemble_library(root)
    report = build_report(root, round_keys(root))
    return MaterializeResult(metadata={
        "path": MetadataValue.path(str(root / "hypothesis_library.json")),
        "report": MetadataValue.md(f"```\n{report.text()}\n```"),
        "behaviors": report.totals["behaviors"], "mechanisms": report.totals["mechanisms"],
        "report_json": MetadataValue.json(report.metadata()),
    })
