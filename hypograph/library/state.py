"""Tool state of a library directory ``L``: everything under ``L/.hypograph/library/``.

=====================================  ==========================================================
path                                   content
=====================================  ==========================================================
``rounds/rNNNN/candidates.json``       the round's generated candidates (written once, never redone)
``rounds/rNNNN/dedup.json``            the two dedup layers' verdicts for those candidates
``rounds/rNNNN/scores.json``           impact + novelty per surviving behavior (re-scorable)
``rounds/rNNNN/persist.json``          ids planned for the round's survivors, then ``complete``
``ids.json``                           high-water marks and every id ever minted (never reused)
``embeddings/<model>.npz``             sentence rows by text sha256 (dedup, banlist; a cache)
``invocations.json``                   invocation id -> its trace run folder (one per invocation)
``library.lock``                       one writer of the library at a time
=====================================  ==========================================================

Round keys are ``r0001``, ``r0002``, … (the Dagster partition keys); traces go to
``L/.hypograph/traces/hypothesis-batch/<date>_run<NN>/r<NN>/``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from hypograph.atomic import STATE_MAX, read_regular, remove_stale_temps, write_json
from hypograph.errors import HypographError
from hypograph.ids import NUMBERED_KEY_RE, key_number
from hypograph.locks import file_lock
from hypograph.paths import OURS

TRACE_TASK = "hypothesis-batch"
M = TypeVar("M", bound=BaseModel)


def state_dir(root: Path) -> Path:
    """``L/.hypograph``: the state directory the LLM client caches and traces under."""
    return Path(root) / OURS


def library_state(root: Path) -> Path:
    return state_dir(root) / "library"


def round_dir(root: Path, key: str) -> Path:
    key_number(key)
    return library_state(root) / "rounds" / key


def round_keys(root: Path) -> list[str]:
    """Round keys with any state, in round order."""
    d = library_state(root) / "rounds"
    if not d.is_dir():
        return []
    return sorted((p.name for p in d.iterdir() if p.is_dir() and NUMBERED_KEY_RE.match(p.name)), key=key_number)


def trace_round_dir(run_dir: Path, key: str) -> Path:
    """``<run_dir>/r<NN>`` (the seed's two-digit round folder; wider past 99)."""
    return Path(run_dir) / f"r{key_number(key):02d}"


def digest(value) -> str:
    """Short content hash of a JSON-able value (what a cached step was computed from)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()[:16]


def read_model(path: Path, model: type[M]) -> M | None:
    """The model stored at ``path`` (None if absent); a corrupt state file is an error naming it."""
    try:  # bounded: a FIFO or a device here is one line, never waited on
        return model.model_validate_json(read_regular(path, STATE_MAX, follow=True))
    except FileNotFoundError:
        return None
    except (ValidationError, UnicodeDecodeError, RecursionError) as e:
        why = " ".join(str(e).split())[:300] if isinstance(e, ValidationError) else (str(e).splitlines() or [""])[0]
        raise HypographError(
            f"{path}: tool state is not valid ({why}); delete the file to recompute that step"
        ) from None


def write_model(path: Path, value: BaseModel) -> bool:
    return write_json(path, value.model_dump(mode="json"))


# What only the library lock's holder writes (generation, persistence): it removes their stale temp files
LIBRARY_WRITES = (
    "hypothesis_library.json",
    "MANIFEST.md",
    f"{OURS}/library/ids.json",
    f"{OURS}/library/rounds/*/candidates.json",
    f"{OURS}/library/rounds/*/persist.json",
)


@contextmanager
def library_lock(root: Path) -> Iterator[None]:
    """Exclusive lock of the library directory (generation and persistence run one at a time);
    once held, the temp files killed writes left beside ``LIBRARY_WRITES`` are removed."""
    with file_lock(library_state(root) / "library.lock"):
        remove_stale_temps(Path(root), LIBRARY_WRITES)
        yield
