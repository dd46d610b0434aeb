"""The case commands; ``add_case_parsers(subparsers)`` hooks them into ``hypograph``.

    hypograph case new CASE_DIR --question "…" [--kind KIND] [--config F] PATH…   files, folders, ZIPs
    hypograph case add CASE_DIR [--kind KIND] [--config F] PATH…                  a new revision
    hypograph case from-vault VAULT CASE_DIR     a vault as a case package (new unconfirmed revision)
    hypograph case interpret CASE_DIR [--config F]   the model's draft (offline: a template to fill in)
    hypograph case show CASE_DIR                 what a person confirms
    hypograph case confirm CASE_DIR [--by NAME] [--use-suggested-question]
                                                 a person confirms the current revision (adopting the
                                                 draft; the question as typed unless the flag says
                                                 take the model's suggested wording)
    hypograph batch CASE_DIR [--config F] [--attempt ID] [--into VAULT]

Exit codes, the same for every ``hypograph`` command: 0 done; 1 refused input (the one line
names the file and field); 2 not done yet or needs something first (a model, a person's
confirmation, the lock another dispatch holds: ``DEFERRED``), nothing wrong with the input.
Each handler returns 0 or raises; ``hypograph``'s main turns the error into its line and code
(``hypograph_cli/outcome.py``). ``batch``'s handler is ``hypograph_cli.case.batch``: its guards
(the lock, the confirmation, a model) are the batch job's, run once in its run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hypograph.case.config import HypothesisConfig
from hypograph.case.from_vault import case_from_vault
from hypograph.case.ingest import DEFAULT_KIND
from hypograph.case.interpret import show_text
from hypograph.case.models import SOURCE_KINDS
from hypograph.case.new_case import case_add, case_new
from hypograph.case.revision import confirm
from hypograph.errors import DONE
from hypograph_cli.settings import option


def add_case_parsers(subparsers) -> dict[str, argparse.ArgumentParser]:
    """Add ``case`` and ``batch`` to ``hypograph``'s sub-parsers; returns the parsers by name
    (``new``, ``add``, ``from-vault``, ``interpret``, ``show``, ``confirm``, ``batch``), so a caller
    can route one through Dagster (``parsers["interpret"].set_defaults(func=...)``). A parser sets
    ``path`` only where that directory must exist already; ``case`` sets ``func``."""
    parsers: dict[str, argparse.ArgumentParser] = {}
    case = subparsers.add_parser("case", help="case packages: make one from inputs or a vault, interpret, confirm")
    sub = case.add_subparsers(dest="case_command", required=True)
    kinds = ", ".join(SOURCE_KINDS)
    c = parsers["new"] = sub.add_parser("new", help="a new case package from files, folders and ZIP archives")
    c.add_argument("case_dir", type=Path, metavar="CASE_DIR")
    c.add_argument("inputs", type=Path, nargs="+", metavar="PATH")
    c.add_argument("--question", required=True, help="what is to be explained (the reported behavior)")
    c.add_argument(
        "--kind",
        default=DEFAULT_KIND,
        choices=SOURCE_KINDS,
        metavar="KIND",
        help=f"catalogue kind of every input (default {DEFAULT_KIND}; one of {kinds})",
    )
    option(c, "--config", "case", "config_file", type=Path, help="analysis TOML ([archives] limits)")
    c.set_defaults(func=_new)
    c = parsers["add"] = sub.add_parser("add", help="more inputs as a new unconfirmed revision")
    c.add_argument("path", type=Path, metavar="CASE_DIR")
    c.add_argument("inputs", type=Path, nargs="+", metavar="PATH")
    c.add_argument(
        "--kind",
        default=DEFAULT_KIND,
        choices=SOURCE_KINDS,
        metavar="KIND",
        help=f"catalogue kind of every input (default {DEFAULT_KIND})",
    )
    option(c, "--config", "case", "config_file", type=Path, help="analysis TOML ([archives] limits)")
    c.set_defaults(func=_add)
    c = parsers["from-vault"] = sub.add_parser(
        "from-vault", help="record VAULT's observations and question as a new revision of CASE_DIR"
    )
    c.add_argument("path", type=Path, metavar="VAULT")
    c.add_argument("case_dir", type=Path, metavar="CASE_DIR")
    c.set_defaults(func=_from_vault)
    c = parsers["interpret"] = sub.add_parser(
        "interpret", help="the model's draft interpretation (no model: a template to fill in)"
    )
    c.add_argument("path", type=Path, metavar="CASE_DIR")
    option(c, "--config", "case", "config_file", type=Path, help="analysis TOML (endpoints, limits)")
    c = parsers["show"] = sub.add_parser("show", help="print what `case confirm` would confirm")
    c.add_argument("path", type=Path, metavar="CASE_DIR")
    c.set_defaults(func=_show)
    c = parsers["confirm"] = sub.add_parser(
        "confirm", help="confirm the current revision's interpretation (a person's decision)"
    )
    c.add_argument("path", type=Path, metavar="CASE_DIR")
    c.add_argument("--by", default=None, help="who confirms (default: the login name)")
    c.add_argument(
        "--use-suggested-question",
        action="store_true",
        help="take the model's wording of the question (`case show` prints it) instead of yours as typed",
    )
    c.set_defaults(func=_confirm)
    b = parsers["batch"] = subparsers.add_parser(
        "batch", help="generate and publish the initial hypothesis batch of CASE_DIR"
    )
    b.add_argument("path", type=Path, metavar="CASE_DIR")
    option(b, "--config", "case", "config_file", type=Path)
    option(b, "--attempt", "case", "attempt")
    option(b, "--into", "case", "vault", type=Path, metavar="VAULT", help="mint the batch into VAULT as H nodes")
    return parsers


def _config(args) -> HypothesisConfig:
    return HypothesisConfig.load(args.config) if getattr(args, "config", None) else HypothesisConfig()


def _recorded(args, report) -> int:
    """``report`` (a new revision's, a confirmation's) as the command's line and record."""
    from hypograph_cli.records import Case

    args.draft.result = Case(
        case_dir=str(report.case_dir),
        package_id=report.package_id,
        message=report.message,
        created=getattr(report, "created", None),
    )
    print(f"{report.case_dir} ({report.package_id}): {report.message}")
    return DONE


def _new(args) -> int:
    return _recorded(args, case_new(args.case_dir, args.question, args.inputs, args.kind, _config(args)))


def _add(args) -> int:
    return _recorded(args, case_add(args.path, args.inputs, args.kind, _config(args)))


def _from_vault(args) -> int:
    return _recorded(args, case_from_vault(args.path, args.case_dir))


def _show(args) -> int:
    from hypograph_cli.records import Case

    text = show_text(args.path)
    args.draft.result = Case(case_dir=str(args.path.resolve()), message=text)
    print(text)
    return DONE


def _confirm(args) -> int:
    report = confirm(args.path, args.by, use_suggested=args.use_suggested_question)
    args.changed = report.created  # already confirmed: nothing changed, so `hypograph` starts no run
    return _recorded(args, report)
