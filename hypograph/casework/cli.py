"""The case commands; ``add_case_parsers(subparsers)`` hooks them into ``hypograph``.

    hypograph case from-vault VAULT CASE_DIR     a vault as a case package (new unconfirmed revision)
    hypograph case confirm CASE_DIR [--by NAME]  a person confirms the current revision
    hypograph batch CASE_DIR [--config F] [--attempt ID] [--into VAULT]

Each handler takes the parsed arguments and returns the exit code (0: done; 1: refused, with
one line on stderr; 2: the dispatch ended RETRY_PENDING, DEFERRED, BLOCKED or ERROR). Bad input
raises HypographError, which ``hypograph``'s main prints as one line.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from hypograph.casework.bridge import mint_batch
from hypograph.casework.builder import HypothesisBuilder
from hypograph.casework.config import HypothesisConfig
from hypograph.casework.dispatch import Status
from hypograph.casework.from_vault import case_from_vault
from hypograph.casework.gateway import CaseGateway
from hypograph.casework.package import CaseStore
from hypograph.casework.revision import confirm
from hypograph.errors import HypographError

NEEDS_MODEL = ("needs a model: set [[endpoints]] in the --config file or HYPOGRAPH_LLM_MODEL "
               "(and HYPOGRAPH_LLM_BASE_URL); nothing was changed")


def add_case_parsers(subparsers) -> None:
    """Add ``case`` (from-vault, confirm) and ``batch`` to ``hypograph``'s sub-parsers. Each
    parser sets ``func`` and ``path`` (the directory that must exist)."""
    case = subparsers.add_parser("case", help="case packages: import a vault as a case, confirm a revision")
    sub = case.add_subparsers(dest="case_command", required=True)
    c = sub.add_parser("from-vault", help="record VAULT's observations and question as a new revision of CASE_DIR")
    c.add_argument("path", type=Path, metavar="VAULT")
    c.add_argument("case_dir", type=Path, metavar="CASE_DIR")
    c.set_defaults(func=_from_vault)
    c = sub.add_parser("confirm", help="confirm the current revision's interpretation (a person's decision)")
    c.add_argument("path", type=Path, metavar="CASE_DIR")
    c.add_argument("--by", default=None, help="who confirms (default: the login name)")
    c.set_defaults(func=_confirm)
    b = subparsers.add_parser("batch", help="generate and publish the initial hypothesis batch of CASE_DIR")
    b.add_argument("path", type=Path, metavar="CASE_DIR")
    b.add_argument("--config", type=Path, default=None, help="analysis TOML (default: built-in defaults)")
    b.add_argument("--attempt", default=None, help="a new attempt id, to correct a rejected or blocked attempt")
    b.add_argument("--into", type=Path, default=None, metavar="VAULT", help="mint the batch into VAULT as H nodes")
    b.set_defaults(func=_batch)


def _from_vault(args) -> int:
    report = case_from_vault(args.path, args.case_dir)
    print(f"{report.case_dir} ({report.package_id}): {report.message}")
    return 0


def _confirm(args) -> int:
    report = confirm(args.path, args.by)
    print(f"{report.case_dir} ({report.package_id}): {report.message}")
    return 0


def _batch(args) -> int:
    config = HypothesisConfig.load(args.config) if args.config else HypothesisConfig()
    gateway = None if os.environ.get("HYPOGRAPH_LLM") == "offline" else CaseGateway.from_config(config)
    if gateway is None:
        print(f"hypograph batch: {NEEDS_MODEL}", file=sys.stderr)
        return 1
    if args.into is not None and not args.into.is_dir():
        raise HypographError(f"{args.into}: no such vault directory")
    store, case_id = CaseStore.for_dir(args.path)
    package_id = store.package(case_id).manifest()["package_id"]
    result = asyncio.run(HypothesisBuilder(store, gateway, config).build(case_id, package_id, args.attempt))
    print(result.line())
    for name, path in result.paths.items():
        print(f"  {name}: {path}")
    if result.status is not Status.COMPLETED:
        return 2
    if args.into is not None:
        print(mint_batch(store.root / case_id, args.into).line())
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m hypograph.casework.cli``), the same handlers as ``hypograph``."""
    p = argparse.ArgumentParser(prog="hypograph")
    add_case_parsers(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    if not args.path.is_dir():
        print(f"hypograph {args.command}: {args.path}: no such directory", file=sys.stderr)
        return 1
    try:
        return args.func(args)
    except HypographError as e:
        print(f"hypograph {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
