"""Run step 4 on a vault in this process, as the assets do, for tests that kill it or run two at once.

    python tests/structure_driver.py VAULT INPUTS.pickle [--steps 4a,4b,map] [--whole] [--run NAME]

``INPUTS.pickle``: proximity's (embeddings, verdicts). Offline policies; the map dated 2000-01-01.
``--whole``: the three steps inside one ``structuring`` block, else each on its own.

``HYPOGRAPH_TEST_KILL_AT=N``: SIGKILL this process just before its N-th write (counted from 1 over
every atomic file write, journal step and mint); ``HYPOGRAPH_TEST_EVENTS=FILE``: append one line
per write (``phase kind path``) to FILE, so a test can choose where to kill.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import pickle
import signal
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hypograph import atomic, journal  # noqa: E402
from hypograph.llm.policy import OfflinePolicy  # noqa: E402
from hypograph.vault import mint  # noqa: E402

PHASE = ["start"]
VAULT: list[str] = []
COUNT = [0]
KILL_AT = int(os.environ.get("HYPOGRAPH_TEST_KILL_AT", "0"))
EVENTS = os.environ.get("HYPOGRAPH_TEST_EVENTS")


def event(kind: str, path) -> None:
    COUNT[0] += 1
    path = str(path)
    if VAULT and os.path.isabs(path):
        path = os.path.relpath(path, VAULT[0])
    if EVENTS:
        with open(EVENTS, "a", encoding="utf-8") as fh:
            fh.write(f"{PHASE[0]} {kind} {path}\n")
    if KILL_AT and COUNT[0] == KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)


def _hook() -> None:
    real_write, real_step, real_create = atomic._write_atomic, journal.apply_step, mint._create_exclusive

    def write(path, fn, fsync=True):
        event("write", path)
        return real_write(path, fn, fsync)

    def step(root, s):
        event("step", s.to)
        return real_step(root, s)

    def create(path, text):
        event("mint", path)
        return real_create(path, text)

    atomic._write_atomic, journal.apply_step, mint._create_exclusive = write, step, create


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("vault", type=Path)
    parser.add_argument("inputs", type=Path)
    parser.add_argument("--steps", default="4a,4b,map")
    parser.add_argument("--whole", action="store_true")
    parser.add_argument("--run")
    args = parser.parse_args()
    VAULT.append(str(args.vault.resolve()))
    _hook()
    from hypograph.structure.carving import run_clusters
    from hypograph.structure.dispositions import run_dispositions
    from hypograph.structure.session import structuring
    from hypograph.structure.structure_map import write_map

    emb, verdicts = pickle.loads(args.inputs.read_bytes())
    steps = {
        "4a": lambda: run_dispositions(args.vault, verdicts, emb, OfflinePolicy()),
        "4b": lambda: run_clusters(args.vault, OfflinePolicy()),
        "map": lambda: write_map(args.vault, dt.date(2000, 1, 1)),
    }

    def run_all() -> None:
        for name in args.steps.split(","):
            PHASE[0] = name
            steps[name]()

    if args.whole:
        with structuring(args.vault, args.run):
            run_all()
    else:
        run_all()


if __name__ == "__main__":
    main()
