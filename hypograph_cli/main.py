"""``hypograph``: run the pipelines on run directories, vaults, libraries and case packages through Dagster.

Runs go through the one Dagster instance of ``pipelines/instance.py`` (``$DAGSTER_HOME``, else
``~/.hypograph/dagster``), each on its input's partition, so ``hypograph ui`` shows every run of
every input and its lineage. Commands that only read or check a vault (``check``, ``unmerge``,
``create-node``, ``case confirm``'s person step) call the domain directly and start no run.

    hypograph add PATH...
    hypograph proximity PATH [--backend tfidf|sbert] [--model M] [--threshold 0.3] [--dupe-threshold 0.8]
                             [--llm offline] [--skip-bad-files]
    hypograph structure VAULT [--llm offline] [--backend tfidf|sbert] [--threshold 0.3]
    hypograph report PATH [--dupe-threshold 0.8]
    hypograph library DIR --topic "…" [--rounds R] [--behavior B3|"text"] [--no-web] [--report|--check]
    hypograph case from-vault VAULT CASE_DIR | hypograph case confirm CASE_DIR
    hypograph batch CASE_DIR [--config F] [--attempt ID] [--into VAULT]
    hypograph check VAULT
    hypograph unmerge VAULT H-N
    hypograph create-node VAULT --type hypothesis --title TITLE < body.md
    hypograph ui [PATH...] [--host 127.0.0.1] [--port 3000]

Every command takes ``-q``/``--quiet``: no stage lines or bars on stderr (there are none either
when stderr is not a terminal).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
from pathlib import Path

from hypograph_cli import settings

# Only the standard library at import: `hypograph --help` and argument errors answer without
# loading Dagster, numpy or the domain (each handler imports what it runs). The library, case and
# batch parsers are built only when the command line names them (their modules import the domain).
LAZY = {
    "library": "generate, dedup, score and persist hypothesis-library rounds in DIR",
    "case": "case packages: make one from inputs or a vault, interpret, confirm",
    "batch": "generate and publish the initial hypothesis batch of CASE_DIR",
}


def _progress_on(args) -> bool:
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


def _run_line(args, job: str, result, started: float) -> None:
    """On a terminal: the run's id and where to see it, once it succeeded."""
    if _progress_on(args):
        print(
            f"{job} run {result.run_id[:8]} succeeded in {time.perf_counter() - started:.1f} s; "
            f"see it with `make ui` (or `hypograph ui`), Runs: {result.run_id}",
            file=sys.stderr,
        )


def _job(args, root: Path, job: str, settings: dict, offline: bool | None):
    """One Dagster run of ``job`` on ``root``'s partition, its warnings and model use printed."""
    from hypograph.progress import stage
    from pipelines.launch import execute

    started = time.perf_counter()
    with stage(f"{job} run"):
        result = execute(root, job, settings, offline)
    _ran(args, job, result, started)
    return result


def _ran(args, job: str, result, started: float, why: str | None = None) -> None:
    """After a run: recorded, its warnings and model use, and on a terminal its id (a failed run:
    one line; exit 2 when it is not done yet, e.g. a model outage, 1 otherwise)."""
    from hypograph.errors import Interrupted
    from hypograph_cli import signals, summaries
    from pipelines.launch import run_error

    args.draft.ran(job, result, why)
    if not result.success:
        raise run_error(job, result)
    if signals.interrupted():  # received while Dagster only noted it (between steps): never lost
        raise Interrupted(f"{job} run {result.run_id[:8]}: {INTERRUPTED}")
    summaries.print_warnings(result)
    summaries.print_model_usage(result)
    _run_line(args, job, result, started)


def _offline(args) -> bool | None:
    return True if args.llm == "offline" else None


def _proximity(args) -> int:
    from hypograph_cli import summaries

    root = args.path.resolve()
    result = _job(args, root, "proximity", {"proximity": args.settings}, _offline(args))
    args.draft.result = summaries.proximity_record(root, result)
    summaries.print_proximity(args.draft.result)
    return 0


def _structure(args) -> int:
    """Proximity on the vault, step 4, then proximity again if step 4 rewrote the vault's
    hypotheses (so proximity/ describes the structured vault): ``hypograph_cli/structure.py``."""
    from hypograph.errors import HypographError
    from hypograph.paths import input_kind
    from hypograph_cli import summaries
    from hypograph_cli.structure import run_structure
    from pipelines.launch import latest_metadata

    root = args.path.resolve()
    if input_kind(root) != "vault":
        raise HypographError(f"{root}: not a vault (structure needs step-3 nodes in hypotheses/*.md)")
    started = [time.perf_counter()]
    runs: list[tuple[str, object, str]] = []  # (job, its result, the reason it ran), in order

    def ran(job: str, result, reason: str) -> None:
        runs.append((job, result, reason))
        _ran(args, job, result, started[0], reason)
        started[0] = time.perf_counter()

    run_structure(root, args.settings, _offline(args), on_run=ran)
    proximity = [result for job, result, _ in runs if job == "proximity"]
    # the review queue of the vault's latest proximity run: this command's, else the last one recorded
    queue = (
        summaries.asset_metadata(proximity[-1], "dedup_verdicts")
        if proximity
        else latest_metadata(root, "dedup_verdicts")
    )
    args.draft.result = summaries.structure_record(root, runs, queue.get("summary"))
    summaries.print_structure(args.draft.result)
    return 0


def _report(args) -> int:
    """The pictures of PATH's proximity files, written beside them: one run of the report job."""
    from hypograph_cli.records import Report
    from hypograph_cli.summaries import asset_metadata

    root = args.path.resolve()
    report = asset_metadata(_job(args, root, "report", {"proximity": args.settings}, None), "proximity_report")
    headline, files = report["headline"], report["files"]  # the run's record, not the files again
    args.draft.result = Report(path=str(root), headline=headline, files=files)
    print(headline)
    for path in files:
        print(path)
    return 0


def _check(args) -> int:
    from hypograph.journal import JOURNAL
    from hypograph_cli.records import VaultCheck
    from hypograph_cli.summaries import check_lines, check_records, vault_checks

    root = args.path.resolve()
    results = vault_checks(root)  # checking writes nothing
    journal = root / JOURNAL if (root / JOURNAL).exists() else None
    args.draft.result = VaultCheck(
        path=str(root),
        passed=not any(results.values()),
        checks=check_records(results),
        journal=str(journal) if journal else None,
    )
    if journal:
        print(f"note: {journal} holds an interrupted write; the next `hypograph structure` completes it")
    for line in check_lines(results):
        print(line)
    return 1 if any(results.values()) else 0


def _unmerge(args) -> int:
    from hypograph.structure.unmerge import unmerge_node
    from hypograph_cli.records import Unmerge

    summary = unmerge_node(args.path.resolve(), args.id).summary()
    args.draft.result = Unmerge(path=str(args.path.resolve()), id=args.id, summary=summary)
    print(summary)
    return 0


# `id: {{ID}}` is a YAML flow mapping, not text: the placeholder is quoted where it stands alone.
_BARE_PLACEHOLDER = re.compile(r"^(\s*(?:-\s+|[\w-]+:\s+))\{\{ID\}\}\s*$", re.MULTILINE)
_FRONTMATTER = re.compile(r"\A---\s*\n(.*?\n)---\s*(\n|\Z)", re.DOTALL)


def node_text(text: str) -> str:
    """The body given to ``create-node``: refused (HypographError, one line) without frontmatter —
    a node without ``state`` fails check 1 — and with a bare ``{{ID}}`` value quoted for YAML."""
    from hypograph.errors import HypographError

    m = _FRONTMATTER.match(text)
    if m is None:
        raise HypographError(
            "<stdin>: the body has no frontmatter; start it with ---, `state: active` "
            "(and the fields the README's create-node example shows), then ---"
        )
    front = _BARE_PLACEHOLDER.sub(lambda g: f'{g.group(1)}"{{{{ID}}}}"', m.group(1))
    return f"---\n{front}---{m.group(2)}{text[m.end() :]}"


def _create_node(args) -> int:
    from hypograph.vault.mint import create_node_from_text
    from hypograph_cli.records import CreateNode

    node_id, rel = create_node_from_text(args.path.resolve(), args.type, args.title, node_text(sys.stdin.read()))
    args.draft.result = CreateNode(id=node_id, path=str(args.path / rel))
    print(node_id)
    print(args.path / rel)
    return 0


def _add(args) -> int:
    from hypograph_cli.records import Add, Input
    from pipelines.instance import open_instance, register

    args.draft.result = Add(inputs=[])
    with open_instance() as instance:
        for path in args.paths:
            record = register(instance, path)
            args.draft.result.inputs.append(Input(id=record.id, kind=record.kind, path=str(record.path)))
            print(f"{record.id}: {record.kind} {record.path}")
    return 0


def _port_problem(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be served (something listens there already), or None."""
    import socket

    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))
        except OSError as e:
            return (
                f"{host}:{port} is busy ({e.strerror}); choose another port: "
                "`make ui PORT=3001` or `hypograph ui --port 3001`"
            )
    return None


def _ui(args) -> int:
    """Replace this process with ``dagster dev``: the web UI and the daemon (which starts queued runs,
    sensors, schedules and backfills) on the shared instance, stopped together on Ctrl-C. A busy
    port is refused before anything starts."""
    from hypograph.errors import HypographError
    from pipelines.instance import dagster_home, open_instance, register

    problem = _port_problem(args.host, args.port)
    if problem:
        raise HypographError(problem)
    with open_instance() as instance:
        for path in args.paths:
            register(instance, path)
    os.environ["DAGSTER_HOME"] = str(dagster_home())
    workspace = Path(__file__).resolve().parent.parent / "workspace.yaml"
    dagster = Path(sys.executable).with_name("dagster")
    os.chdir(workspace.parent)
    if args.draft.as_json:  # the record now, then Dagster's own output on stderr: stdout holds the one document
        from hypograph_cli.records import Ui

        url = f"http://{args.host}:{args.port}"
        args.draft.result = Ui(url=url, inputs=[str(p) for p in args.paths])
        sys.__stdout__.write(args.draft.dumps(0))
        sys.__stdout__.flush()
        os.dup2(sys.__stderr__.fileno(), sys.__stdout__.fileno())
    os.execv(dagster, [str(dagster), "dev", "-w", str(workspace), "-h", args.host, "-p", str(args.port)])


def _library(args) -> int:
    from hypograph_cli.library import library_command

    if args.report or args.check:  # rounds register it through their runs
        _register_library(Path(args.dir).resolve())
    return library_command(args)


def _register_library(root: Path) -> None:
    """Register ``root`` first (its report may be cut short by ``| head``); a folder that is no
    library is left to the command's own one-line error, without loading Dagster first."""
    from hypograph.errors import HypographError
    from hypograph.inputs import input_kind

    try:
        if input_kind(root) != "library":
            return
        from pipelines.instance import open_instance, register

        with open_instance() as instance:
            register(instance, root)
    except HypographError:
        pass


class _Parser(argparse.ArgumentParser):
    """An argument error is refused like any other input: its cause on the first line
    (``hypograph proximity: the following arguments are required: PATH``), where to read more on
    the second, exit 1 (2 is "not done yet"). Every subcommand's parser is one of these."""

    command: str | None = None  # the subcommand the command line names (its errors are named by it)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", settings.Help)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        prog = f"{self.prog} {self.command}" if self.command else self.prog
        if self.draft is not None:
            self.draft.error = message
        self.exit(1, f"{prog}: {message}\n  see `{prog} --help`\n")

    draft = None  # the command's record (``outcome.Draft``), which keeps the error's line for --json


def _quiet() -> argparse.ArgumentParser:
    """``-q/--quiet`` on every subcommand (SUPPRESS: a subcommand without it keeps the top one's)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)
    return p


QUIET_HELP = "no progress on stderr"


JSON_HELP = "print the command's record as one JSON document on stdout (docs/json.md), the rest on stderr"


def _every_parser(p: argparse.ArgumentParser):
    """``p`` and every sub-parser under it."""
    yield p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _every_parser(sub)


def _with_json(p: argparse.ArgumentParser, draft) -> None:
    """``--json`` and ``-q`` on every command and sub-command (SUPPRESS: one given before the
    subcommand stands), each parser's errors recorded in ``draft``."""
    for parser in _every_parser(p):
        parser.draft = draft
        if "--json" not in parser._option_string_actions:
            parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=JSON_HELP)
        if "-q" not in parser._option_string_actions:  # library, case, batch: -q as on every command
            parser.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)


def _vault_commands(sub, common) -> None:
    c = sub.add_parser("check", parents=common, help="the step-4 checks on VAULT; exit 1 if any fails")
    c.add_argument("path", type=Path, metavar="VAULT", help="vault")
    c.set_defaults(func=_check)
    c = sub.add_parser("unmerge", parents=common, help="undo the merge of hypothesis ID")
    c.add_argument("path", type=Path, metavar="VAULT", help="vault")
    c.add_argument("id", metavar="H-N", help="the merged hypothesis, e.g. H-7")
    c.set_defaults(func=_unmerge)
    c = sub.add_parser(
        "create-node",
        parents=common,
        help="mint the next id and create a node (body with frontmatter on stdin; {{ID}} is replaced)",
    )
    c.add_argument("path", type=Path, metavar="VAULT", help="vault")
    c.add_argument("--type", required=True, help="hypothesis, hypothesis-cluster, observation, source, ...")
    c.add_argument("--title", required=True)
    c.set_defaults(func=_create_node)


def _run_commands(sub, common) -> None:
    c = sub.add_parser(
        "add", parents=common, help="register input folders (run directories, vaults, ...) as partitions"
    )
    c.add_argument("paths", type=Path, nargs="+", metavar="PATH")
    c.set_defaults(func=_add)
    c = sub.add_parser("proximity", parents=common, help="embed, graph, cluster and list duplicates of PATH")
    c.add_argument("path", type=Path, metavar="PATH", help="run directory or vault")
    settings.option(c, "--backend", "proximity", "backend")
    settings.option(c, "--model", "proximity", "model")
    settings.option(c, "--threshold", "proximity", "graph_threshold", help="similarity graph threshold")
    settings.option(c, "--dupe-threshold", "proximity", "dupe_threshold", help="duplicate pair threshold")
    c.add_argument("--llm", choices=["auto", "offline"], default="auto", help="offline: never call a model")
    settings.option(
        c,
        "--skip-bad-files",
        "proximity",
        "skip_bad_files",
        action="store_true",
        help="skip a run directory's hypothesis file that cannot be read, naming it (prox's way); "
        "without it such a file stops the run: exit 1, nothing written",
    )
    c.set_defaults(func=_proximity, settings_of=settings.proximity)
    c = sub.add_parser("structure", parents=common, help="proximity, then step 4 (merge/drop, clusters, map) on VAULT")
    c.add_argument("path", type=Path, metavar="VAULT", help="vault")
    settings.option(c, "--backend", "proximity", "backend")
    settings.option(c, "--threshold", "proximity", "graph_threshold", help="similarity graph threshold")
    c.add_argument("--llm", choices=["auto", "offline"], default="auto", help="offline: never call a model")
    c.set_defaults(func=_structure, settings_of=settings.proximity)
    c = sub.add_parser("report", parents=common, help="cluster map, similarity histogram, threshold sweep of PATH")
    c.add_argument("path", type=Path, metavar="PATH", help="run directory, vault or library with a proximity/")
    settings.option(c, "--dupe-threshold", "proximity", "dupe_threshold", help="the duplicate pair threshold to mark")
    c.set_defaults(func=_report, settings_of=settings.proximity)
    c = sub.add_parser(
        "ui", parents=common, help="the Dagster web UI and daemon for every input (PATHs registered first)"
    )
    c.add_argument("paths", type=Path, nargs="*", metavar="PATH", help="inputs to register first")
    c.add_argument("--host", default="127.0.0.1")
    c.add_argument("--port", type=int, default=3000)
    c.set_defaults(func=_ui)


def _lazy_commands(sub, wanted: str | None) -> None:
    """``library``, ``case`` and ``batch``: a name and help line each, their arguments (and their
    domain imports) only for the one the command line names."""
    if wanted == "library":
        from hypograph_cli.library import add_library_parser

        add_library_parser(sub).set_defaults(func=_library, settings_of=settings.library)
    elif wanted in ("case", "batch"):
        from hypograph_cli import case

        case.add_parsers(sub)
    for name, text in LAZY.items():
        if name != wanted and not (wanted in ("case", "batch") and name in ("case", "batch")):
            sub.add_parser(name, help=text)


def parser(argv: list[str], draft=None) -> argparse.ArgumentParser:
    """The ``hypograph`` parser for this command line (see ``_lazy_commands``); its errors are
    recorded in ``draft`` (an ``outcome.Draft``) when one is given."""
    p = _Parser(prog="hypograph", description="Hypothesis structuring pipeline (Dagster).")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines or bars on stderr")
    sub = p.add_subparsers(dest="command", required=True)
    common = [_quiet()]
    _run_commands(sub, common)
    _vault_commands(sub, common)
    wanted = next((a for a in argv if not a.startswith("-")), None)
    _lazy_commands(sub, wanted if wanted in LAZY else None)
    p.command = wanted if wanted in sub.choices else None  # `hypograph check V --x`: named by check
    _with_json(p, draft)
    return p


# Commands whose PATHs are registered as inputs: a folder that is none is refused before Dagster
# loads, by the registry's own rule (``hypograph.inputs.input_kind``), in a fraction of a second.
INPUT_COMMANDS = ("add", "ui", "proximity", "report")


def _missing_directory(args) -> str | None:
    """Why a PATH of the command line cannot be used (no such directory, or not an input), or None."""
    paths = [p for p in getattr(args, "paths", None) or [getattr(args, "path", None)] if p is not None]
    for path in paths:
        if not path.is_dir():
            return f"{path}: {'not a directory' if path.exists() else 'no such directory'}"
    if args.command in INPUT_COMMANDS:
        from hypograph.errors import HypographError
        from hypograph.inputs import input_kind

        for path in paths:
            try:
                input_kind(path)
            except HypographError as e:
                return str(e)
    return None


def _dispatch(args) -> int:
    """The handler's exit code; an error that reaches it is its one line and its code (``outcome``)."""
    from hypograph.errors import HypographError
    from hypograph.text import printable_output

    try:
        if args.command == "ui":  # replaces this process with Dagster's webserver, its own output
            return args.func(args)
        with printable_output():  # what a handler prints from data (titles, ids, paths): escaped
            return args.func(args)
    except (HypographError, OSError) as e:
        if isinstance(e, BrokenPipeError):
            raise
        return args.draft.failed(e)


def _settings_problem(args) -> str | None:
    """The command's flags as its product's settings model (``args.settings``), or why not, in one line."""
    from hypograph.errors import HypographError

    try:
        args.settings = args.settings_of(args) if getattr(args, "settings_of", None) else None
    except HypographError as e:
        return str(e)
    return None


def _quiet_pipe() -> int:
    """The reader went away (``| head``): the rest of the output is dropped, quietly, exit 0."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit then writes nowhere, not a traceback
    return 0


def _environment_problem() -> str | None:
    """The environment's ``HYPOGRAPH_*`` variables parsed and bounded (``hypograph/environment.py``),
    or the one line that refuses them."""
    from hypograph import environment
    from hypograph.errors import HypographError

    try:
        environment.current()
    except HypographError as e:
        return str(e)
    return None


INTERRUPTED = (
    "interrupted (Ctrl-C or SIGTERM): the files it had not finished were never put in place; run the command again"
)


def main(argv: list[str] | None = None) -> int:
    """The command's exit code; 130 when it was interrupted (Ctrl-C, SIGTERM), at any moment. With
    ``--json``, what the command prints goes to stderr and its record alone to stdout."""
    from hypograph_cli import EARLY_SIGNALS, signals
    from hypograph_cli.outcome import Draft

    console, argv = argv is None, (sys.argv[1:] if argv is None else argv)
    words = [a for a in argv if not a.startswith("-")]
    case = words[1:2] if words[:1] == ["case"] else []
    draft = Draft(" ".join(["hypograph", *words[:1], *case]), "--json" in argv, " ".join(["hypograph", *words[:1]]))
    line = f"hypograph {argv[0] if argv else ''}: {INTERRUPTED}".replace("  ", " ")
    out = sys.stdout

    def record() -> str:  # with --json, when interrupted where only the exit is left (``signals.counted``)
        draft.error = draft.error or INTERRUPTED
        return draft.dumps(130) if draft.as_json else ""

    counted = signals.counted(line if console else None, record)
    with counted, contextlib.redirect_stdout(sys.stderr if draft.as_json else out):
        try:
            code = None if EARLY_SIGNALS else _main(argv, draft)  # a SIGTERM while importing: nothing started
        except KeyboardInterrupt:
            code = None
        if code is None or (code != 130 and signals.interrupted()):  # else its line is said already
            draft.error = draft.error or INTERRUPTED
            print(line, file=sys.stderr)
            code = 130
        if console:  # the exit's handler before ``counted`` restores the default: no moment without one
            signals.hold_to_exit(line)
    if draft.as_json:
        try:
            out.write(draft.dumps(code))
            out.flush()
        except BrokenPipeError:  # the reader went away: as without --json, quietly
            _quiet_pipe()
    if console:
        signals.exit_now(code, line)
    return code


def _main(argv: list[str], draft) -> int:
    try:
        args = parser(argv, draft).parse_args(argv)
    except SystemExit as e:  # --help (0) or an argument error (1, its line said)
        return e.code if isinstance(e.code, int) else 1
    args.draft = draft
    draft.command = " ".join(["hypograph", args.command, *filter(None, [getattr(args, "case_command", None)])])
    draft.prefix = f"hypograph {args.command}"
    if getattr(args, "func", None) is None:  # only a lazy placeholder's name: never reached normally
        return draft.refuse(f"see `{draft.command} --help`", 2)
    # the environment before any run, file or import of Dagster; library checks its own arguments
    problem = _environment_problem() or (None if args.command == "library" else _missing_directory(args))
    # then the flags as the product's settings model: before any run exists, before Dagster is imported
    problem = problem or _settings_problem(args)
    if problem:
        return draft.refuse(problem, 1)
    try:
        if not _progress_on(args) or args.command == "ui":  # ui: dagster's own output follows
            return _dispatch(args)
        from hypograph_cli import terminal

        return terminal.run(draft.command, lambda: _dispatch(args))
    except BrokenPipeError:
        return _quiet_pipe()


if __name__ == "__main__":
    sys.exit(main())
