"""The ``hypograph`` front door: a fast --help, stage lines on a terminal, quiet pipes, the cause on
the first line of a failure (an argument error's too, exit 1), a busy port refused."""

from __future__ import annotations

import io
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helper import hypograph, in_process, in_shell, in_terminal
from conftest import EXAMPLE_RUN, EXAMPLE_VAULT, REPO, copy_tree, offline_env, snapshot

HEAVY = ("dagster", "numpy", "scipy", "sklearn", "pydantic")


def env(tmp_path: Path) -> dict[str, str]:
    return {**offline_env(), "DAGSTER_HOME": str(tmp_path / "dagster-home")}


def loaded_modules(argv: list[str]) -> set[str]:
    """The top-level packages imported by parsing ``argv`` the way ``hypograph`` does."""
    code = (
        "import sys\n"
        "from hypograph_cli.main import parser\n"
        "try:\n"
        f"    parser({argv!r}).parse_args({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    return set(proc.stdout.split())


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["proximity"], ["proximity", "x", "--threshold", "high"], ["check"], ["library", "--help"]],
    ids=["help", "missing-path", "bad-float", "check-missing", "library-help"],
)
def test_help_and_argument_errors_import_no_dagster_or_numpy(argv):
    """A command's own ``--help`` reads its settings model's bounds (pydantic, nothing heavier);
    the command list and argument errors load none of these."""
    loaded = loaded_modules(argv)
    heavy = set(HEAVY) - ({"pydantic"} if argv[-1] == "--help" and len(argv) > 1 else set())
    assert not loaded & heavy, loaded & heavy


def test_help_lists_every_command_and_takes_well_under_a_second():
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = hypograph("--help")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for command in ("proximity", "structure", "check", "unmerge", "create-node", "library", "case", "batch", "ui"):
        assert command in proc.stdout
    # The CPU the process used (0.05 s measured), not the wall clock: a loaded machine (issue 46:
    # a clean clone's suite under load) stretches the one, not the other.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 1.0, cpu


def screen(written: str) -> list[str]:
    """The lines a person sees on a terminal once ``written`` was written to it: ``\\r`` goes back to
    the line's start, ``\\x1b[K`` clears the line from there (what erases a status line)."""
    lines, line, col, i = [], [], 0, 0
    while i < len(written):
        if written.startswith("\x1b[K", i):
            del line[col:]
            i += 3
            continue
        c = written[i]
        if c == "\r":
            col = 0
        elif c == "\n":
            lines.append("".join(line))
            line, col = [], 0
        else:
            line[col : col + 1] = [c]
            col += 1
        i += 1
    return lines + (["".join(line)] if line else [])


STAGE_LINE = re.compile(r"^[^:]+: done in \d+\.\d\d s( \(.*\))?$|^\d+ checks? pass(es)?$|^\d+ of \d+ checks? failed: ")


def stage_lines(written: str) -> list[str]:
    """The stage lines a person sees: ``asset: done in N.NN s (…)``, the checks' one line."""
    return [line for line in screen(written) if STAGE_LINE.match(line)]


def assert_nothing_glued(lines: list[str]) -> None:
    """No status line is left on the screen (``name ...``) and no stage line runs into another line."""
    for line in lines:
        assert " ..." not in line, (line, lines)
        if not STAGE_LINE.match(line):
            assert not re.search(r"\S: done in \d+\.\d\d s", line), (line, lines)


def assert_run_line_then_summary(lines: list[str], run: Path) -> None:
    """The checks' line, the run's line, then the command's summary in one piece, then "done"."""
    run_line = next(i for i, line in enumerate(lines) if " succeeded in " in line)
    assert "proximity run" in lines[run_line] and "make ui" in lines[run_line]
    assert lines[run_line - 1] == "5 checks pass", lines
    summary = lines[run_line + 1 : -1]  # everything the command printed, all of it its summary
    assert summary[0].startswith(f"{run}: 30 hypotheses") and summary[-1].startswith("pictures "), summary
    assert not [line for line in summary if STAGE_LINE.match(line) or "read hypotheses" in line], summary


def test_proximity_in_a_terminal_prints_stage_lines_and_the_run_id(tmp_path):
    """One line per asset, the checks in one line, the run's id, the summary in one piece, then the
    command's "done": nothing else, and nothing glued (stdout and stderr on one terminal)."""
    run = copy_tree(EXAMPLE_RUN, tmp_path / "run")
    code, _, written = in_terminal(["proximity", str(run), "--llm", "offline"], env(tmp_path), stdout_too=True)
    assert code == 0, written
    lines = screen(written)
    assert_nothing_glued(lines)
    stages = stage_lines(written)
    assets = [line.split(":")[0] for line in stages if " done in " in line]
    assert assets[0] == "hypothesis_texts" and "read hypotheses: 30 files" in stages[0], stages
    assert sorted(assets[:-1]) == sorted(  # one line per asset, the command's own last
        ["hypothesis_texts", "hypothesis_embeddings", "similarity_graph", "duplicate_pairs"]
        + ["proximity_clusters", "dedup_verdicts", "cluster_labels"]
    ), stages
    assert assets[-1] == "hypograph proximity" and lines[-1] == stages[-1], lines
    assert [line for line in lines if "check" in line] == ["5 checks pass"], lines  # no check's key
    assert not any("embedding_shards" in line or "[rows_" in line for line in lines), lines
    assert_run_line_then_summary(lines, run)
    quiet = in_terminal(["proximity", str(run), "--llm", "offline", "--quiet"], env(tmp_path))
    assert quiet[0] == 0 and quiet[2] == "", quiet[2]


def test_vault_commands_in_a_terminal_print_their_stage_and_start_no_run(tmp_path):
    vault = copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
    environ = env(tmp_path)
    code, out, written = in_terminal(["check", str(vault)], environ)
    assert code in (0, 1) and "check 1: " in out  # the unstructured example fails step 4's checks
    done = [line for line in screen(written) if line.startswith("hypograph check: done in")]
    assert len(done) == (code == 0), written  # "done" only for a check that passed
    body = "---\nstate: active\nid: {{ID}}\n---\nA new claim of {{ID}}.\n"
    code, out, written = in_terminal(
        ["create-node", str(vault), "--type", "hypothesis", "--title", "New"], environ, body, stdout_too=True
    )
    assert code == 0, written
    lines = screen(written)
    assert_nothing_glued(lines)
    assert lines[0].startswith("H-") and lines[-1].startswith("hypograph create-node: done in"), lines
    assert not (tmp_path / "dagster-home" / "history").exists()  # no Dagster run, no instance opened


def _bad_vault(tmp_path: Path) -> Path:
    """The example vault with one hypothesis whose frontmatter is not YAML: proximity's first step fails."""
    vault = copy_tree(EXAMPLE_VAULT, tmp_path / "bad-vault")
    node = sorted((vault / "hypotheses").glob("H-1 - *.md"))[0]
    node.write_text("---\nstate: [unclosed\n---\nbody\n")
    return vault


# Every command, failing: (argv, the start of the first line a person sees, its exit code, stdin).
FAILURES = {
    "proximity": (["proximity", "{empty}", "--llm", "offline"], "hypograph proximity: {empty}: not an input", 1),
    "proximity-run": (
        ["proximity", "{bad}", "--llm", "offline"],
        "hypograph proximity: hypothesis_texts: hypotheses/H-1 - ",
        1,
    ),
    "structure": (["structure", "{run}", "--llm", "offline"], "hypograph structure: {run}: not a vault", 1),
    "add": (["add", "{empty}"], "hypograph add: {empty}: not an input", 1),
    "report": (["report", "{empty}"], "hypograph report: {empty}: not an input", 1),
    "check": (["check", "{empty}"], "hypograph check: {empty}: not a vault", 1),
    "library": (
        ["library", "{empty}", "--topic", "bees"],
        "hypograph library: round_candidates: library rounds need a model",
        2,
    ),
    "case-new": (["case", "new", "{case}", "--question", "why?", "{empty}/nothing"], "hypograph case: ", 1),
    "case-add": (["case", "add", "{empty}", "{run}"], "hypograph case: {empty}/manifest.json: missing", 1),
    "case-interpret": (["case", "interpret", "{empty}"], "hypograph case: {empty}/manifest.json: missing", 1),
    "case-show": (["case", "show", "{empty}"], "hypograph case: {empty}/manifest.json: missing", 1),
    "case-confirm": (["case", "confirm", "{empty}"], "hypograph case: {empty}/manifest.json: missing", 1),
    "batch": (["batch", "{empty}"], "hypograph batch: {empty}/manifest.json: missing", 1),
    "create-node": (
        ["create-node", "{vault}", "--type", "hypothesis", "--title", "Bare"],
        "hypograph create-node: <stdin>: the body has no frontmatter",
        1,
    ),
    "unmerge": (["unmerge", "{vault}", "H-9999"], "hypograph unmerge: {vault}: no hypothesis H-9999", 1),
    "arguments": (["proximity"], "hypograph proximity: the following arguments are required: PATH", 1),
}


@pytest.mark.parametrize("name", list(FAILURES))
def test_a_failure_in_a_terminal_shows_its_cause_first_and_no_done(tmp_path, name):
    """On a terminal (stdout and stderr on it), a failing command's stage lines are followed by its
    cause, first; no status line is left or glued to anything, and no "done" follows."""
    argv, first, expected = FAILURES[name]
    (tmp_path / "empty").mkdir()
    roots = {
        "empty": tmp_path / "empty",
        "run": copy_tree(EXAMPLE_RUN, tmp_path / "run"),
        "vault": copy_tree(EXAMPLE_VAULT, tmp_path / "vault"),
        "bad": _bad_vault(tmp_path) if name == "proximity-run" else None,
        "case": tmp_path / "case",
    }
    args = [a.format(**roots) for a in argv]
    stdin = "Just a sentence.\n" if name == "create-node" else None
    code, _, written = in_terminal(args, env(tmp_path), stdin, stdout_too=True)
    lines = screen(written)
    assert code == expected, lines
    assert_nothing_glued(lines)
    after_stages = [line for line in lines if not STAGE_LINE.match(line)]
    assert after_stages and after_stages[0].startswith(first.format(**roots)), lines
    assert lines.index(after_stages[0]) == len(lines) - len(after_stages)  # stage lines only before it
    assert not any(" done in " in line for line in after_stages), lines
    if name == "proximity-run":  # the run's step lines came first: none here, its first step failed
        assert "failed: its events in `make ui`" in after_stages[0], lines


@pytest.mark.parametrize(
    "argv, first",
    [
        (["proximity"], "hypograph proximity: the following arguments are required: PATH"),
        (["check", "v", "--deep"], "hypograph check: unrecognized arguments: --deep"),
        (["unmerge", "v"], "hypograph unmerge: the following arguments are required: H-N"),
        (["case", "new", "c", "--question", "q"], "hypograph case new: the following arguments are required: PATH"),
        (["batch"], "hypograph batch: the following arguments are required: CASE_DIR"),
        (["library"], "hypograph library: the following arguments are required: dir"),
        (["frobnicate"], "hypograph: argument command: invalid choice: 'frobnicate'"),
        ([], "hypograph: the following arguments are required: command"),
    ],
    ids=["missing-path", "unknown-flag", "unmerge", "case-new", "batch", "library", "command", "none"],
)
def test_an_argument_error_is_exit_1_with_its_cause_first(argv, first):
    """Exit 2 is "not done yet": an argument error is a refusal, exit 1, its cause the first line and
    where to read more the second (not argparse's usage block)."""
    proc = hypograph(*argv)
    lines = proc.stderr.splitlines()
    assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
    assert lines[0].startswith(first) and len(lines) == 2 and lines[1].strip().endswith("--help`"), lines


def test_the_terminal_sink_summarises_checks_and_erases_its_status_before_any_output(monkeypatch):
    """``hypograph_cli.terminal`` in-process, on a fake terminal: a failed check is named in the one
    checks line, printed before the error that follows; a failing command ends with no "done"."""
    from hypograph import progress
    from hypograph_cli import terminal

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setattr(sys, "stdout", tty)

    def command() -> int:
        with progress.stage("structure run"):
            for name, passed in (("graph_is_symmetric", 1), ("every_active_hypothesis_in_one_cluster", 0)):
                progress.notify(progress.Event("start", f"a_{name}", step=True))
                progress.notify(progress.Event("check", name, done=passed))
                progress.notify(progress.Event("end", f"a_{name}", step=True))
            progress.notify(progress.Event("start", "hypothesis_clusters", step=True))
            with progress.stage("model calls (label)", total=3, unit="calls"):
                pass
            progress.notify(progress.Event("end", "hypothesis_clusters", step=True))
            progress.notify(progress.Event("asset", "hypothesis_clusters", seconds=0.5))
        print("hypograph structure: check every_active_hypothesis_in_one_cluster failed", file=sys.stderr)
        return 1

    assert terminal.run("hypograph structure", command) == 1
    assert screen(tty.getvalue()) == [
        "hypothesis_clusters: done in 0.50 s (model calls (label): 3 calls)",
        "1 of 2 checks failed: every_active_hypothesis_in_one_cluster",
        "hypograph structure: check every_active_hypothesis_in_one_cluster failed",
    ]
    assert sys.stderr is tty and sys.stdout is tty  # the real streams back


def test_create_node_refuses_a_body_without_frontmatter_in_one_line(tmp_path):
    vault = copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
    proc = hypograph(
        "create-node", vault, "--type", "hypothesis", "--title", "Bare", stdin="Just a sentence.\n", env=env(tmp_path)
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "no frontmatter" in proc.stderr, proc.stderr
    assert not list(vault.rglob("* - Bare.md"))


def test_piping_into_head_ends_quietly(tmp_path):
    run = copy_tree(EXAMPLE_RUN, tmp_path / "run")
    environ = env(tmp_path)
    # a long output (the report of a run's clusters) cut after one line
    shell = f'{{hypograph}} proximity {run} --llm offline | head -1; echo "code=${{{{PIPESTATUS[0]}}}}"'
    proc = in_shell(shell, environ)
    assert proc.stdout.splitlines()[0].startswith(f"{run}: 30 hypotheses")
    assert "code=0" in proc.stdout
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    library = copy_tree(REPO / "examples" / "library", tmp_path / "library")
    proc = in_shell(f'{{hypograph}} library {library} --report | head -1; echo "code=${{{{PIPESTATUS[0]}}}}"', environ)
    assert proc.stdout.startswith("topic: ") and "code=0" in proc.stdout, proc.stdout
    assert proc.stderr == "", proc.stderr
    assert (library / ".hypograph" / "input-id").is_file()  # registered, as every command registers its input


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["proximity", "{run}", "--threshold", "30"],
            "hypograph proximity: --threshold: must be ≥ -1 and ≤ 1 (got '30')",
        ),
        (
            ["proximity", "{run}", "--dupe-threshold", "5"],
            "hypograph proximity: --dupe-threshold: must be ≥ 0 and ≤ 1 (got '5')",
        ),
        (
            ["proximity", "{run}", "--threshold", "nan"],
            "hypograph proximity: --threshold: must be ≥ -1 and ≤ 1 (got 'nan')",
        ),
        (
            ["structure", "{vault}", "--threshold", "-2"],
            "hypograph structure: --threshold: must be ≥ -1 and ≤ 1 (got '-2')",
        ),
        (
            ["report", "{run}", "--dupe-threshold", "5"],
            "hypograph report: --dupe-threshold: must be ≥ 0 and ≤ 1 (got '5')",
        ),
        (
            ["library", "{run}", "--topic", "t", "--n-behaviors", "0"],
            "hypograph library: --n-behaviors: must be ≥ 1 and ≤ 100 (got '0')",
        ),
        (
            ["library", "{run}", "--topic", "t", "--banlist-budget", "10"],
            "hypograph library: --banlist-budget: must be ≥ 200 (got '10')",
        ),
        (["library", "{run}", "--topic", "t", "--rounds", "-1"], "hypograph library: --rounds: must be ≥ 0 (got '-1')"),
        (["library", "{run}", "--topic", " "], 'hypograph library: a topic is required: --topic "…"'),
        (
            ["proximity", "{run}", "--threshold", "high"],
            "hypograph proximity: --threshold: must be a number ≥ -1 and ≤ 1 (got 'high')",
        ),
        (
            ["structure", "{vault}", "--backend", "word2vec"],
            "hypograph structure: --backend: input should be 'tfidf' or 'sbert' (got 'word2vec')",
        ),
    ],
    ids=[
        "threshold",
        "dupe",
        "nan",
        "structure",
        "report",
        "n-behaviors",
        "banlist",
        "rounds",
        "topic",
        "not-a-number",
        "not-a-choice",
    ],
)
def test_a_setting_out_of_range_is_one_line_before_any_run_exists(tmp_path, argv, line):
    """Every command that takes a ranged setting refuses a bad value through its product's settings
    model: one line naming the flag and what it allows, exit 1, and no Dagster instance is even
    opened (so no run exists and nothing turns red in the UI)."""
    roots = {"run": copy_tree(EXAMPLE_RUN, tmp_path / "run"), "vault": copy_tree(EXAMPLE_VAULT, tmp_path / "vault")}
    before = snapshot(tmp_path / "run")
    args = [a.format(**roots) for a in argv]
    proc = hypograph(*args, env=env(tmp_path))
    assert (proc.returncode, proc.stderr.splitlines(), proc.stdout) == (1, [line], "")
    assert not (tmp_path / "dagster-home").exists()
    assert snapshot(tmp_path / "run") == before


def test_structure_check_failure_names_the_node_and_reason(tmp_path):
    from test_structure_checks import Editor, cluster_with_one_member

    vault = copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
    environ = env(tmp_path)
    done = in_process("structure", vault, "--llm", "offline", env=environ)  # structured: not what is tested
    assert done.returncode == 0, done.stderr
    cluster_with_one_member(Editor(vault))
    proc = hypograph("structure", vault, "--llm", "offline", env=environ)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("hypograph structure: check "), lines
    assert any(line.strip().startswith("H-") and ": " in line for line in lines[1:]), lines


def test_ui_on_a_busy_port_is_one_line_and_starts_nothing(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.perf_counter()
        proc = hypograph("ui", "--port", port, env=env(tmp_path), timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and f"127.0.0.1:{port} is busy" in proc.stderr, proc.stderr
    assert time.perf_counter() - started < 30  # refused before the webserver or daemon started
    assert not (tmp_path / "dagster-home").exists()  # not even the instance was opened


def test_the_review_queue_lists_the_twenty_most_similar_pairs_and_says_how_many_more(tmp_path, capsys):
    """At scale the queue runs to thousands of pairs: the summary shows the 20 most similar with
    their titles and says where the rest are, from what the run recorded (``dedup_verdicts``'
    ``summary``), not from the files."""
    from types import SimpleNamespace

    from conftest import write_json_hypothesis

    from assets.proximity.metadata import verdict_summary
    from hypograph.hypotheses import load_corpus
    from hypograph.proximity.adjudicate import Decision
    from hypograph_cli.summaries import print_review_queue, verdicts

    root = tmp_path / "run"
    for i in range(50):
        write_json_hypothesis(root, f"H-{i:04d}", title=f"Title {i}", statement=f"Statement {i}.")
    flags = [
        Decision(
            pair=(f"H-{2 * i:04d}", f"H-{2 * i + 1:04d}"),
            similarity=0.86 + i / 1000,
            verdict="FLAG",
            rationale="close",
            recommended_action="review",
            decided_by="policy",
        )
        for i in range(25)
    ]
    summary = verdict_summary([], flags, load_corpus(root).hypotheses).value
    print_review_queue(SimpleNamespace(path=str(root), **verdicts(summary)))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("25 pair(s) wait for your review")
    shown = lines[1:21]
    assert [line.split()[0] for line in shown] == [f"{0.86 + i / 1000:.4f}" for i in range(24, 4, -1)]
    assert shown[0].endswith('H-0048 "Title 48"  /  H-0049 "Title 49"'), shown[0]
    assert lines[21] == f"  … and 5 more, every one in {root / 'proximity' / 'verdicts.json'} (FLAG)"
    assert len(lines) == 22
