"""Run step 4 on a vault in a process of its own, as the assets do, for tests that kill it or run two at once.

    python tests/support/structure_driver.py VAULT INPUTS.pickle [--steps 4a,4b,map] [--whole] [--run NAME]
    python tests/support/structure_driver.py --serve

``INPUTS.pickle``: proximity's (embeddings, verdicts). Offline policies; the map dated 2000-01-01.
``--whole``: the three steps inside one ``structuring`` block, else each on its own.

``HYPOGRAPH_TEST_KILL_AT=N``: SIGKILL this process just before its N-th write (counted from 1 over
every atomic file write, journal step and mint); ``HYPOGRAPH_TEST_EVENTS=FILE``: append one line
per write (``phase kind path``) to FILE, so a test can choose where to kill.

``--serve``: a fork server. It imports what step 4 imports and loads the offline carving's sentence
model once (the most of a run's CPU: torch and the weights), touches no vault, then reads one JSON
request a line on stdin: ``{"argv": [...], "kill_at": N, "events": FILE|null, "log": FILE}`` forks a
child that runs ``main(argv)`` as the command above would (its stdout and stderr to ``log``) and
answers ``{"pid": PID}``; ``{"wait": PID}`` answers ``{"code": C}`` once that child has ended (C as
``Popen.returncode``: ``-9`` for SIGKILL). Each run, killed or not, is still a process of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import pickle
import signal
import sys
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from hypograph import atomic, journal  # noqa: E402
from hypograph.llm.policy import OfflinePolicy  # noqa: E402
from hypograph.vault import mint  # noqa: E402

PHASE = ["start"]
VAULT: list[str] = []
COUNT = [0]
KILL_AT = [int(os.environ.get("HYPOGRAPH_TEST_KILL_AT", "0"))]
EVENTS = [os.environ.get("HYPOGRAPH_TEST_EVENTS")]


def event(kind: str, path) -> None:
    COUNT[0] += 1
    path = str(path)
    if VAULT and os.path.isabs(path):
        path = os.path.relpath(path, VAULT[0])
    if EVENTS[0]:
        with open(EVENTS[0], "a", encoding="utf-8") as fh:
            fh.write(f"{PHASE[0]} {kind} {path}\n")
    if KILL_AT[0] and COUNT[0] == KILL_AT[0]:
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("vault", type=Path)
    parser.add_argument("inputs", type=Path)
    parser.add_argument("--steps", default="4a,4b,map")
    parser.add_argument("--whole", action="store_true")
    parser.add_argument("--run")
    args = parser.parse_args(argv)
    VAULT.append(str(args.vault.resolve()))
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


def _preload() -> None:
    """What a run imports and loads before its first write, done once in the server: no vault read."""
    import sklearn.feature_extraction.text  # noqa: F401 - 4a's offline judge

    import hypograph.structure.carving  # noqa: F401
    import hypograph.structure.dispositions  # noqa: F401
    import hypograph.structure.structure_map  # noqa: F401
    from hypograph.errors import HypographError
    from hypograph.proximity import embed
    from hypograph.structure.carving.offline import ADOPTED

    if ADOPTED.model:
        with contextlib.suppress(HypographError):  # each run falls back (and says so) as a fresh process would
            embed.sentence_model(ADOPTED.model)


def _child(request: dict) -> None:
    """In the forked child: run ``main`` as a fresh ``python structure_driver.py`` would, then exit."""
    code = 1
    try:
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        KILL_AT[0], EVENTS[0] = int(request.get("kill_at") or 0), request.get("events")
        main(request["argv"])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported in the log, as an uncaught exception would be
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    _preload()
    out = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        if "wait" in request:
            _, status = os.waitpid(request["wait"], 0)
            answer = {"code": os.waitstatus_to_exitcode(status)}
        else:
            pid = os.fork()
            if pid == 0:
                _child(request)
            answer = {"pid": pid}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    os._exit(0)  # stdin closed: done (tearing torch down took over a minute on a loaded machine)


if __name__ == "__main__":
    _hook()
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main()
