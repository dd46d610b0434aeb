"""One bad input never stops a scan of many: a sensor or command that goes over every registered
input (or every folder of a workspace) skips the one it cannot read, with one logged line naming it
and why, and goes on with the rest.

``BAD_INPUT`` is what a bad input raises (a one-line HypographError, an unreadable or vanished
file, bytes that are not UTF-8, a value of the wrong type or shape); anything else is a bug and is
raised. ``registered(registry, kinds, log)`` is the registry's records of those kinds, each
malformed entry and each input whose folder is gone logged once and passed over.

Bottom layer: imports only ``errors`` (no Dagster: ``log`` is any callable taking a line).
"""

from __future__ import annotations

from collections.abc import Callable

from hypograph.errors import HypographError

BAD_INPUT = (HypographError, OSError, UnicodeError, ValueError, TypeError, KeyError, IndexError, RecursionError)
LINE_MAX = 500  # characters of the reason a skip line keeps
GONE = "the folder is gone (moved? `hypograph add` its new path)"


def skip_line(label: object, error: BaseException) -> str:
    """``<label>: skipped: <why>`` on one line (the error's newlines folded, at most LINE_MAX)."""
    why = " ".join(str(error).split()) or type(error).__name__
    if len(why) > LINE_MAX:
        why = why[: LINE_MAX - 1] + "…"
    return f"{' '.join(str(label).split())}: skipped: {why}"


def registered(registry, kinds: tuple[str, ...], log: Callable[[str], object]) -> list:
    """``registry.of_kind(*kinds)`` whose folders exist: each entry the registry ignored as
    malformed, and each input whose folder is gone (deleted, or moved without ``hypograph add``),
    logged in one line and passed over."""
    for line in getattr(registry, "ignored", []):
        log(line)
    records = []
    for r in registry.of_kind(*kinds):
        try:
            present = r.path.is_dir()
        except OSError as e:  # a folder on the way that may not be listed
            log(skip_line(f"{r.id}: {r.path}", e))
            continue
        if present:
            records.append(r)
        else:
            log(skip_line(f"{r.id}: {r.path}", HypographError(GONE)))
    return records
