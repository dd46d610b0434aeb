"""A project error raised by an asset becomes a Dagster ``Failure``: the UI shows the error's own
line (the file, node or field it names) as the failure's description and the details as metadata,
not a stack trace of Dagster's frames."""

from __future__ import annotations

import functools
import inspect

from dagster import Failure, MetadataValue

from hypograph.errors import HypographError, NotDone


def project_errors(fn):
    """Wrap an asset (or op) function, a generator's too: a ``HypographError`` leaves it as
    ``Failure(description=its line, metadata={error, status, line})``; anything else (a bug) keeps
    its trace."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def steps(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except HypographError as e:
                raise _failure(e) from None

        return steps

    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except HypographError as e:
            raise _failure(e) from None

    return run


def _failure(e: HypographError) -> Failure:
    return Failure(
        description=str(e),
        metadata={
            "error": MetadataValue.text(type(e).__name__),
            "status": MetadataValue.text("NOT_DONE" if isinstance(e, NotDone) else "REFUSED"),
            "line": MetadataValue.text(str(e)),
        },
    )
