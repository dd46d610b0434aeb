"""The steps around a library's rounds, as values in and values out: which round runs next, the
settings it runs with, Phase 0 before any round of a command, and the report after.

The rounds themselves run as the ``library_round`` job's partitions (``assets/library``), launched
one after another by ``hypograph_cli/library.py:run_library`` (a command) or one a day by the
``next_library_round`` sensor; nothing here calls back into them.

Phase 0 writes nothing until it passes: the mode is resolved (seed's table), the library file is
read and validated, the given behavior is resolved (an unknown id is an error), the cross-topic
guard judges the topic by meaning (the model decides what embeddings do not settle), and a model
must be configured: each a refusal before Dagster loads (issue 46: a simple refusal is fast).
``--new-library`` then moves the old file aside. That the library passes its own checks
(``checks.require_sound``) is the round's own guard, in the job, before any model call. A round
left half-done by a crash is completed first from its cached steps (no new model call, no id minted
twice). A round whose candidates all turn out duplicates adds nothing: the command stops there and
the report says the topic is saturated. A round with a candidate the model's answers left unjudged
is not done (``dedup.Unjudged``, exit 2), never saturated: it stays pending, and the next run
judges it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hypograph.errors import HypographError, ModelRequired
from hypograph.ids import key_number, numbered_key
from hypograph.library.guard import check_topic, move_aside
from hypograph.library.modes import resolve_target
from hypograph.library.persist import load_round, round_persisted
from hypograph.library.rounds import RoundCandidates, RoundDedup, RoundSettings
from hypograph.library.schema import read_library
from hypograph.library.settings import LibrarySettings
from hypograph.library.state import read_model, round_dir, round_keys


def pending_rounds(root: Path) -> list[str]:
    """Rounds with state that have not persisted (left by a crash or an interrupted run)."""
    return [k for k in round_keys(root) if not round_persisted(root, k)]


def next_round(root: Path) -> str:
    keys = round_keys(root)
    return numbered_key(key_number(keys[-1]) + 1 if keys else 1)


def round_to_run(root: Path) -> str:
    """The round a library runs next: its interrupted one, else a new one."""
    pending = pending_rounds(root)
    return pending[0] if pending else next_round(root)


def has_generated(root: Path, key: str) -> bool:
    """Round ``key`` generated already (it keeps its own settings and is never regenerated)."""
    return read_model(round_dir(root, key) / "candidates.json", RoundCandidates) is not None


def settings_for_round(root: Path, key: str, given: RoundSettings | None) -> RoundSettings:
    """The settings round ``key`` runs with: its own if it already generated (a round never
    regenerates), else ``given``, else the latest earlier round's (a scheduled next round)."""
    cached = read_model(round_dir(root, key) / "candidates.json", RoundCandidates)
    if cached is not None:
        return cached.settings
    if given is not None:
        return given
    for earlier in reversed([k for k in round_keys(root) if key_number(k) < key_number(key)]):
        previous = read_model(round_dir(root, earlier) / "candidates.json", RoundCandidates)
        if previous is not None:
            return previous.settings
    raise HypographError(f"round {key}: no settings (give a topic: the library has no earlier round to follow)")


def round_survivors(root: Path, key: str) -> int:
    """How many candidates of round ``key`` survived dedup (0: the round added nothing)."""
    return len(load_round(root, key, "dedup", RoundDedup).survivors)


@dataclass
class Phase0:
    """What Phase 0 leaves a command: the rounds a crash left pending, and notes for the report."""

    pending: list[str]
    notes: list[str] = field(default_factory=list)


def phase0(root: Path, settings: LibrarySettings, rounds: int, new_library: bool, client, traces) -> Phase0:
    """Phase 0's refusals, before anything is written: an invalid library file, an unknown given
    id, another topic (the cross-topic guard, asked with ``client``, traced under ``traces``;
    offline the embeddings decide, so it answers before "needs a model"), no model (``client``
    offline). Then ``new_library`` moves the old file aside."""
    loaded = read_library(root)  # an invalid file stops here, before anything is written
    if settings.behavior_source == "given":  # an unknown id is an error now, not after a model call
        resolve_target(None if new_library else (loaded[0] if loaded else None), settings.behavior)
    if not new_library:
        check_topic(root, settings.topic, confirm=settings.confirm_topic, client=client, traces=traces)
    if client.offline and rounds > 0:
        raise ModelRequired(
            "library rounds need a model: set HYPOGRAPH_LLM_MODEL (and HYPOGRAPH_LLM_BASE_URL); "
            "nothing was changed (validate, report and check work offline)"
        )
    if new_library:
        moved = move_aside(root)
        return Phase0([], [f"previous library moved aside to {moved.name}"] if moved else [])
    return Phase0(pending_rounds(root))
