"""The ``hypograph`` front door: a fast --help, stage lines on a terminal, quiet pipes, the cause on
the first line of a failure, a busy port refused."""

from __future__ import annotations

import os
import pty
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helper import HYPOGRAPH as _HYPOGRAPH
from cli_helper import hypograph, in_process
from conftest import EXAMPLE_RUN, EXAMPLE_VAULT, REPO, copy_tree, offline_env, snapshot

HYPOGRAPH = str(_HYPOGRAPH)
HEAVY = ("dagster", "numpy", "scipy", "sklearn", "pydantic")


def env(tmp_path: Path) -> dict[str, str]:
    return {**offline_env(), "DAGSTER_HOME": str(tmp_path / "dagster-home")}


def in_terminal(args: list[str], environ: dict, stdin: str | None = None, timeout: float = 600) -> tuple[int, str, str]:
    """Run ``hypograph ARGS`` with stderr on a pseudo-terminal (stdout a pipe); (code, stdout, stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [HYPOGRAPH, *args],
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=environ,
    )
    os.close(slave)
    if stdin is not None:
        proc.stdin.write(stdin.encode())
        proc.stdin.close()
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out = proc.stdout.read().decode()
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, out, b"".join(chunks).decode(errors="replace")


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
    loaded = loaded_modules(argv)
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_help_lists_every_command_and_takes_well_under_a_second():
    started = time.perf_counter()
    proc = subprocess.run([HYPOGRAPH, "--help"], capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - started
    for command in ("proximity", "structure", "check", "unmerge", "create-node", "library", "case", "batch", "ui"):
        assert command in proc.stdout
    assert seconds < 2.0, seconds  # 0.05 s of CPU measured; the bound allows a loaded machine


def stage_lines(stderr: str) -> list[str]:
    """The finished stages, ``name: ... in N.NN s`` (a start is rewritten in place by its end)."""
    parts = stderr.replace("\x1b[K", "").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [part for part in parts if part.endswith(" s") and " in " in part]


def test_proximity_in_a_terminal_prints_stage_lines_and_the_run_id(tmp_path):
    run = copy_tree(EXAMPLE_RUN, tmp_path / "run")
    code, out, err = in_terminal(["proximity", str(run), "--llm", "offline"], env(tmp_path))
    assert code == 0, err
    stages = stage_lines(err)
    for name in ("hypothesis_texts", "proximity_clusters", "duplicate_pairs", "proximity run", "hypograph proximity"):
        assert any(line.startswith(name) for line in stages), (name, stages)
    assert "succeeded" in err and "make ui" in err
    assert out.startswith(f"{run}: 30 hypotheses")
    quiet = in_terminal(["proximity", str(run), "--llm", "offline", "--quiet"], env(tmp_path))
    assert quiet[0] == 0 and quiet[2] == "", quiet[2]


def test_vault_commands_in_a_terminal_print_their_stage_and_start_no_run(tmp_path):
    vault = copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
    environ = env(tmp_path)
    code, out, err = in_terminal(["check", str(vault)], environ)
    assert code in (0, 1) and "check 1: " in out  # the unstructured example fails step 4's checks
    assert any(line.startswith("hypograph check: done in") for line in stage_lines(err)), err
    body = "---\nstate: active\nid: {{ID}}\n---\nA new claim of {{ID}}.\n"
    code, out, err = in_terminal(["create-node", str(vault), "--type", "hypothesis", "--title", "New"], environ, body)
    assert code == 0, err
    assert any(line.startswith("hypograph create-node: done in") for line in stage_lines(err)), err
    assert not (tmp_path / "dagster-home" / "history").exists()  # no Dagster run, no instance opened


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
    shell = f'{HYPOGRAPH} proximity {run} --llm offline | head -1; echo "code=${{PIPESTATUS[0]}}"'
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, check=False, text=True, env=environ)
    assert proc.stdout.splitlines()[0].startswith(f"{run}: 30 hypotheses")
    assert "code=0" in proc.stdout
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    library = copy_tree(REPO / "examples" / "library", tmp_path / "library")
    shell = f'{HYPOGRAPH} library {library} --report | head -1; echo "code=${{PIPESTATUS[0]}}"'
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, check=False, text=True, env=environ)
    assert proc.stdout.startswith("topic: ") and "code=0" in proc.stdout, proc.stdout
    assert proc.stderr == "", proc.stderr
    assert (library / ".hypograph" / "input-id").is_file()  # registered, as every command registers its input


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["proximity", "{run}", "--threshold", "30"],
            "hypograph proximity: --threshold: must be ≥ -1 and ≤ 1 (got 30.0)",
        ),
        (
            ["proximity", "{run}", "--dupe-threshold", "5"],
            "hypograph proximity: --dupe-threshold: must be ≥ 0 and ≤ 1 (got 5.0)",
        ),
        (
            ["proximity", "{run}", "--threshold", "nan"],
            "hypograph proximity: --threshold: must be ≥ -1 and ≤ 1 (got nan)",
        ),
        (
            ["structure", "{vault}", "--threshold", "-2"],
            "hypograph structure: --threshold: must be ≥ -1 and ≤ 1 (got -2.0)",
        ),
        (
            ["report", "{run}", "--dupe-threshold", "5"],
            "hypograph report: --dupe-threshold: must be ≥ 0 and ≤ 1 (got 5.0)",
        ),
        (
            ["library", "{run}", "--topic", "t", "--n-behaviors", "0"],
            "hypograph library: --n-behaviors: must be ≥ 1 and ≤ 100 (got 0)",
        ),
        (
            ["library", "{run}", "--topic", "t", "--banlist-budget", "10"],
            "hypograph library: --banlist-budget: must be ≥ 200 (got 10)",
        ),
        (["library", "{run}", "--topic", "t", "--rounds", "-1"], "hypograph library: --rounds: must be ≥ 0 (got -1)"),
        (["library", "{run}", "--topic", " "], 'hypograph library: a topic is required: --topic "…"'),
    ],
    ids=["threshold", "dupe", "nan", "structure", "report", "n-behaviors", "banlist", "rounds", "topic"],
)
def test_a_setting_out_of_range_is_one_line_before_any_run_exists(tmp_path, argv, line):
    """Every command that takes a ranged setting refuses a bad value through its product's settings
    model: one line naming the flag and what it allows, exit 1, and no Dagster instance is even
    opened (so no run exists and nothing turns red in the UI)."""
    roots = {"run": copy_tree(EXAMPLE_RUN, tmp_path / "run"), "vault": copy_tree(EXAMPLE_VAULT, tmp_path / "vault")}
    before = snapshot(tmp_path / "run")
    args = [a.format(**roots) for a in argv]
    proc = subprocess.run([HYPOGRAPH, *args], capture_output=True, check=False, text=True, env=env(tmp_path))
    assert (proc.returncode, proc.stderr.splitlines(), proc.stdout) == (1, [line], "")
    assert not (tmp_path / "dagster-home").exists()
    assert snapshot(tmp_path / "run") == before


def test_structure_check_failure_names_the_node_and_reason(tmp_path):
    sys.path.insert(0, str(REPO / "tests"))
    from test_step4_checks import Editor, cluster_with_one_member

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
