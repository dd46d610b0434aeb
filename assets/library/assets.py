"""Library round assets, one partition per round of one library (``<library id>/r0001``):
generation -> dedup against the library -> scores -> the round merged into
``hypothesis_library.json``.

Each step writes its round file (``.hypograph/library/rounds/<round>/<step>.json``) through the
library's own functions, under its lock — those files are the round's durable state, a crash
resumes from them — and returns ``MaterializeResult``; the next step reads what its declared
upstream wrote. Generation runs in the ``library_generation`` pool (limit 1): rounds build on each
other. Re-scoring is a backfill of ``library_rescore`` (``round_scores`` + ``hypothesis_library``)
over any rounds: another model or web grounding, nothing regenerated, ids kept. A round that cannot
run yet (no topic given and no earlier round to follow; re-scoring one never generated) ends its
step with no output, saying why (``assets.errors.Skip``): no red cell, nothing downstream runs.
"""

from typing import TYPE_CHECKING

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from assets.errors import Skip, step
from assets.groups import LIBRARY
from assets.library.resource import LibraryResource
from assets.partitions import library_rounds
from hypograph.ids import key_number
from hypograph.library.state import TRACE_TASK, round_keys
from resources import Inputs, LLMResource

if TYPE_CHECKING:
    from hypograph.library.settings import LibrarySettings
    from hypograph.library.traces import TraceRun

# The library's domain modules (generation, dedup, scoring: ~0.25 s of imports) are imported inside
# the assets that use them: every run of any job loads these definitions, a proximity run too.

ASSET = {"group_name": LIBRARY, "partitions_def": library_rounds}  # what every library asset takes
ROUND = {**ASSET, "kinds": {"openai"}}


def _traces(context: AssetExecutionContext, root, settings: "LibrarySettings") -> "TraceRun":
    """One trace folder per invocation: the command's (it sets one for all its rounds), else this run's."""
    from hypograph.library.traces import TraceRun

    return TraceRun(root, settings.invocation or f"run-{context.run_id[:8]}")


@asset(**ROUND, pool="library_generation", output_required=False)
@step
def round_candidates(
    context: AssetExecutionContext, inputs: Inputs, llm: LLMResource, library: LibraryResource
) -> MaterializeResult:
    """One generation call: behaviors and mechanisms for the round, the banlist built from the library
    as the earlier rounds left it (cached: a round never regenerates). A new round given a topic
    passes the cross-topic guard first, whichever door it came in by (command, Launchpad, sensor):
    this is its one place, run once per round, unless ``new_library`` moves the old file aside to
    start a new library.
    A round given no topic, with no round before it to take its settings from, is skipped."""
    from hypograph.library.generate import generate_round
    from hypograph.library.guard import check_topic, move_aside
    from hypograph.library.run import has_generated, settings_for_round

    root, key = inputs.sub_root(context.partition_key)
    settings = library.settings()
    given = settings.round_settings()
    if given is None and not any(
        has_generated(root, k) for k in {*round_keys(root), key} if key_number(k) <= key_number(key)
    ):
        raise Skip(
            f"{root}: round {key}: no topic given and no earlier round to follow (`hypograph library DIR --topic …`)"
        )
    client = llm.client(inputs.state_dir(root), TRACE_TASK)
    traces = _traces(context, root, settings)

    moved = []  # the old library's new name, for the run's record (the command's report says it)

    def move() -> None:  # a person's decision: the old file renamed aside, never deleted
        moved.append(move_aside(root))
        context.log.info(f"previous library moved aside to {moved[0].name}" if moved[0] else "no library to move")

    if given is None:  # a round following the previous one's settings: nothing to judge
        candidates = generate_round(root, key, settings_for_round(root, key, None), client, traces)
    elif settings.new_library:
        candidates = generate_round(root, key, given, client, traces, start=move)
    else:  # the topic judged once, before generation (a round already generated keeps its own settings)
        if not has_generated(root, key):
            check_topic(root, given.topic, confirm=settings.confirm_topic, client=client, traces=traces)
        candidates = generate_round(root, key, settings_for_round(root, key, given), client, traces)
    yield MaterializeResult(
        metadata={
            "behaviors": len(candidates.behaviors),
            "mechanisms": sum(len(b.mechanisms) for b in candidates.behaviors),
            "banlist": MetadataValue.json(candidates.banlist.model_dump()),
            **({"moved_aside": moved[0].name} if moved and moved[0] else {}),
            **client.metadata(),
        }
    )


@asset(**ROUND, deps=[round_candidates], output_required=False)
@step
def round_dedup(
    context: AssetExecutionContext, inputs: Inputs, llm: LLMResource, library: LibraryResource
) -> MaterializeResult:
    """The model's new / duplicate-of judgement of each candidate, by meaning, against its nearest
    library nodes (sentence embeddings pick the neighbours; only exact repeats are dropped unasked).
    A candidate whose answer was rejected leaves the step not done (its Failure says how many and
    why, status NOT_DONE): nothing downstream runs and a re-run of the round judges it."""
    from hypograph.library.dedup import dedup_round

    root, key = inputs.sub_root(context.partition_key)
    client = llm.client(inputs.state_dir(root), TRACE_TASK)
    dedup = dedup_round(root, key, None, client, traces=_traces(context, root, library.settings()))
    return MaterializeResult(
        metadata={
            "survivors": len(dedup.survivors),
            "embedder": dedup.embedder,
            "prompt": dedup.prompt,
            **{
                f"removed_{layer}_{by}": dedup.removed(layer, by)
                for layer in ("behavior", "mechanism")
                for by in ("exact", "model", "rejected")
            },
            **client.metadata(),
        }
    )


@asset(**ROUND, deps=[round_candidates, round_dedup], output_required=False)
@step
def round_scores(
    context: AssetExecutionContext, inputs: Inputs, llm: LLMResource, library: LibraryResource
) -> MaterializeResult:
    """Impact per surviving behavior, novelty per mechanism, stamped with method and date; a round
    never generated (a re-score backfill over every round) is skipped."""
    from hypograph.library.run import has_generated
    from hypograph.library.score import score_round
    from hypograph.library.search import web_search

    root, key = inputs.sub_root(context.partition_key)
    if not has_generated(root, key):
        raise Skip(f"{root}: round {key} has not generated yet: nothing to score")
    client = llm.client(inputs.state_dir(root), TRACE_TASK)
    settings = library.settings()
    web = settings.web
    # an endpoint that timed out or refused is asked no more in this invocation (the command's rounds)
    invocation = settings.invocation or context.run_id
    search = web_search(settings.search_url, settings.openalex_url, invocation=invocation) if web else None
    scores = score_round(root, key, client, search, web=web, traces=_traces(context, root, settings))
    for warning in scores.warnings:
        context.log.warning(warning)
    yield MaterializeResult(
        metadata={
            "behaviors": len(scores.behaviors),
            "model": scores.model,
            "web": web,
            "papers_shown": sum(len(b.papers) for b in scores.behaviors),
            "warnings": MetadataValue.json(scores.warnings),
            **client.metadata(),
        }
    )


@asset(**ASSET, deps=[round_dedup, round_scores], kinds={"json"}, output_required=False)
@step
def hypothesis_library(context: AssetExecutionContext, inputs: Inputs) -> MaterializeResult:
    """The round merged into hypothesis_library.json (ids minted max+1, never reused; atomic write),
    validated, with the report of the library's rounds up to this one."""
    from hypograph.library.persist import persist_round
    from hypograph.library.report import build_report, round_ledger

    root, key = inputs.sub_root(context.partition_key)
    plan = persist_round(root, key)
    ledger = round_ledger(root, key)
    report = build_report(root, [k for k in round_keys(root) if key_number(k) <= key_number(key)])
    return MaterializeResult(
        metadata={
            "added_behaviors": plan.added_behaviors,
            "ids": MetadataValue.json(plan.ids),
            "unique_yield": ledger.unique_yield,
            "removed": MetadataValue.json(ledger.removed),
            "path": MetadataValue.path(str(root / "hypothesis_library.json")),
            "report": MetadataValue.md(f"```\n{report.text()}\n```"),
            "behaviors": report.totals["behaviors"],
            "mechanisms": report.totals["mechanisms"],
        }
    )
