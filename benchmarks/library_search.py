"""What a dead search endpoint costs ``hypograph library`` (issue 34), as whole processes.

One invocation of ``hypograph library DIR --topic … --rounds R --n-behaviors N`` with web grounding
on, in a fresh folder and a throwaway Dagster home: arXiv at a listening socket that accepts and
never answers, OpenAlex at a port nobody listens on; the model is the tests' scripted library model
behind the local OpenAI-compatible stub (``tests/support/library_stub.py``). No network. Printed per run:
the command's wall time and exit code, how many connections the silent endpoint accepted, and
how many searches the command made. ``--code DIR`` runs another checkout's ``hypograph`` (a
worktree of an earlier commit) the same way, for the before / after pair.

Usage::

    .venv/bin/python benchmarks/library_search.py [--behaviors 2] [--rounds 1] [--runs 3] [--code DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests"), str(HERE.parent)]

from library_stub import LibraryModel, behavior  # noqa: E402
from llm_stub import LLMStub, unused_port  # noqa: E402
from record_golden import checkout_hypograph  # noqa: E402

TOPIC = "LLM sycophancy"
LENSES = ["Cross-domain transfer", "Borrow from the human sciences", "Cross-modal transfer", "Reuse past CS results"]


class Silent:
    """A listening socket that accepts connections, counts them, and never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.accepted.append(self.sock.accept()[0])
            except OSError:
                return

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/api/query"

    def close(self):
        for c in self.accepted:
            c.close()
        self.sock.close()


def scripted_rounds(rounds: int, behaviors: int) -> list[dict]:
    """Distinct behaviors for each round (no duplicates: every one is scored, so every one searches)."""
    return [
        {
            "behaviors": [
                behavior(
                    f"Models of family {r}-{k} defer to a user's stated {LENSES[k % 4].lower()} claim in turn {k}.",
                    LENSES[k % 4],
                    tag=f"r{r}b{k}",
                )
                for k in range(behaviors)
            ]
        }
        for r in range(rounds)
    ]


def one_run(command: list[str], env: dict, args) -> dict:
    stub = LLMStub()
    stub.always(LibraryModel(rounds=scripted_rounds(args.rounds, args.behaviors)))
    silent = Silent()
    with tempfile.TemporaryDirectory() as tmp:
        root, home = Path(tmp) / "lib", Path(tmp) / "dagster"
        root.mkdir()
        home.mkdir()
        run_env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("HYPOGRAPH_", "DAGSTER_"))},
            **env,
            "DAGSTER_HOME": str(home),
            "NO_PROXY": "127.0.0.1",
            "HYPOGRAPH_LLM_BASE_URL": stub.url,
            "HYPOGRAPH_LLM_MODEL": "stub-model",
            "HYPOGRAPH_LLM_API_KEY": "sk-bench",
            "HYPOGRAPH_LLM_TIMEOUT": "30",
        }
        argv = [
            *command, "library", str(root), "--topic", TOPIC, "--rounds", str(args.rounds),
            "--n-behaviors", str(args.behaviors), "--search-url", silent.url,
            "--openalex-url", f"http://127.0.0.1:{unused_port()}/works",
        ]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(argv, check=False, env=run_env, capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - start
        searches = sum(
            len(json.loads(p.read_text())["searches"])
            for p in (root / ".hypograph/traces/hypothesis-batch").rglob("*search-*.json")
        )
    out = {"wall_s": round(wall, 2), "exit": done.returncode, "silent_accepted": len(silent.accepted)}
    out["searches"] = searches
    silent.close()
    stub.close()
    if done.returncode:
        out["stderr"] = done.stderr.strip().splitlines()[-1:]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--behaviors", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--code", type=Path, help="another checkout whose hypograph to run")
    args = parser.parse_args()
    command, env = (
        checkout_hypograph(args.code) if args.code else ([str(Path(sys.executable).with_name("hypograph"))], {})
    )
    runs = [one_run(command, env, args) for _ in range(args.runs)]
    for r in runs:
        print(json.dumps(r))
    print(
        f"code {args.code or 'this checkout'}: {args.rounds} round(s) x {args.behaviors} behavior(s), "
        f"median wall {statistics.median(r['wall_s'] for r in runs):.1f} s over {len(runs)} runs"
    )


if __name__ == "__main__":
    main()
