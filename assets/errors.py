"""A project error raised by an asset becomes a Dagster ``Failure``: the UI shows the error's own
line (the file, node or field it names) as the failure's description and the details as metadata,
not a stack trace of Dagster's frames."""

from __future__ import annotations

import functools

from dagster import Failure, MetadataValue

from hypograph.errors import HypographError, NotDone


def project_errors(fn):
    """Wrap an asset (or op) function: a ``HypographError`` leaves it as ``Failure(description=its
    line, metadata={error, exit_code, status})``; anything else (a bug) keeps its trace."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Failure:
            raise
        except HypographError as e:
            raise Failure(
                description=str(e),
                metadata={
                    "error": MetadataValue.text(type(e).__name__),
                    "status": MetadataValue.text("NOT_DONE" if isinstance(e, NotDone) else "REFUSED"),
                    "line": MetadataValue.text(str(e)),
                },
            ) from None

    return run
