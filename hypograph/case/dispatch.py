"""The persisted state of a revision's dispatches (dispatch.json) and the due-retry query.

A dispatch never waits: an unreachable model ends it with ``RETRY_PENDING`` and a due time
saved here; a dispatch before that time returns at once without a call; after the retry
policy's last round the case is ``BLOCKED`` until a person starts a new attempt (``hypograph
batch CASE_DIR --attempt ID``). The ``case_retries_due`` sensor asks ``due_retry`` of each registered
case whether to dispatch it again.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from enum import StrEnum

from hypograph.atomic import write_text
from hypograph.case.batch import paths
from hypograph.case.config import RetryPolicy
from hypograph.case.package import PHASE_GENERATING, CasePackage, json_text
from hypograph.errors import HypographError


class Status(StrEnum):
    """What a dispatch ended with."""

    COMPLETED = "COMPLETED"  # the batch is published (now, or earlier and reused)
    RETRY_PENDING = "RETRY_PENDING"  # no endpoint reachable; due again at ``due_at``
    DEFERRED = "DEFERRED"  # another dispatch holds the case lock; nothing done
    BLOCKED = "BLOCKED"  # the retry rounds are spent; a person must start a new attempt
    ERROR = "ERROR"  # the answer was rejected (see errors/), or went stale


STATE_TYPES = {
    "analysis_revision": int,
    "attempt_id": str,
    "status": str,
    "failed_rounds": int,
    "due_at": (str, type(None)),
    "last_failure": (str, type(None)),
    "phase": str,
}


@dataclass
class DispatchState:
    analysis_revision: int
    attempt_id: str
    status: str = "PENDING"  # PENDING, RETRY_PENDING, BLOCKED, REJECTED, COMPLETED
    failed_rounds: int = 0
    due_at: str | None = None
    last_failure: str | None = None
    phase: str = PHASE_GENERATING

    @classmethod
    def load(cls, pkg: CasePackage, revision: int) -> DispatchState | None:
        doc = pkg.read_optional(paths(revision)["dispatch"])
        if doc is None:
            return None
        where = pkg.root / paths(revision)["dispatch"]
        try:
            state = cls(**doc)
        except TypeError:
            raise HypographError(f"{where}: not a dispatch state") from None
        state.check(where)
        return state

    def check(self, where) -> None:
        """Each field of the type it is used as (a tampered one is one line naming the file and the
        field, not a crash of the builder or the retry sensor); a due time carries its UTC offset."""
        for name, kind in STATE_TYPES.items():
            value = getattr(self, name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise HypographError(f"{where}: field '{name}': {value!r} is not of the dispatch state's type")
        if self.due_at is not None:
            try:
                aware = dt.datetime.fromisoformat(self.due_at).tzinfo is not None
            except ValueError:
                aware = False
            if not aware:
                raise HypographError(
                    f"{where}: field 'due_at': {self.due_at!r} is not an ISO date and time with its UTC offset"
                )

    def text(self) -> str:
        return json_text(asdict(self))

    def save(self, pkg: CasePackage) -> None:
        write_text(pkg.root / paths(self.analysis_revision)["dispatch"], self.text())

    def due(self) -> dt.datetime | None:
        return dt.datetime.fromisoformat(self.due_at) if self.due_at else None

    def fail_round(self, now: dt.datetime, retry: RetryPolicy, failure: str) -> None:
        """Record an outage round: RETRY_PENDING with the next due time, or BLOCKED after the last."""
        self.failed_rounds += 1
        self.last_failure = failure
        if self.failed_rounds >= retry.rounds:
            self.status, self.due_at = "BLOCKED", None
        else:
            self.status = "RETRY_PENDING"
            self.due_at = (now + retry.delay(self.failed_rounds)).isoformat(timespec="seconds")


@dataclass(frozen=True)
class DueCase:
    case_id: str
    analysis_revision: int
    attempt_id: str
    due_at: str


def due_retry(pkg: CasePackage, now: dt.datetime | None = None) -> DueCase | None:
    """The retry of package ``pkg`` that is due at ``now`` (UTC now by default), or None. Reads
    only the package's manifest and its current revision's dispatch state."""
    now = now or dt.datetime.now(dt.UTC)
    rev = pkg.manifest()["analysis_revision"]
    state = DispatchState.load(pkg, rev)
    if state and state.status == "RETRY_PENDING" and state.due() and state.due() <= now:
        return DueCase(pkg.case_id, rev, state.attempt_id, state.due_at)
    return None
