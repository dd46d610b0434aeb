"""The builder's refusals: a revision that declares a batch without a registry, a config that
differs from the pinned policy, and attempt ids (a rejected attempt is never reused; a correction
is an explicit new id). Each raises one HypographError naming the file."""

from __future__ import annotations

import re
from pathlib import Path

from hypograph.case.batch import paths
from hypograph.case.config import HypothesisPolicy
from hypograph.case.dispatch import DispatchState
from hypograph.case.package import CasePackage, rev_dir
from hypograph.errors import HypographError

ATTEMPT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
POLICY_KEYS = ("min_hypotheses", "max_hypotheses", "initial_budget")


def refuse_undeclared(pkg: CasePackage, m: dict, rev: int) -> None:
    """Hypotheses or a completion without a registry are never silently replaced."""
    p = paths(rev)
    state = DispatchState.load(pkg, rev)
    if (
        (pkg.root / p["hypotheses"]).exists()
        or (state and state.status == "COMPLETED")
        or any(n in m["artifacts"] for n in ("hypotheses", "hypothesis_registry", "hypotheses_summary"))
    ):
        raise HypographError(
            f"{pkg.root / p['hypothesis_registry']}: missing, but revision {rev} declares a batch "
            "(hypotheses.json, a manifest pointer or a completed dispatch); refusing to replace "
            "it with a fresh allocation"
        )


def pinned_policy(pkg: CasePackage, rev: int, configured: HypothesisPolicy) -> HypothesisPolicy:
    """The revision's saved policy (``configured`` until one is saved); a config that differs
    from a saved policy is refused, never a reset."""
    saved = pkg.read_optional(paths(rev)["hypothesis_policy"])
    if saved is None:
        return configured
    where = pkg.root / paths(rev)["hypothesis_policy"]
    if not isinstance(saved, dict):
        raise HypographError(f"{where}: not a JSON object")
    for k in POLICY_KEYS:
        if isinstance(saved.get(k), bool) or not isinstance(saved.get(k), int):
            raise HypographError(f"{where}: field '{k}': missing or not an integer")
    pinned = HypothesisPolicy.from_document(saved)
    changed = [k for k in POLICY_KEYS if getattr(pinned, k) != getattr(configured, k)]
    if changed:
        k = changed[0]
        raise HypographError(
            f"{pkg.root / paths(rev)['hypothesis_policy']}: hypotheses.{k} is pinned at "
            f"{getattr(pinned, k)} for revision {rev}, the config says {getattr(configured, k)}; "
            "new values take effect with a new analysis revision"
        )
    return pinned


def attempt_for(pkg: CasePackage, rev: int, state: DispatchState | None, requested: str | None) -> str:
    """The attempt id of this dispatch: ``requested`` (never a rejected one), else the pending
    attempt, else "1" for the first; after a rejection a new id must be given explicitly."""
    errors = pkg.root / rev_dir("hypotheses", rev) / "errors"
    rejected = {q.stem for q in errors.glob("*.json")} if errors.is_dir() else set()
    if requested is not None:
        if not ATTEMPT_RE.match(requested):
            raise HypographError(f"attempt id {requested!r}: letters, digits, '.', '_' and '-' only")
        if requested in rejected:
            raise HypographError(
                f"{errors / (requested + '.json')}: attempt {requested} was rejected; "
                f"a correction needs a new attempt id: {new_attempt(pkg.root)}"
            )
        return requested
    if state is not None and state.attempt_id not in rejected:
        return state.attempt_id
    if not rejected:
        return "1"
    last = state.attempt_id if state else sorted(rejected)[-1]
    raise HypographError(
        f"{errors / (last + '.json')}: attempt {last} of revision {rev} was rejected; "
        f"correct it under the same policy with a new attempt id: {new_attempt(pkg.root)}"
    )


def new_attempt(root: Path) -> str:
    """How a person starts a new attempt, from the command line and from the UI, word for word."""
    return (
        f"`hypograph batch {root} --attempt ID` (ID: letters, digits, '.', '_', '-'; in the UI, the "
        "run config's resources.case.config.attempt)"
    )
