"""``hypograph library …``: its arguments, and the command: each round as its Dagster
partition (``<library id>/rNNNN``) of the ``library_round`` job (``run_library``), so the UI
shows every round's lineage; ``--report`` and ``--check`` first run the ``library_observe`` job
(the file observed and checked, offline, nothing written), so the UI shows the library as it is.

    hypograph library DIR --topic "…" [--rounds R] [--n-behaviors N] [--behavior B3|"free text"]
                          [--behavior-source discover|given] [--no-web] [--mode M (ignored)]
                          [--new-library | --confirm-topic] [--banlist-budget TOKENS]
                          [--strategies FILE] [--embedder sbert|tfidf] [--search-url URL]
                          [--openalex-url URL] [--llm offline]
    hypograph library DIR --report      # the report of every round so far (offline)
    hypograph library DIR --check       # the key-rule checks; exit 1 on any violation (offline)

Errors are one line on stderr: exit 1 for a refused input, 2 for what is not done yet (a model
needed, another topic, a round whose dedup answers were rejected: its candidates are judged when
it runs again). Every guard is the round's run's, once (``round_candidates``: a model, the topic,
the library's checks), before anything is written; the command checks only its arguments.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hypograph.errors import HypographError
from hypograph_cli.settings import option

# The parser needs only argparse: `hypograph --help` and argument errors import no domain module;
# ``_dispatch`` imports what the command runs.


def add_library_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``library`` subcommand to ``subparsers``; its handler is ``args.func(args) -> exit code``."""
    c = subparsers.add_parser("library", help="generate, dedup, score and persist hypothesis-library rounds in DIR")
    c.add_argument("dir", type=Path, help="project directory holding hypothesis_library.json")
    option(c, "--topic", "library", "topic", help="the library's topic (required to run rounds)")
    option(c, "--rounds", "library-command", "rounds")
    option(c, "--n-behaviors", "library", "n_behaviors", help="new behaviors per round, discover only")
    option(c, "--behavior", "library", "behavior")
    option(
        c,
        "--behavior-source",
        "library",
        "behavior_source",
        help="the only mode selector; without it: given when --behavior is given",
    )
    c.add_argument("--mode", help=argparse.SUPPRESS)  # accepted and ignored, with a note (library rounds)
    option(
        c,
        "--no-web",
        "library",
        "web",
        dest="web",
        action="store_false",
        help="no literature search (arXiv, OpenAlex): method llm-chat",
    )
    option(
        c, "--search-url", "library", "search_url", help="arXiv Atom endpoint (default $HYPOGRAPH_ARXIV_URL or arXiv's)"
    )
    option(
        c,
        "--openalex-url",
        "library",
        "openalex_url",
        help="OpenAlex works endpoint (default $HYPOGRAPH_OPENALEX_URL or OpenAlex's)",
    )
    g = c.add_mutually_exclusive_group()
    option(g, "--new-library", "library", "new_library", action="store_true")
    option(g, "--confirm-topic", "library", "confirm_topic", action="store_true")
    option(c, "--banlist-budget", "library", "banlist_budget")
    option(
        c, "--strategies", "library", "strategies_file", help="JSON file of discovery lenses and combination strategies"
    )
    option(c, "--embedder", "library", "embedder")
    c.add_argument("--llm", choices=["offline"], help="force offline (only --report and --check can then run)")
    a = c.add_mutually_exclusive_group()
    a.add_argument("--report", action="store_true", help="print the report of every round so far (offline)")
    a.add_argument("--check", action="store_true", help="run the key-rule checks (offline); exit 1 on violations")
    c.set_defaults(func=library_command)
    return c


def observed(result) -> dict:
    """The plain metadata values of the ``library_file`` observation ``result`` (a run) recorded."""
    for event in result.all_events:
        if event.event_type_value == "ASSET_OBSERVATION":
            observation = event.event_specific_data.asset_observation
            if observation.asset_key.to_user_string() == "library_file":
                return {k: v.value for k, v in observation.metadata.items()}
    return {}


def library_command(args: argparse.Namespace) -> int:
    """Run the subcommand (``args.settings``: the validated ``LibrarySettings``, None for
    ``--report`` and ``--check``); its record is ``args.draft.result`` (``records.Library``)."""
    from hypograph.library.checks import run_checks
    from hypograph.library.report import build_report
    from hypograph.library.schema import library_path
    from hypograph.library.state import round_keys
    from hypograph_cli.records import Check, Library, Violation

    root = Path(args.dir).resolve()
    results = None
    if (args.check or args.report) and library_path(args.dir).is_file():
        from pipelines.launch import run_job

        result = run_job(root, "library_observe")  # what the UI then shows: the file, checked
        args.draft.ran("library_observe", result)
        results = dict(observed(result)["key_rules"])  # the checks as that run found them
    if args.check:
        results = results if results is not None else run_checks(args.dir)  # no file: no run to read
        bad = sum(len(v) for v in results.values())
        args.draft.result = Library(
            path=str(root),
            checks=[
                Check(name=name, passed=not v, violations=[Violation(id=i, reason=r) for i, r in v])
                for name, v in results.items()
            ],
        )
        for name, violations in results.items():
            print(f"{'FAIL' if violations else 'ok  '} {name}" + "".join(f"\n     {i}: {r}" for i, r in violations))
        return 1 if bad else 0
    if args.report:
        if not library_path(args.dir).exists() and not round_keys(args.dir):
            raise HypographError(f"{library_path(args.dir)}: no library here yet")
        report = build_report(args.dir, round_keys(args.dir))
    else:
        from hypograph.environment import llm_config

        llm = llm_config(offline=args.llm == "offline")
        report, runs = run_library(args.dir, args.settings, args.rounds, bool(args.new_library), llm, args.notes)
        for result in runs:
            args.draft.ran("library_round", result)
    args.draft.result = Library(path=str(root), report=json.loads(json.dumps(report.metadata(), default=str)))
    print(report.text())
    return 0


def run_library(root: Path, settings, rounds: int = 1, new_library: bool = False, llm=None, notes=()):
    """Up to ``rounds`` rounds of the ``library_round`` job (a crash's pending rounds first; with
    ``new_library``, a new library's first round), stopping after one that adds nothing (the topic
    is saturated): the library report and the rounds' runs. Every guard (a model, the topic, the
    library's own checks) is the job's, run once in the round's run, before anything is written.
    ``settings``: ``LibrarySettings`` with a topic; ``llm``: the ``LLMConfig`` (default: the
    environment's; the run sets only its ``offline``); ``notes``: the command's own."""
    import uuid

    from hypograph.environment import llm_config
    from hypograph.ids import numbered_key
    from hypograph.library.report import RunSummary, build_report
    from hypograph.library.run import next_round, pending_rounds
    from hypograph_cli.summaries import asset_metadata
    from pipelines.launch import run_job

    root = Path(root).resolve()
    if not settings.topic or not settings.topic.strip():
        raise HypographError('a topic is required: --topic "…"')
    offline = True if (llm or llm_config()).offline else None
    invocation = settings.invocation or uuid.uuid4().hex  # one trace folder and batch index for all rounds
    settings = settings.model_copy(update={"invocation": invocation})
    # a new library starts at its first round, moved aside in that round's run (after its guards)
    pending = [numbered_key(1)] if new_library else pending_rounds(root)
    done, early_stop, results = [], None, []
    for n in range(rounds):
        key = pending.pop(0) if pending else next_round(root)
        first = settings.model_copy(update={"new_library": new_library and n == 0})
        results.append(run_job(root, "library_round", {"library": first}, offline, sub=key))
        done.append(key)
        moved = asset_metadata(results[-1], "round_candidates").get("moved_aside")
        notes = [*notes, f"previous library moved aside to {moved}"] if moved else notes
        if asset_metadata(results[-1], "round_dedup").get("survivors") == 0:
            early_stop = key
            break
    summary = RunSummary(rounds, settings.behavior_source, early_stop, list(notes), settings.topic)
    return build_report(root, done, summary), results
