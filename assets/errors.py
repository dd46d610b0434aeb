"""How a step ends when it cannot do its work, the same whichever door started the run.

* A project error (``HypographError``: bad input, a file that cannot be read) leaves the
  step as a Dagster ``Failure`` whose description is the error's own line (the file, node or field
  it names), with the error's kind, status and what it names as metadata, and that line logged at
  ERROR (what the ``make ui`` terminal shows). Its cause chain is dropped (``from None``) and no
  retry policy re-runs it (``allow_retries=False``): the same input fails the same way. It
  carries no stack trace: the line is the whole of what the UI shows (see ``LineFailure``).
* A partition that cannot run yet, or never will (``Skip``: an unconfirmed revision, a revision a
  later one superseded, a round with nothing to take its settings from), and whatever the command
  calls exit 2 (a ``NotDone``: a person's decision, a model needed or down, a retry not yet due), a
  Launchpad setting out of range (``SettingRefused``) and a step launched before the job that makes
  its inputs (``Unloaded``, what the IO manager gives such an input) end the step with no output: nothing downstream
  runs, the run succeeds, no cell or check turns red and earlier materializations stay as they
  were. The reason is logged (WARNING; ERROR for a refused setting), recorded as an observation
  of the asset's partition (``skipped``, ``status``) and as the run's tags ``hypograph/skipped``
  (the status) and ``hypograph/reason`` (the line, shown in the Runs list); ``pipelines/launch.py`` turns it into
  the command's exit 2 (not done yet), or 1 for a refused setting. Assets get this through
  ``step`` (a generator asset declared ``output_required=False``); checks and ops keep
  ``project_errors``, where any of these is a failure with its line.
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import NamedTuple

from dagster import (
    AssetCheckExecutionContext,
    AssetExecutionContext,
    AssetObservation,
    Failure,
    MetadataValue,
    OpExecutionContext,
)
from dagster._core.errors import DagsterUserCodeProcessError
from dagster._utils.error import SerializableErrorInfo

from hypograph import errors
from hypograph.errors import HypographError, NotDone, SettingRefused, step_status
from io_managers.fleet import other_version

NOT_DONE = step_status(errors.NOT_DONE)  # the step statuses of exit codes 2 and 1 (``hypograph.errors``)
REFUSED = step_status(errors.REFUSED)
SUPERSEDED = "SUPERSEDED"
SKIPPED_TAG = "hypograph/skipped"
REASON_TAG = "hypograph/reason"


class Unloaded(NamedTuple):
    """An input's value that could not be loaded, for a step to end on (``step``):
    ``missing``, the asset was never made for this input (a job launched before the one that
    makes it: ``line`` names that job), else its file cannot be read (``line`` says why)."""

    line: str
    missing: bool


class Skip(Exception):
    """Raised in a step whose partition cannot run yet (``status`` NOT_DONE) or never will
    (SUPERSEDED); ``line`` says why and what to do. Only for a generator asset declared with
    ``output_required=False`` and wrapped in ``project_errors``."""

    def __init__(self, line: str, status: str = NOT_DONE):
        super().__init__(line)
        self.line = line
        self.status = status


def step(fn):
    """Wrap an asset function (plain or a generator) declared ``output_required=False``: its first
    action refuses a step of a run of another code version (a failure, as ``project_errors``); its
    result is yielded; a ``Skip``, a ``NotDone``, a ``SettingRefused`` or an input never made ends it with
    no output, recorded (see the module docstring); another ``HypographError`` leaves it as
    ``failure(...)``; anything else (a bug) keeps its trace."""

    @functools.wraps(fn)
    def steps(*args, **kwargs):
        _same_code(args)
        context = _context(args)
        try:
            for value in (*args, *kwargs.values()):
                if isinstance(value, Unloaded):  # never made: not done yet; unreadable: its failure
                    raise Skip(value.line) if value.missing else HypographError(value.line)
            if inspect.isgeneratorfunction(fn):
                yield from fn(*args, **kwargs)
            else:
                yield fn(*args, **kwargs)
        except Skip as s:
            _skipped(context, s)
        except SettingRefused as e:
            _skipped(context, Skip(str(e), REFUSED))
        except NotDone as e:  # a dispatch's own status (a busy case: DEFERRED) leads its line
            _skipped(context, Skip(f"{e.status}: {e}" if getattr(e, "status", None) else str(e)))
        except HypographError as e:
            raise _project_failure(e, args) from None

    return steps


def project_errors(fn):
    """Wrap an op or check function (a generator's too): its first action refuses a step of a run
    of another code version than this process runs (``io_managers/fleet.py``); a
    ``HypographError`` (a ``Skip`` too) leaves it as ``failure(...)``; anything else (a bug) keeps
    its trace. Assets: ``step``."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def steps(*args, **kwargs):
            _same_code(args)
            try:
                yield from fn(*args, **kwargs)
            except Skip as s:
                raise failure(s.line, "Skip", s.status, context=_context(args)) from None
            except HypographError as e:
                raise _project_failure(e, args) from None

        return steps

    @functools.wraps(fn)
    def run(*args, **kwargs):
        _same_code(args)
        try:
            return fn(*args, **kwargs)
        except Skip as s:  # a step that must give its output cannot skip: its reason, as a failure
            raise failure(s.line, "Skip", s.status, context=_context(args)) from None
        except HypographError as e:
            raise _project_failure(e, args) from None

    return run


def _same_code(args: tuple) -> None:
    """Refuse the running step (``REFUSED``, its line) if its run is of another code version."""
    context = _context(args)
    if context is None:
        return
    line = other_version(context.instance, context.run)
    if line:
        raise failure(line, "OtherCodeVersion", REFUSED, context=context) from None


def _project_failure(e: HypographError, args: tuple) -> Failure:
    code = errors.NOT_DONE if isinstance(e, NotDone) else errors.REFUSED
    return failure(str(e), type(e).__name__, step_status(code), context=_context(args))


def failure(line: str, kind: str, status: str, metadata: dict | None = None, context=None) -> Failure:
    """The step's ``Failure``: ``line`` as its description, ``kind`` (the error's class), ``status``
    (NOT_DONE, REFUSED, or a dispatch's own) and what the line names (its first part: a file,
    node or field; a path when it is one) as metadata, with ``metadata``'s entries; the line is
    logged at ERROR in the running step (``context``, else the current one)."""
    context = _context(()) if context is None else context
    if context is not None:
        context.log.error(line)
    named = line.split(": ", 1)[0] if ": " in line else ""
    return LineFailure(
        line,
        {
            "error": MetadataValue.text(kind),
            "status": MetadataValue.text(status),
            "line": MetadataValue.text(line),
            **({"names": _named(named)} if named else {}),
            **(metadata or {}),
        },
    )


class LineFailure(DagsterUserCodeProcessError, Failure):
    """A ``Failure`` whose recorded error is its line alone, with no frames.

    Dagster records a step's error from the raised exception's traceback, except for an error
    that a user-code process already serialised (``DagsterUserCodeProcessError``): that one it
    records as given. Posing as one, with a serialised error of no frames, is the only way
    Dagster 1.13 offers to fail a step without a stack trace; it is still a ``Failure``
    (description, metadata, no retry), which is how the step's failure is labelled."""

    def __init__(self, line: str, metadata: dict):
        info = SerializableErrorInfo(message=line + "\n", stack=[], cls_name="Failure")
        super().__init__(line, user_code_process_error_infos=[info])
        plain = Failure(description=line, metadata=metadata, allow_retries=False)
        self.description, self.metadata, self.allow_retries = plain.description, plain.metadata, False


def _named(text: str) -> MetadataValue:
    """What an error line names first: a path (shown as one) or a node, field or round."""
    return MetadataValue.path(text) if Path(text).is_absolute() else MetadataValue.text(text)


CONTEXTS = (AssetExecutionContext, OpExecutionContext, AssetCheckExecutionContext)


def _context(args: tuple):
    """The running step's context: the one the function was given, else the current one (None
    outside a step: a direct call, as in a unit test)."""
    for arg in args:
        if isinstance(arg, CONTEXTS):
            return arg
    for kind in (AssetExecutionContext, AssetCheckExecutionContext):
        try:
            return kind.get()
        except Exception:  # noqa: BLE001 - Dagster's "no current context" (or one of the other kind)
            continue
    return None


def _skipped(context, skip: Skip) -> None:
    """Log and record why the step produced nothing (see the module docstring)."""
    if context is None:
        return
    (context.log.error if skip.status == REFUSED else context.log.warning)(f"skipped: {skip.line}")
    partition = context.partition_key if context.has_partition_key else None
    metadata = {"skipped": MetadataValue.text(skip.line), "status": MetadataValue.text(skip.status)}
    context.log_event(AssetObservation(asset_key=context.asset_key, partition=partition, metadata=metadata))
    context.instance.add_run_tags(context.run_id, {SKIPPED_TAG: skip.status, REASON_TAG: skip.line})
