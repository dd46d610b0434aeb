"""``hypograph batch``: a case revision's initial batch run as its Dagster partition
(``<case id>/rNNNN`` of ``case_revisions``), optionally minted into a vault; ``hypograph case …`` as is."""

from __future__ import annotations

from assets.partitions import revision_key
from hypograph.casework.cli import add_case_parsers
from hypograph.casework.config import HypothesisConfig
from hypograph.casework.gateway import CaseGateway
from hypograph.casework.package import CasePackage
from hypograph.errors import HypographError
from pipelines import summaries
from pipelines.instance import execute, failures

RETRYABLE = 2  # the dispatch ended RETRY_PENDING, DEFERRED, BLOCKED or ERROR (seed 004's results)


def add_parsers(subparsers) -> None:
    """``hypograph case …`` and ``hypograph batch …``; batch goes through Dagster."""
    add_case_parsers(subparsers)
    subparsers.choices["batch"].set_defaults(func=batch)


def batch(args) -> int:
    """Refuse without a model (nothing changed), then run the ``case_batch`` job on the current revision."""
    policy = HypothesisConfig.load(args.config) if args.config else HypothesisConfig()
    CaseGateway.required(policy)  # no model: one line, nothing changed
    if args.into is not None and not args.into.is_dir():
        raise HypographError(f"{args.into}: no such vault directory")
    root = args.path.resolve()
    revision = CasePackage(root).manifest()["analysis_revision"]
    case = {"config_file": str(args.config.resolve()) if args.config else None, "attempt": args.attempt,
            "vault": str(args.into.resolve()) if args.into else None}
    result = execute(root, "case_batch_into_vault" if args.into else "case_batch", {"case": case},
                     sub=revision_key(revision), kind="case")
    meta = summaries.asset_metadata(result, "hypothesis_batch") or _failure_metadata(result)
    if meta.get("line"):
        print(meta["line"])
        for name, path in (meta.get("paths") or {}).items():
            print(f"  {name}: {path}")
    if not result.success:
        if meta.get("status"):
            return RETRYABLE
        raise HypographError(f"batch run {result.run_id[:8]} failed: " + "; ".join(failures(result)))
    if args.into:
        print(summaries.asset_metadata(result, "batch_vault_nodes")["line"])
    return 0


def _failure_metadata(result) -> dict:
    """The metadata a failed ``hypothesis_batch`` step carried (its dispatch status and line)."""
    for event in result.all_events:
        if event.is_step_failure and event.step_key == "hypothesis_batch":
            data = event.step_failure_data
            return {k: v.value for k, v in (data.user_failure_data.metadata if data.user_failure_data else {}).items()}
    return {}
