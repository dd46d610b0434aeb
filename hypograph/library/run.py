"""The steps around a library's rounds, as values in and values out: which round runs next, the
settings it runs with.

The rounds themselves run as the ``library_round`` job's partitions (``assets/library``), launched
one after another by ``hypograph_cli/library.py:run_library`` (a command) or one a day by the
``next_library_round`` sensor; nothing here calls back into them.

Every guard of a round runs once, in the job, whichever door it came in by (``round_candidates``
and ``generate_round``): the cross-topic guard, a model configured (then ``new_library`` moves the
old file aside), the library passing its own checks, an unknown given id, all before any model
call and before anything is written. A round left half-done by a crash is completed first from its cached
steps (no new model call, no id minted twice). A round whose candidates all turn out duplicates
adds nothing: the command stops there and the report says the topic is saturated. A round with a
candidate the model's answers left unjudged is not done (``dedup.Unjudged``, exit 2), never
saturated: it stays pending, and the next run judges it.
"""

from __future__ import annotations

from pathlib import Path

from hypograph.errors import HypographError
from hypograph.ids import key_number, numbered_key
from hypograph.library.persist import round_persisted
from hypograph.library.rounds import RoundCandidates, RoundSettings
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
