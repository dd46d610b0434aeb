"""Long-running processes a test starts (``hypograph ui``, ``dagster-daemon``) and stops again.

Dagster's processes stop on SIGTERM by mapping it to SIGINT's handler; a process started from a
shell's background job inherits SIGINT *ignored*, and would then ignore SIGTERM too. So each
service starts with SIGINT at its default, in its own process group (its children with it), and
is stopped with SIGTERM, then SIGKILL for the group if it has not exited in time.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(args: list, log: Path, env: dict, cwd: Path | None = None) -> subprocess.Popen:
    """Start ``args`` with stdout and stderr to ``log`` (a file: a chatty server never blocks)."""
    with open(log, "w") as out:
        return subprocess.Popen(
            [str(a) for a in args],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_default_sigint,
        )


def stop(process: subprocess.Popen, seconds: float = 60) -> None:
    """SIGTERM to the service (it stops its children), SIGKILL to its whole group if it hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # whatever of the group is left (a run's helpers)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)
