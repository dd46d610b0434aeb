"""The case commands; ``add_case_parsers(subparsers)`` hooks them into ``hypograph``.

    hypograph case from-vault VAULT CASE_DIR     a vault as a case package (new unconfirmed revision)
    hypograph case confirm CASE_DIR [--by NAME]  a person confirms the current revision
    hypograph batch CASE_DIR [--config F] [--attempt ID] [--into VAULT]

Each handler takes the parsed arguments and returns the exit code; bad input raises
HypographError, which ``hypograph``'s main prints as one line. ``batch``'s handler is
``pipelines.case_runs.batch``: it runs the batch through Dagster.
"""

from __future__ import annotations

from pathlib import Path

from hypograph.casework.from_vault import case_from_vault
from hypograph.casework.revision import confirm


def add_case_parsers(subparsers) -> None:
    """Add ``case`` (from-vault, confirm) and ``batch`` to ``hypograph``'s sub-parsers. Each
    parser sets ``path`` (the directory that must exist); ``case`` sets ``func``."""
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


def _from_vault(args) -> int:
    report = case_from_vault(args.path, args.case_dir)
    print(f"{report.case_dir} ({report.package_id}): {report.message}")
    return 0


def _confirm(args) -> int:
    report = confirm(args.path, args.by)
    print(f"{report.case_dir} ({report.package_id}): {report.message}")
    return 0
