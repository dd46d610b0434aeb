"""``hypograph case …`` and ``hypograph batch``: each step on the case revision's Dagster partition
(``<case id>/rNNNN`` of ``case_revisions``), so the UI shows a case's whole history.

``case new``, ``add`` and ``from-vault`` make the revision and record the package's new version (an
observation on the partition); ``case interpret`` is a run of ``case_interpret``; ``case confirm``
is the person's step, then a run of ``case_confirmed`` that verifies it; ``batch`` a run of
``case_batch`` (``case_batch_into_vault`` with ``--into``)."""

from __future__ import annotations

from pathlib import Path

from hypograph.case.package import CasePackage
from hypograph.case.settings import CaseSettings
from hypograph.errors import NOT_DONE, HypographError, NotDone
from hypograph_cli import settings, summaries
from hypograph_cli.case_args import add_case_parsers
from hypograph_cli.records import Batch, Case


def revision_key(revision: int) -> str:
    """``r0001``: imported when a case step runs, so ``hypograph case --help`` loads no Dagster."""
    from hypograph.ids import numbered_key as key

    return key(revision)


def add_parsers(subparsers) -> None:
    """``hypograph case …`` and ``hypograph batch …``, each step recorded on the case's partition."""
    parsers = add_case_parsers(subparsers)
    for name, where in (("new", "case_dir"), ("add", "path"), ("from-vault", "case_dir")):
        parsers[name].set_defaults(func=_then_observed(parsers[name].get_default("func"), where))
    parsers["confirm"].set_defaults(
        func=_then_observed(parsers["confirm"].get_default("func"), "path", job="case_confirmed")
    )
    parsers["interpret"].set_defaults(func=interpret)
    for name in ("new", "add", "interpret", "batch"):  # --config checked before any run or import of Dagster
        parsers[name].set_defaults(settings_of=settings.case)
    parsers["batch"].set_defaults(func=batch)


def _then_observed(handler, where: str, job: str | None = None):
    """``handler``, then the case registered and its new version observed (and ``job`` run on its
    current revision) when the handler succeeded."""

    def run(args) -> int:
        code = handler(args)
        if code == 0 and getattr(args, "changed", True):  # an unchanged revision: no asset changes, no run
            root = Path(getattr(args, where)).resolve()
            if job is None:
                from pipelines.instance import observe_case

                observe_case(root)
            else:
                args.draft.ran(job, _run(root, job, CaseSettings()))
        return code

    return run


def _run(root: Path, job: str, case: CaseSettings):
    from assets.errors import NOT_DONE as NOT_DONE_STATUS
    from pipelines.launch import execute, failed_line

    revision = CasePackage(root).manifest()["analysis_revision"]
    result = execute(root, job, {"case": case}, sub=revision_key(revision))
    if not result.success:
        meta = _failure_metadata(result)
        if meta.get("status") == NOT_DONE_STATUS:
            raise NotDone(meta["line"])
        raise HypographError(failed_line(job, result))
    return result


def interpret(args) -> int:
    """The draft interpretation through the ``case_interpret`` job; prints what was drafted.
    ``args.settings``: the ``CaseSettings`` of ``--config``, checked before any run (``main``)."""
    root = args.path.resolve()
    result = _run(root, "case_interpret", args.settings)
    args.draft.ran("case_interpret", result)
    meta = summaries.asset_metadata(result, "interpretation_draft")
    revision = CasePackage(root).manifest()["analysis_revision"]
    args.draft.result = Case(case_dir=str(root), revision=revision, message=meta["line"])
    print(f"{root} {revision_key(revision)}: {meta['line']}")
    return 0


def batch(args) -> int:
    """Run the batch job on the current revision (``case_batch_into_vault`` with ``--into``): its
    guards are the job's, once each in its run (the case lock, the person's confirmation, a model
    unless the batch is published: a published batch is reused offline). Only ``--into`` is
    checked here, an argument naming a folder: no run starts for a vault that is not one."""
    from hypograph.vault.vault import require_vault
    from pipelines.launch import execute, failed_line

    root = args.path.resolve()
    vault = args.into.resolve() if args.into is not None else None
    if vault is not None:
        require_vault(vault, "--into")
    revision = CasePackage(root).manifest()["analysis_revision"]  # the run's partition (a missing package: 1)
    case = args.settings.model_copy(update={"attempt": args.attempt, "vault": str(vault) if vault else None})
    result = execute(
        root, "case_batch_into_vault" if vault else "case_batch", {"case": case}, sub=revision_key(revision)
    )
    args.draft.ran(result.job_def.name, result)
    summaries.print_model_usage(result)
    meta = summaries.asset_metadata(result, "hypothesis_batch") or _failure_metadata(result)
    args.draft.result = Batch(
        case_dir=str(root),
        status=meta.get("status"),
        line=meta.get("line"),
        paths={k: str(v) for k, v in (meta.get("paths") or {}).items()},
    )
    if meta.get("line"):
        print(meta["line"])
        for name, path in (meta.get("paths") or {}).items():
            print(f"  {name}: {path}")
    if not result.success:
        if meta.get("status"):  # the dispatch ended RETRY_PENDING, DEFERRED, BLOCKED or ERROR: its line said why
            return NOT_DONE
        raise HypographError(failed_line("batch", result))
    minted = summaries.asset_metadata(result, "batch_vault_nodes")
    if minted:
        args.draft.result.minted = minted["line"]
        print(minted["line"])
    return 0


def _failure_metadata(result) -> dict:
    """The metadata a failed case step carried (its dispatch status and line)."""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.user_failure_data:
            return {k: v.value for k, v in event.step_failure_data.user_failure_data.metadata.items()}
    return {}
