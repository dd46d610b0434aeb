"""Issue 47, the fresh hostile pass on what the issue changed.

Signals: from the moment a ``hypograph`` command handles SIGTERM to its exit, it never stops
handling it (Python's teardown, seconds long after a run, used to reset it to the default: a
SIGTERM then killed ``hypograph proximity`` with no line, exit -15). A SIGTERM that lands while a
finalizer runs (a gc callback, a ``__del__``; in a step, under Dagster's own handler) ends the
command with its one line and 130 too (Python printed a 6-line "Exception ignored in: ..." block
and the command went on with its work).

The shard files' format and store (what a file planted or mixed up in ``HYPOGRAPH_SHARD_STORAGE``
can do to a step that reads it), read through the IO manager a step reads them with
(``assets/proximity/shard_io.py: ShardFiles``).

Each is refused in one line naming the file, with no more memory than the file's size and no wait:
a deflated member (a zip bomb: 2 MB that inflate to 2 GiB), a member whose array header claims
terabytes, a FIFO, a symlink or a folder where a shard belongs, a shard copied from another run,
and values of the right kinds but the wrong shapes, dtypes or ranges.
"""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import signal
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from cli_helper import hypograph, start_hypograph
from conftest import EXAMPLE_RUN, build_vault, offline_env
from upath import UPath

from assets.proximity.shard_io import ShardFiles
from hypograph.errors import HypographError
from hypograph.proximity import shard_values
from hypograph.proximity.similarity import Block


def sigterm_handled(pid: int) -> bool | None:
    """Whether process ``pid`` catches SIGTERM (its ``SigCgt`` mask, Linux ``/proc``); None once gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    (mask,) = [line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")]
    return bool(int(mask, 16) & (1 << 14))  # bit 14: signal 15


@pytest.mark.parametrize("sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["typed", "a script's background job"])
def test_a_command_handles_sigterm_until_it_exits(tmp_path, sigint):
    """From the first moment it catches SIGTERM to its exit, it never stops catching it. Started with
    SIGINT ignored (``hypograph … &`` in a script), the end of the Dagster run gave SIGTERM
    SIGINT's handler, ignored, ~0.1 s before the exit (seen on a clean clone run that way)."""

    def dispositions() -> None:  # in the child, before it runs Python: as its parent would leave them
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, sigint)

    run = Path(shutil.copytree(EXAMPLE_RUN, tmp_path / "run", ignore=shutil.ignore_patterns("proximity", ".hypograph")))
    proc = start_hypograph("proximity", run, "--llm", "offline", preexec_fn=dispositions)
    seen: list[tuple[float, bool]] = []
    started = time.monotonic()
    while (state := sigterm_handled(proc.pid)) is not None and proc.poll() is None:
        if not seen or seen[-1][1] != state:
            seen.append((round(time.monotonic() - started, 2), state))
        time.sleep(0.002)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    after = [s for _, s in seen[next(k for k, (_, s) in enumerate(seen) if s) :]]
    assert all(after), f"SIGTERM back to its default before the exit: {seen}"


# Loaded first by the command's Python (``sitecustomize`` on its PYTHONPATH). At the first garbage
# collection once the command holds the signals (SIGNAL_WHEN=step: inside a step, Dagster's handler
# installed), the process sends itself SIGTERM from a gc callback or from a ``__del__`` the
# collection runs, and goes on there: Python handles the signal inside the finalizer.
IN_A_FINALIZER = """
import gc, os, signal, sys

WHERE, WHEN, LOG = os.environ["SIGNAL_IN"], os.environ["SIGNAL_WHEN"], os.environ["SIGNAL_LOG"]


def armed():
    signals = sys.modules.get("hypograph_cli.signals")
    if os.path.exists(LOG) or signals is None or "read" not in signals._pipe:
        return False
    handler = getattr(signal.getsignal(signal.SIGINT), "__qualname__", "")
    return WHEN == "any" or handler.startswith("raise_interrupts_as")


def terminate(where):
    with open(LOG, "w") as log:
        log.write(where)
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(200_000):  # the handler runs here, in the finalizer
        pass


class Finalized:
    def __del__(self):
        terminate("__del__")


def collecting(phase, info):
    if phase == "start" and armed():
        if WHERE == "gc callback":
            terminate(WHERE)
        else:  # garbage this collection frees, running its __del__
            cycle = Finalized()
            cycle.me = cycle


gc.callbacks.append(collecting)
"""


@pytest.mark.parametrize(
    "where, command",
    [("gc callback", "check"), ("__del__", "check"), ("gc callback", "check --json"), ("gc callback", "proximity")],
)
def test_a_sigterm_in_a_finalizer_ends_the_command_in_one_line(tmp_path, where, command):
    """Before: "Exception ignored in: <function collecting ...>", the traceback, ``KeyboardInterrupt``
    (in a step: ``DagsterExecutionInterruptedError``) on stderr, the command went on to its end
    (its output printed, the run succeeded), then exit 130."""
    run = Path(shutil.copytree(EXAMPLE_RUN, tmp_path / "run", ignore=shutil.ignore_patterns("proximity", ".hypograph")))
    target = run if command == "proximity" else build_vault(tmp_path / "vault")
    inject, log = tmp_path / "inject", tmp_path / "signalled"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(IN_A_FINALIZER, encoding="utf-8")
    env = {
        **offline_env(),
        "PYTHONPATH": str(inject),
        "SIGNAL_IN": where,
        "SIGNAL_WHEN": "step" if command == "proximity" else "any",
        "SIGNAL_LOG": str(log),
    }
    name, *flags = command.split()
    result = hypograph(name, target, *flags, env=env)

    assert log.read_text() == where  # the signal was sent from inside the finalizer
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 130 and len(lines) == 1, (result.returncode, result.stderr[-3000:])
    assert lines[0].startswith(f"hypograph {name}: interrupted"), lines[0]
    if flags:  # the record, the one document on stdout
        record = json.loads(result.stdout)
        assert (record["exit_code"], record["status"]) == (130, "interrupted"), record
    else:
        assert result.stdout == ""  # it stopped there: the check's findings never printed
    if command == "proximity":  # nothing half-written: the next run takes it up and ends as usual
        again = hypograph("proximity", run, "--llm", "offline")
        assert again.returncode == 0, again.stderr
        json.loads((run / "proximity" / "graph.json").read_text(encoding="utf-8"))


RUN = "0f1e2d3c-aaaa-bbbb-cccc-000000000001"
STEP = "similarity_graph.similarity_shard[0]"
AT = f"{RUN}/{STEP}/result"


@pytest.fixture
def store(tmp_path) -> tuple[ShardFiles, Path]:
    """A shard storage and the path of one step's output in it."""
    files = ShardFiles(base_dir=str(tmp_path / "shards"))
    path = tmp_path / "shards" / AT
    path.parent.mkdir(parents=True)
    return files, path


def read(files: ShardFiles, path: Path):
    return files.load_from_path(None, UPath(str(path)))


def refused(files: ShardFiles, path: Path, *needles: str) -> str:
    with pytest.raises(HypographError) as e:
        read(files, path)
    line = str(e.value)
    assert "\n" not in line and str(path) in line and all(n in line for n in needles), line
    return line


def edges(**arrays) -> dict:
    block = {
        "rows": np.array([0, 1], np.int32),
        "cols": np.array([1, 2], np.int32),
        "sims": np.array([0.5, 0.6], np.float32),
    }
    return {**block, **arrays}


def npz(header: dict, at: str = AT, **arrays) -> bytes:
    """An npz as ``shard_values.dump`` writes it, with any header and arrays."""
    buf = io.BytesIO()
    raw = json.dumps({**header, "at": at}).encode()
    np.savez(buf, header=np.frombuffer(raw, dtype=np.uint8), **arrays)
    return buf.getvalue()


EDGES = {"kind": "edges", "start": 0, "stop": 3, "capped": 0, "info": {}}


def test_a_good_shard_reads_back(store):
    files, path = store
    block = Block(0, 3, *edges().values(), 0)
    path.write_bytes(shard_values.dump((block, {"a": 1}), AT))
    back, info = read(files, path)
    assert info == {"a": 1} and np.array_equal(back.rows, block.rows) and back.sims.dtype == np.float32


def test_a_zip_bomb_is_refused_before_it_is_inflated(store):
    """2 MB deflated that inflate to 2 GiB (an array header that tells the truth about them)."""
    files, path = store
    n = 2 << 30
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("header.npy", _npy(np.frombuffer(json.dumps({**EDGES, "at": AT}).encode(), np.uint8)))
        with z.open("rows.npy", "w", force_zip64=True) as f:
            f.write(_npy_header("|u1", (n,)))
            chunk = bytes(16 << 20)
            for _ in range(n // len(chunk)):
                f.write(chunk)
    assert path.stat().st_size < 4 << 20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    refused(files, path, "compressed")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 256 << 10  # KiB: not inflated


def test_an_array_header_claiming_terabytes_is_refused_not_allocated(store):
    files, path = store
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("header.npy", _npy(np.frombuffer(json.dumps({**EDGES, "at": AT}).encode(), np.uint8)))
        z.writestr("rows.npy", _npy_header("<f8", (10**12,)) + bytes(64))
    refused(files, path, "claims 8000000000000 bytes, it holds 64")


@pytest.mark.parametrize("kind", ["fifo", "symlink to a fifo", "symlink to /dev/zero", "folder"])
def test_what_is_no_regular_file_is_refused_without_waiting(store, kind):
    files, path = store
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        target = path.with_name("fifo") if "fifo" in kind else Path("/dev/zero")
        if "fifo" in kind:
            os.mkfifo(target)
        path.symlink_to(target)
    refused(files, path, "not read")


def test_a_shard_copied_from_another_run_is_refused(store, tmp_path):
    files, path = store
    other = f"{RUN[:-1]}2/{STEP}/result"
    block = Block(0, 3, *edges().values(), 0)
    path.write_bytes(shard_values.dump((block, {}), other))  # the other run's file, copied here
    refused(files, path, f"written for '{other}', not for '{AT}'")


BAD_VALUES = {
    "float positions": (EDGES, edges(rows=np.array([0.5, 1.5]))),
    "one position per edge": (EDGES, edges(rows=np.array([0, 1, 2], np.int32))),
    "a negative row": (EDGES, edges(rows=np.array([0, -7], np.int32))),
    "a negative column": (EDGES, edges(cols=np.array([1, -2], np.int32))),
    "a similarity that is nan": (EDGES, edges(sims=np.array([0.5, np.nan], np.float32))),
    "positions of two dimensions": (EDGES, edges(rows=np.zeros((1, 2), np.int32))),
    "a negative range": ({"kind": "range", "start": -5, "stop": 3}, {}),
    "a range ending before it starts": ({"kind": "range", "start": 9, "stop": 3}, {}),
    "complex similarities": (EDGES, edges(sims=np.array([0.5, 0.6], np.complex64))),
    "a sparse matrix with indices out of its shape": (
        {"kind": "embeddings", "ids": ["a", "b"], "backend": "tfidf", "model": "m", "vocabulary": ["x"],
         "notes": [], "digest": "d", "shape": [2, 1]},
        {"data": np.array([1.0]), "indices": np.array([5], np.int32), "indptr": np.array([0, 1, 1], np.int32)},
    ),
    "dense rows of one dimension": (
        {"kind": "embeddings", "ids": ["a"], "backend": "sbert", "model": "m", "vocabulary": None, "notes": [],
         "digest": "d"},
        {"rows": np.zeros(4, np.float32)},
    ),
}  # fmt: skip


@pytest.mark.parametrize("what", list(BAD_VALUES))
def test_values_of_the_wrong_shape_dtype_or_range_are_refused(store, what):
    files, path = store
    header, arrays = BAD_VALUES[what]
    path.write_bytes(npz(header, **arrays))
    refused(files, path, "refused")


def test_an_object_array_is_refused_and_never_unpickled(store, tmp_path):
    files, path = store
    marker = tmp_path / "ran"
    path.write_bytes(npz(EDGES, **edges(rows=np.array([_Planted(str(marker)), 1], dtype=object))))
    refused(files, path, "object array")
    assert not marker.exists()


class _Planted:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array)
    return buf.getvalue()


def _npy_header(descr: str, shape: tuple) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()
