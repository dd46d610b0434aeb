"""``run_library``: R rounds in order through the same per-round functions a Dagster layer wraps.

Phase 0 first, and nothing is written until it passes: the mode is resolved (seed's table), the
library file is read and validated and must pass its own checks (``checks.require_sound``), the
given behavior is resolved (an unknown id is an error), a model must be configured, and the
cross-topic guard judges the topic by meaning (the model decides what embeddings do not settle).
``--new-library`` then moves the old file aside. A round left half-done by a crash is completed
first from its cached steps (no new model call, no id minted twice), then new rounds
``r<last+1>``… run: generate -> dedup -> score -> persist. A round whose candidates all turn out
duplicates (a model repeating earlier behaviors) adds nothing: the loop stops there and the
report says the topic is saturated — a normal end, not an error.

One invocation, one trace folder and one batch run index: ``run_library`` mints an invocation id
(``RoundSettings.invocation``, never stored with a round) and every round's steps trace under it,
whether they run here or as Dagster steps executed in process (``traces.current_invocation``) or
elsewhere, given the id (``TraceRun(L, invocation)``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hypograph.errors import HypographError
from hypograph.library.checks import require_sound
from hypograph.library.dedup import dedup_round
from hypograph.library.generate import ModelRequired, generate_round
from hypograph.library.guard import check_topic, move_aside
from hypograph.library.modes import Resolution, resolve_mode, resolve_target
from hypograph.library.persist import load_round, persist_round, round_persisted
from hypograph.library.report import Report, RunSummary, build_report
from hypograph.library.rounds import DEFAULT_N_BEHAVIORS, RoundCandidates, RoundDedup, RoundSettings
from hypograph.library.schema import read_library
from hypograph.library.score import score_round
from hypograph.library.search import web_search
from hypograph.library.state import TRACE_TASK, read_model, round_dir, round_key, round_keys, round_number, state_dir
from hypograph.library.traces import TraceRun, current_invocation
from hypograph.llm.client import LLMClient
from hypograph.llm.config import LLMConfig

RoundRunner = Callable[[str, RoundSettings], int]


def pending_rounds(root: Path) -> list[str]:
    """Rounds with state that have not persisted (left by a crash or an interrupted run)."""
    return [k for k in round_keys(root) if not round_persisted(root, k)]


def next_round(root: Path) -> str:
    keys = round_keys(root)
    return round_key(round_number(keys[-1]) + 1 if keys else 1)


def run_round(root: Path, key: str, settings: RoundSettings, client: LLMClient, search, traces: TraceRun) -> int:
    """Generate, dedup, score and persist round ``key``; returns the dedup survivors' count."""
    candidates = generate_round(root, key, settings, client, traces)
    dedup = dedup_round(root, key, candidates, client, traces=traces)
    scores = score_round(root, key, client, search, traces=traces)
    persist_round(root, key, dedup, scores)
    return len(dedup.survivors)


def settings_for_round(root: Path, key: str, given: RoundSettings | None) -> RoundSettings:
    """The settings round ``key`` runs with: its own if it already generated (a round never
    regenerates), else ``given``, else the latest earlier round's (a scheduled next round)."""
    cached = read_model(round_dir(root, key) / "candidates.json", RoundCandidates)
    if cached is not None:
        return cached.settings
    if given is not None:
        return given
    for earlier in reversed([k for k in round_keys(root) if round_number(k) < round_number(key)]):
        previous = read_model(round_dir(root, earlier) / "candidates.json", RoundCandidates)
        if previous is not None:
            return previous.settings
    raise HypographError(f"round {key}: no settings (give a topic: the library has no earlier round to follow)")


def round_survivors(root: Path, key: str) -> int:
    """How many candidates of round ``key`` survived dedup (0: the round added nothing)."""
    return len(load_round(root, key, "dedup", RoundDedup).survivors)


@dataclass(frozen=True)
class LibraryRun:
    """What one invocation is asked to do (``hypograph library``'s flags): ``rounds`` rounds on
    ``topic``; ``behavior`` / ``behavior_source`` / ``mode`` select the mode (``modes.resolve_mode``);
    ``new_library`` moves the old file aside, ``confirm_topic`` overrides the cross-topic guard;
    ``search_url`` / ``openalex_url``: the arXiv and OpenAlex endpoints (default: environment, else
    the public APIs); ``llm_config`` default: the environment's."""

    topic: str
    rounds: int = 1
    n_behaviors: int = DEFAULT_N_BEHAVIORS
    behavior: str | None = None
    behavior_source: str | None = None
    web: bool = True
    llm_config: LLMConfig | None = None
    mode: str | None = None
    new_library: bool = False
    confirm_topic: bool = False
    banlist_budget: int | None = None
    strategies_file: str | None = None
    embedder: str = "sbert"
    search_url: str | None = None
    openalex_url: str | None = None


def run_library(root: Path, run: LibraryRun, round_runner: RoundRunner | None = None) -> Report:
    """Run ``run.rounds`` library rounds on directory ``root``; the library report.

    ``round_runner(key, settings) -> survivors`` runs one round (the CLI passes one that runs the
    round's Dagster partition: its steps, in this process or its children, trace under this
    invocation without being told — see ``traces.current_invocation``; a runner in another process
    passes ``settings.invocation`` to ``TraceRun``); by default the rounds run here, in this process."""
    root = Path(root)
    if not run.topic or not run.topic.strip():
        raise HypographError('a topic is required: --topic "…"')
    resolution = resolve_mode(run.behavior_source, run.behavior, run.mode)
    client, pending = _phase0(root, run, resolution)
    invocation = uuid.uuid4().hex
    traces = TraceRun(root, invocation)
    if not run.new_library:
        check_topic(root, run.topic, confirm=run.confirm_topic, client=client, traces=traces)
    notes = list(resolution.notes)
    if run.new_library:
        moved = move_aside(root)
        if moved:
            notes.append(f"previous library moved aside to {moved.name}")
    settings = _round_settings(run, resolution, invocation)
    if round_runner is None:
        search = web_search(run.search_url, run.openalex_url) if run.web else None

        def round_runner(key: str, settings: RoundSettings) -> int:
            return run_round(root, key, settings, client, search, traces)

    with current_invocation(invocation):  # steps of this process (or its children) trace under it
        done, early_stop = _run_rounds(root, run.rounds, pending, settings, round_runner)
    summary = RunSummary(run.rounds, resolution.source, early_stop, notes, run.topic)
    return build_report(root, done, summary)


def _phase0(root: Path, run: LibraryRun, resolution: Resolution) -> tuple[LLMClient, list[str]]:
    """Phase 0's refusals, before anything is written: an invalid library file, no model, a library
    failing its own checks, an unknown given id. The client, and the rounds a crash left pending."""
    loaded = read_library(root)  # an invalid file stops here, before anything is written
    client = LLMClient(run.llm_config or LLMConfig.from_env(), state_dir(root), TRACE_TASK)
    if client.offline and run.rounds > 0:
        raise ModelRequired(
            "library rounds need a model: set HYPOGRAPH_LLM_MODEL (and HYPOGRAPH_LLM_BASE_URL); "
            "nothing was changed (validate, report and check work offline)"
        )
    if not run.new_library:
        require_sound(root)  # a library failing its own checks is refused before a round starts
    library = None if run.new_library else (loaded[0] if loaded else None)
    if resolution.source == "given":
        resolve_target(library, resolution.behavior)  # an unknown id is an error now, not after a model call
    return client, [] if run.new_library else pending_rounds(root)


def _round_settings(run: LibraryRun, resolution: Resolution, invocation: str) -> RoundSettings:
    """The settings each new round of this invocation runs with."""
    extra = {"banlist_budget": run.banlist_budget} if run.banlist_budget else {}
    return RoundSettings(
        topic=run.topic.strip(),
        behavior_source=resolution.source,
        behavior=resolution.behavior,
        n_behaviors=run.n_behaviors,
        web=run.web,
        strategies_file=run.strategies_file,
        embedder=run.embedder,
        invocation=invocation,
        **extra,
    )


def _run_rounds(
    root: Path, rounds: int, pending: list[str], settings: RoundSettings, round_runner: RoundRunner
) -> tuple[list[str], str | None]:
    """Up to ``rounds`` rounds, pending ones first; the rounds run, and the one that added nothing
    (the topic is saturated: the loop stops there), if any."""
    done: list[str] = []
    pending = list(pending)
    for _ in range(rounds):
        key = pending.pop(0) if pending else next_round(root)
        survivors = round_runner(key, settings)
        done.append(key)
        if survivors == 0:
            return done, key
    return done, None
