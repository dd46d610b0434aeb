"""``hypograph``: run the pipelines on run directories, vaults, libraries and case packages through Dagster.

Runs go through the one Dagster instance of ``pipelines/instance.py`` (``$DAGSTER_HOME``, else
``~/.hypograph/dagster``), each on its input's partition, so ``hypograph ui`` shows every run of
every input and its lineage.

    hypograph add PATH...
    hypograph proximity PATH [--backend tfidf|sbert] [--model M] [--threshold 0.3] [--dupe-threshold 0.8]
                             [--llm offline]
    hypograph structure VAULT [--llm offline] [--backend tfidf|sbert] [--threshold 0.3]
    hypograph library DIR --topic "…" [--rounds R] [--behavior B3|"text"] [--no-web] [--report|--check]
    hypograph case from-vault VAULT CASE_DIR | hypograph case confirm CASE_DIR
    hypograph batch CASE_DIR [--config F] [--attempt ID] [--into VAULT]
    hypograph check VAULT
    hypograph unmerge VAULT H-N
    hypograph create-node VAULT --type hypothesis --title TITLE < body.md
    hypograph ui [PATH...] [--host 127.0.0.1] [--port 3000]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hypograph.errors import HypographError
from hypograph.library.cli import add_library_parser, library_command
from pipelines import case_runs, summaries
from pipelines.instance import dagster_home, open_instance, register, run_job
from pipelines.library_runs import dagster_round_runner


def _proximity(args) -> int:
    root = args.path.resolve()
    settings = {
        "backend": args.backend,
        "model": args.model,
        "graph_threshold": args.threshold,
        "dupe_threshold": args.dupe_threshold,
    }
    result = run_job(root, "proximity", {"proximity": settings}, offline=True if args.llm == "offline" else None)
    summaries.print_warnings(result)
    summaries.print_model_usage(result)
    summaries.print_proximity(root)
    return 0


def _structure(args) -> int:
    """Proximity on the vault, step 4, then proximity again if step 4 rewrote the vault's
    hypotheses (so proximity/ describes the structured vault): three runs on its partitions."""
    from hypograph.inputs import fingerprint
    from hypograph.paths import detect_kind

    root = args.path.resolve()
    if detect_kind(root) != "vault":
        raise HypographError(f"{root}: not a vault (structure needs step-3 nodes in hypotheses/*.md)")
    resources = {"proximity": {"backend": args.backend, "graph_threshold": args.threshold}}
    offline = True if args.llm == "offline" else None
    first = run_job(root, "proximity", resources, offline)
    summaries.print_warnings(first)
    summaries.print_model_usage(first)
    before = fingerprint(root, "vault")
    result = run_job(root, "structure", resources, offline)
    summaries.print_warnings(result)
    summaries.print_model_usage(result)
    if fingerprint(root, "vault") != before:
        run_job(root, "proximity", resources, offline)
    summaries.print_structure(root, result)
    return 0


def _check(args) -> int:
    from hypograph.journal import JOURNAL
    from hypograph.structure.baseline import read_baseline
    from hypograph.structure.checks import CHECK_NAMES, all_checks
    from hypograph.vault.vault import open_vault, require_vault

    root = args.path.resolve()
    require_vault(root)
    results = all_checks(open_vault(root, roll_forward=False), read_baseline(root))  # checking writes nothing
    if (root / JOURNAL).exists():
        print(f"note: {root / JOURNAL} holds an interrupted write; the next `hypograph structure` completes it")
    failed = 0
    for number, violations in results.items():
        name, what = CHECK_NAMES[number]
        print(f"check {number}: {'pass' if not violations else f'FAIL ({len(violations)})'}  {name}: {what}")
        for node_id, reason in violations:
            print(f"  {node_id}: {reason}")
        failed += bool(violations)
    return 1 if failed else 0


def _unmerge(args) -> int:
    from hypograph.structure.unmerge import unmerge

    restored, survivor = unmerge(args.path.resolve(), args.id)
    print(
        f"{restored} restored to hypotheses/ (active); {survivor} gave back its source and locator. "
        "Run `hypograph structure` to cluster it."
    )
    return 0


def _create_node(args) -> int:
    from hypograph.vault.mint import create_node_from_text

    node_id, rel = create_node_from_text(args.path.resolve(), args.type, args.title, sys.stdin.read())
    print(node_id)
    print(args.path / rel)
    return 0


def _add(args) -> int:
    with open_instance() as instance:
        for path in args.paths:
            record = register(instance, path)
            print(f"{record.id}: {record.kind} {record.path}")
    return 0


def _ui(args) -> int:
    """Replace this process with ``dagster dev``: the web UI and the daemon (which starts queued runs,
    sensors, schedules and backfills) on the shared instance, stopped together on Ctrl-C."""
    with open_instance() as instance:
        for path in args.paths:
            register(instance, path)
    os.environ["DAGSTER_HOME"] = str(dagster_home())
    workspace = Path(__file__).resolve().parent.parent / "workspace.yaml"
    dagster = Path(sys.executable).with_name("dagster")
    os.chdir(workspace.parent)
    os.execv(dagster, [str(dagster), "dev", "-w", str(workspace), "-h", args.host, "-p", str(args.port)])


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hypograph", description="Hypothesis structuring pipeline (Dagster).")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("add", help="register input folders (run directories, vaults, libraries, cases) as partitions")
    c.add_argument("paths", type=Path, nargs="+", metavar="path")
    c.set_defaults(func=_add)
    c = sub.add_parser("proximity", help="embed, graph, cluster and list duplicates of PATH")
    c.add_argument("path", type=Path, help="run directory or vault")
    c.add_argument("--backend", choices=["tfidf", "sbert"], default="tfidf")
    c.add_argument("--model", default=None)
    c.add_argument("--threshold", type=float, default=0.30)
    c.add_argument("--dupe-threshold", type=float, default=0.80)
    c.add_argument("--llm", choices=["auto", "offline"], default="auto", help="offline: never call a model")
    c.set_defaults(func=_proximity)
    c = sub.add_parser("structure", help="proximity, then step 4 (merge/drop, clusters, map) on VAULT, in place")
    c.add_argument("path", type=Path, help="vault")
    c.add_argument("--backend", choices=["tfidf", "sbert"], default="tfidf")
    c.add_argument("--threshold", type=float, default=0.30, help="similarity graph threshold")
    c.add_argument("--llm", choices=["auto", "offline"], default="auto", help="offline: never call a model")
    c.set_defaults(func=_structure)
    case_runs.add_parsers(sub)
    c = add_library_parser(sub)
    c.set_defaults(func=lambda args: library_command(args, round_runner=dagster_round_runner))
    c = sub.add_parser("check", help="the six step-4 checks on VAULT; exit 1 if any fails")
    c.add_argument("path", type=Path, help="vault")
    c.set_defaults(func=_check)
    c = sub.add_parser("unmerge", help="undo the merge of hypothesis ID")
    c.add_argument("path", type=Path, help="vault")
    c.add_argument("id", help="the merged hypothesis, e.g. H-7")
    c.set_defaults(func=_unmerge)
    c = sub.add_parser("create-node", help="mint the next id and create a node (body on stdin; {{ID}} is replaced)")
    c.add_argument("path", type=Path, help="vault")
    c.add_argument("--type", required=True, help="hypothesis, hypothesis-cluster, observation, source, ...")
    c.add_argument("--title", required=True)
    c.set_defaults(func=_create_node)
    c = sub.add_parser("ui", help="the Dagster web UI and daemon for every input (PATHs are registered first)")
    c.add_argument("paths", type=Path, nargs="*", metavar="path", help="inputs to register first")
    c.add_argument("--host", default="127.0.0.1")
    c.add_argument("--port", type=int, default=3000)
    c.set_defaults(func=_ui)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "library":  # its own argument checks and exit codes (the library rounds CLI)
        return args.func(args)
    for path in getattr(args, "paths", None) or [getattr(args, "path", None)]:
        if path is not None and not path.is_dir():
            what = "not a directory" if path.exists() else "no such directory"
            print(f"hypograph {args.command}: {path}: {what}", file=sys.stderr)
            return 1
    try:
        return args.func(args)
    except HypographError as e:
        print(f"hypograph {args.command}: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:  # e.g. a DAGSTER_HOME that cannot be created: one line, not a traceback
        where = f"{e.filename}: " if e.filename else ""
        print(f"hypograph {args.command}: {where}{e.strerror or e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
