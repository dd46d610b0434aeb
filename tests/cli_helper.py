"""The one way the tests start the command-line tools.

* ``hypograph(...)``, ``prox(...)``, ``start_hypograph(...)``: the console scripts a user runs, in a
  subprocess (offline by default). For what only a process shows: exit codes and streams as a
  shell sees them (a one-line error with nothing else on stderr), a terminal, a pipe closed early,
  signals, locks held by another process, two commands at once, a fresh or broken instance.
* ``in_process(...)``: ``hypograph``'s own ``main`` in this process, its stdout and stderr
  captured, ``env`` applied for the call only. The same argument parsing, runs (through
  ``pipelines/launch.py``) and summaries, without starting Python and importing Dagster again: for
  tests that read what a command printed or did, not how its process behaved. Never ``ui`` (it
  replaces the process).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
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
