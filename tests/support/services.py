"""Long-running processes a test starts (``hypograph ui``, ``dagster-daemon``) and stops again, a
free port for one, and the web UI's GraphQL endpoint.

Dagster's processes stop on SIGTERM by mapping it to SIGINT's handler; a process started from a
shell's background job inherits SIGINT *ignored*, and would then ignore SIGTERM too. So each
service starts with SIGINT at its default (set by a small Python launcher that then execs the
service: a ``preexec_fn`` is not safe while the test runs threads), in its own process group (its
children with it), and is stopped with SIGTERM, then SIGKILL for the group if it has not exited in
time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

# The code location (workspace.yaml) and the Launchpad's launch of a job, as the web UI sends them
REPOSITORY = {"repositoryLocationName": "hypograph", "repositoryName": "__repository__"}
LAUNCH = """mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""

# SIGINT back to its default, then exec the service in the same process (same pid, same group)
_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])"
)


def start(args: list, log: Path, env: dict, cwd: Path | None = None) -> subprocess.Popen:
    """Start ``args`` with stdout and stderr to ``log`` (a file: a chatty server never blocks)."""
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-c", _DEFAULT_SIGINT, *(str(a) for a in args)],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(process: subprocess.Popen, seconds: float = 60) -> None:
    """SIGTERM to the service (it stops its children), SIGKILL to its whole group if it hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=seconds)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # whatever of the group is left (a run's helpers)
    process.wait(timeout=10)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def graphql(port: int, query: str, variables: dict | None = None, seconds: float = 30) -> dict:
    """The ``data`` of ``query`` posted to the web UI on ``port``; raises on a GraphQL error."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=seconds) as response:
        body = json.loads(response.read())
    if body.get("errors"):
        raise RuntimeError(f"GraphQL: {body['errors']}")
    return body["data"]
