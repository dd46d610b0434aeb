"""Named points of a package write, and the explicit test hook that can stop a run at one.

A case write is one ``Journal`` plan. ``HookedJournal`` reports "journal-saved" once the whole
plan is on disk and "wrote:<path>" after each file, so a test can stop the process exactly
there (``CrashAt("publish:wrote:manifest.json")``) and check that the next dispatch rolls the plan
forward without new ids, allocations or model calls. In production the hook is ``None``.
"""

from __future__ import annotations

from collections.abc import Callable

from hypograph.journal import Journal, Step, apply_step

Hook = Callable[[str], None]


class SimulatedCrash(BaseException):
    """Raised by ``CrashAt``: a BaseException, so no ``except Exception`` cleanup runs, as in a
    real crash."""


class CrashAt:
    """Hook that records every point it passes and raises SimulatedCrash at ``crash_after``."""

    def __init__(self, crash_after: str | None = None):
        self.crash_after = crash_after
        self.seen: list[str] = []

    def __call__(self, point: str) -> None:
        self.seen.append(point)
        if point == self.crash_after:
            raise SimulatedCrash(point)


def prefixed(hook: Hook | None, prefix: str) -> Hook | None:
    return None if hook is None else (lambda point: hook(f"{prefix}:{point}"))


class HookedJournal(Journal):
    """The project's journal, reporting its progress to ``hook`` (applies exactly as Journal)."""

    def __init__(self, root, name, hook: Hook | None = None):
        super().__init__(root, name)
        self.hook = hook

    def _run(self, steps: list[Step]) -> int:
        if self.hook is None:
            return super()._run(steps)
        self.hook("journal-saved")
        changed = 0
        for step in steps:
            changed += apply_step(self.root, step)
            self.hook(f"wrote:{step.to}")
        return changed
