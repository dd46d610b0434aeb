"""How a command ends, in one place for ``hypograph`` and ``prox``: an error becomes its one line on
stderr (``hypograph proximity: …``) and its exit code (``hypograph.errors.exit_code``: 0 done, 1
refused or failed, 2 not done yet, 130 interrupted), and the command's record (``Draft``) keeps
the line, the runs it launched and its result, for ``--json`` (``hypograph_cli/records.py``).

Only the standard library here: an argument error answers without loading pydantic or Dagster.
"""

from __future__ import annotations

import sys

from hypograph.errors import HypographError, NotDone, exit_code


def error_line(error: BaseException) -> str:
    """The error's line as a command prints it: a busy case is DEFERRED."""
    if isinstance(error, OSError):  # e.g. a DAGSTER_HOME that cannot be created
        return f"{error.filename}: {error.strerror or error}" if error.filename else str(error.strerror or error)
    if isinstance(error, NotDone):
        from hypograph.case.package import CaseBusy

        if isinstance(error, CaseBusy):
            return f"DEFERRED: {error}; nothing done"
    return str(error)


class Draft:
    """The record of the command running now: its runs, its result (a model of
    ``hypograph_cli.records``), its error line; ``dumps(code)`` is what ``--json`` prints."""

    def __init__(self, command: str, as_json: bool = False, prefix: str | None = None):
        self.command, self.as_json = command, as_json
        self.prefix = prefix or command  # what starts its error line: `hypograph case`, `prox embed`
        self.runs: list[dict] = []
        self.result = None
        self.error: str | None = None
        self.status: str | None = None  # what the code means, where it is not ``STATUS``'s (prox's usage error)

    def ran(self, job: str, result, why: str | None = None) -> None:
        """A Dagster run the command launched (its result: ``run_id``, ``success``)."""
        self.runs.append({"job": job, "run_id": result.run_id, "success": result.success, "why": why})

    def refuse(self, line: str, code: int) -> int:
        """``line`` printed as the command's one line on stderr and recorded; ``code`` returned."""
        from hypograph.text import printable_lines  # a path or name in it may hold control characters

        self.error = line if self.error is None else self.error
        print(printable_lines(f"{self.prefix}: {line}"), file=sys.stderr)
        return code

    def failed(self, error: BaseException) -> int:
        """``error`` (a HypographError or an OSError) as the command's line and exit code."""
        return self.refuse(error_line(error), exit_code(error) if isinstance(error, HypographError) else 1)

    def dumps(self, code: int) -> str:
        from hypograph_cli.records import dumps

        return dumps(self, code)
