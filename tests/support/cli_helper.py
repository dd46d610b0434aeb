"""The one way the tests start the command-line tools.

* ``hypograph(...)``, ``prox(...)``, ``start_hypograph(...)``: the console scripts a user runs, in a
  subprocess (offline by default). For what only a process shows: exit codes and streams as a
  shell sees them (a one-line error with nothing else on stderr), a terminal, a pipe closed early,
  signals, locks held by another process, two commands at once, a fresh or broken instance.
* ``in_process(...)``, ``prox_in_process(...)``: the command's own ``main`` in this process, its
  stdout and stderr captured, ``env`` applied for the call only. The same argument parsing, runs (through
  ``pipelines/launch.py``) and summaries, without starting Python and importing Dagster again: for
  tests that read what a command printed or did, not how its process behaved. Never ``ui`` (it
  replaces the process).
* ``hypograph_main(argv)``, ``prox_main(argv)``: the ``main`` itself, environment and streams as the
  test left them (``capsys``, ``monkeypatch``): its exit code.
* ``in_terminal(...)``: stderr (and stdout) on a pseudo-terminal; ``in_shell(line)``: a shell line
  naming ``{hypograph}``/``{prox}`` (a pipe); ``modules_after(tool, argvs)``: a fresh process runs
  the commands through ``main`` and says what they imported.

No test starts a command any other way (``tests/project/test_one_helper.py`` holds them to it): a new
way to run one is added here, once.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import VENV_BIN, offline_env

HYPOGRAPH = VENV_BIN / "hypograph"
PROX = VENV_BIN / "prox"


def run(
    *argv, env: dict | None = None, stdin: str = "", timeout: float = 600, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """``argv`` in a subprocess, offline unless ``env`` says otherwise, ``stdin`` its standard input
    (empty: never the test runner's); never raises for an exit code (the callers assert it: many
    expect a refusal)."""
    return subprocess.run(
        [str(a) for a in argv],
        input=stdin,
        capture_output=True,
        text=True,
        env=env or offline_env(),
        timeout=timeout,
        cwd=cwd,
        check=False,
    )


def hypograph(*args, env: dict | None = None, stdin: str = "", timeout: float = 600):
    """``hypograph ARGS`` as a user runs it (the console script, a process of its own)."""
    return run(HYPOGRAPH, *args, env=env, stdin=stdin, timeout=timeout)


def prox(*args, env: dict | None = None, timeout: float = 300):
    """``prox ARGS`` as a user runs it."""
    return run(PROX, *args, env=env, timeout=timeout)


def start_hypograph(*args, env: dict | None = None, **popen) -> subprocess.Popen:
    """``hypograph ARGS`` started, not waited for (no stdin, stdout and stderr piped, text, unless
    ``popen`` says otherwise): for commands that must run at the same time as something else."""
    popen = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **popen}
    return subprocess.Popen([str(HYPOGRAPH), *map(str, args)], env=env or offline_env(), **popen)


def in_process(*args, env: dict | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    """``hypograph ARGS`` through its ``main`` in this process: (exit code, stdout, stderr) as a
    CompletedProcess. ``env`` replaces the environment for the call (``offline_env()`` and the
    session's instance by default); ``stdin`` is the command's standard input."""
    from hypograph_cli.main import main

    return _captured(main, "hypograph", args, env, stdin)


def prox_in_process(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    """``prox ARGS`` through its ``main`` in this process, as ``in_process`` runs ``hypograph``."""
    from hypograph_cli.prox import main

    return _captured(main, "prox", args, env, "")


def _captured(main, name: str, args, env: dict | None, stdin: str) -> subprocess.CompletedProcess:
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        wanted = env or offline_env()
        for key in [k for k in os.environ if k not in wanted]:
            mp.delenv(key)
        for key, value in wanted.items():
            mp.setenv(key, value)
        mp.setattr(sys, "stdin", io.StringIO(stdin))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    return subprocess.CompletedProcess([name, *argv], code, out.getvalue(), err.getvalue())


def hypograph_main(argv: list) -> int:
    """``hypograph``'s ``main(argv)`` in this process, nothing captured or replaced: its exit code."""
    from hypograph_cli.main import main

    return main([str(a) for a in argv])


def prox_main(argv: list) -> int:
    """``prox``'s ``main(argv)`` in this process, nothing captured or replaced: its exit code."""
    from hypograph_cli.prox import main

    return main([str(a) for a in argv])


def in_terminal(
    args: list, environ: dict, stdin: str | None = None, timeout: float = 600, stdout_too: bool = False
) -> tuple[int, str, str]:
    """Run ``hypograph ARGS`` with stderr on a pseudo-terminal (stdout a pipe, or the same terminal
    with ``stdout_too``: then all of it is in the third item); (code, stdout, terminal)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [str(HYPOGRAPH), *map(str, args)],
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=slave if stdout_too else subprocess.PIPE,
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
    out = proc.stdout.read().decode() if proc.stdout is not None else ""
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, out, b"".join(chunks).decode(errors="replace")


def in_shell(line: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``line`` run by bash, ``{hypograph}`` and ``{prox}`` in it the console scripts (a pipe, ``$PIPESTATUS``)."""
    return run("bash", "-c", line.format(hypograph=HYPOGRAPH, prox=PROX), env=env)


# A fresh process: each command line through the tool's main, then (codes, top-level packages imported).
_MODULES_AFTER = """
import json, sys
from hypograph_cli.{module} import main
codes = [main(argv) for argv in json.loads(sys.argv[1])]
print(json.dumps([codes, sorted({{m.split(".")[0] for m, v in sys.modules.items() if v is not None}})]))
"""


def modules_after(tool: str, argvs: list[list], env: dict | None = None) -> tuple[list[int], set[str], str]:
    """``tool`` (hypograph or prox) run on each of ``argvs`` in one fresh process through its
    ``main``: (the exit codes, the top-level packages it had imported, its stderr)."""
    module = {"hypograph": "main", "prox": "prox"}[tool]
    argvs = [[str(a) for a in argv] for argv in argvs]
    proc = run(sys.executable, "-c", _MODULES_AFTER.format(module=module), json.dumps(argvs), env=env)
    codes, modules = json.loads(proc.stdout.strip().splitlines()[-1])
    return codes, set(modules), proc.stderr
