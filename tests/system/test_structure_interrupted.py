"""Step 4 killed anywhere, or run twice at once, ends exactly as one uninterrupted run does (issue 21).

A vault of 400 step-3 hypotheses from ``benchmarks/structure.py`` (offline: proximity's auto-merge
pairs that no observation separates are merged, the other pairs recorded KEEP; clusters by question
hint). Step 4 runs in processes of its own (``tests/support/structure_driver.py``: the domain functions the
assets call, no Dagster), each forked by a server that has loaded step 4's imports and sentence
model once (a fresh interpreter spent two thirds of a run's CPU on them), killed with SIGKILL just
before a chosen write: every kind of write of 4a and 4b (the marker, the baseline, the ledger, the
journal's plan file, its first, middle and last step, the carve file, the first and a middle mint,
the map), then run again to the end. Every file of the vault —
nodes, map, ledger and baseline; lock files aside — must be the uninterrupted run's, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import queue
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "tests" / "support" / "structure_driver.py"
sys.path.insert(0, str(REPO / "benchmarks"))

N = 400
LOCKS = (".hypograph/structure.lock", ".create_node.lock")


def digest(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and rel not in LOCKS:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


class Driver:
    """A ``tests/support/structure_driver.py --serve`` fork server: step 4's imports and sentence model loaded
    once; every run it starts is a forked process of its own, killed (or not) on its own."""

    def __init__(self, logs: Path):
        self.logs, self.count = logs, 0
        logs.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER), "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def _ask(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def start(self, root: Path, inputs: Path, kill_at: int = 0, events: Path | None = None, *extra: str):
        """Step 4 on ``root`` in a new process, not waited for: (its pid, its log)."""
        self.count += 1
        log = self.logs / f"run-{self.count}.log"
        argv = [str(root), str(inputs), *extra]
        answer = self._ask({"argv": argv, "kill_at": kill_at, "events": events and str(events), "log": str(log)})
        return answer["pid"], log

    def wait(self, run) -> tuple[int, str]:
        """(exit code as ``Popen.returncode``, stdout and stderr) of a run ``start`` returned."""
        pid, log = run
        code = self._ask({"wait": pid})["code"]
        return code, log.read_text(encoding="utf-8") if log.exists() else ""

    def drive(self, root: Path, inputs: Path, kill_at: int = 0, events: Path | None = None, *extra: str):
        return self.wait(self.start(root, inputs, kill_at, events, *extra))

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    d = Driver(tmp_path_factory.mktemp("driver-logs"))
    yield d
    d.close()


def proximity_inputs(root: Path, path: Path) -> Path:
    import structure  # benchmarks/structure.py

    path.write_bytes(pickle.dumps(structure.proximity(root)))
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory, driver):
    """(step-3 vault, its proximity inputs, the uninterrupted result's digest, the write events)."""
    import structure

    base = tmp_path_factory.mktemp("interrupted")
    step3 = base / "step3"
    structure.build(step3, N)
    inputs = proximity_inputs(step3, base / "inputs.pickle")
    reference = Path(shutil.copytree(step3, base / "reference"))
    events = base / "events.txt"
    code, err = driver.drive(reference, inputs, 0, events)
    assert code == 0, err
    lines = [line.split(" ", 2) for line in events.read_text(encoding="utf-8").splitlines()]
    return step3, inputs, digest(reference), lines


def test_the_uninterrupted_run_merges_keeps_and_clusters(world):
    step3, _, reference, lines = world
    merged = [rel for rel in reference if rel.startswith("hypotheses/merged/")]
    assert merged and any(rel.startswith("hypothesis-clusters/") for rel in reference)
    assert not any(
        rel in reference
        for rel in (".hypograph/structuring.json", ".hypograph/carving.json", ".hypograph/journal.json")
    )
    assert {phase for phase, _, _ in lines} == {"4a", "4b", "map"}


def kill_points(lines: list[list[str]]) -> dict[str, int]:
    """A name -> the 1-based index of the write to die before: each kind of write of each step."""
    points: dict[str, int] = {}
    by_kind: dict[tuple[str, str, str], list[int]] = {}
    for k, (phase, kind, path) in enumerate(lines, start=1):
        where = Path(path).name if ".hypograph" in path or "agent-notes" in path else Path(path).parts[0]
        by_kind.setdefault((phase, kind, where), []).append(k)
    taken: set[int] = set()
    for (phase, kind, where), ks in by_kind.items():
        for label, k in (("first", ks[0]), ("middle", ks[len(ks) // 2]), ("last", ks[-1])):
            if k not in taken:
                taken.add(k)
                points[f"{phase}-{kind}-{where}-{label}"] = k
    return dict(sorted(points.items(), key=lambda kv: kv[1]))


def kill_and_rerun(driver: Driver, step3: Path, inputs: Path, root: Path, kill_at: int) -> dict[str, str] | str:
    """A copy of the step-3 vault at ``root``, step 4 killed before write ``kill_at``, then run again
    to the end: the vault's digest, or why the two runs did not go so."""
    shutil.copytree(step3, root)
    code, err = driver.drive(root, inputs, kill_at)
    if code != -signal.SIGKILL:
        return f"not killed (exit {code}): {err}"
    code, err = driver.drive(root, inputs)
    if code != 0:
        return f"the re-run failed (exit {code}): {err}"
    got = digest(root)
    shutil.rmtree(root)
    return got


def test_killed_at_every_write_point_of_4a_and_4b_the_next_run_ends_as_the_uninterrupted_one(world, driver, tmp_path):
    step3, inputs, reference, lines = world
    points = kill_points(lines)
    assert any(name.startswith("4a-step-hypotheses") for name in points)
    assert any(name.startswith("4b-mint-hypothesis-clusters") for name in points)
    # Two points at a time, each its own vault and its own processes, forked by one server a thread.
    drivers: queue.Queue[Driver] = queue.Queue()
    drivers.put(driver)
    if (os.cpu_count() or 1) > 1:
        drivers.put(Driver(tmp_path / "second-driver-logs"))

    def point(item: tuple[str, int]) -> dict[str, str] | str:
        d = drivers.get()
        try:
            return kill_and_rerun(d, step3, inputs, tmp_path / item[0], item[1])
        finally:
            drivers.put(d)

    try:
        with ThreadPoolExecutor(drivers.qsize()) as pool:
            got = dict(zip(points, pool.map(point, points.items()), strict=True))
    finally:
        while not drivers.empty():
            d = drivers.get()
            if d is not driver:
                d.close()
    assert {name: why for name, why in got.items() if isinstance(why, str)} == {}
    differ = {
        name: sorted(r for r in vault.keys() | reference.keys() if vault.get(r) != reference.get(r))[:5]
        for name, vault in got.items()
        if vault != reference
    }
    assert differ == {}


def test_killed_between_4a_and_4b_a_rerun_on_recomputed_proximity_merges_no_more(world, driver, tmp_path):
    """The issue's reproduction: 4a done, killed before 4b; the re-run's proximity is computed on
    the half-structured vault (its merged nodes gone, so other pairs cross the auto-merge cutoff):
    the re-run still ends as the uninterrupted run, with no KEEP pair under one survivor."""
    step3, inputs, reference, lines = world
    first_4b = next(k for k, (phase, _, _) in enumerate(lines, start=1) if phase == "4b")
    root = Path(shutil.copytree(step3, tmp_path / "vault"))
    code, err = driver.drive(root, inputs, first_4b)
    assert code == -signal.SIGKILL, err
    fresh = proximity_inputs(root, tmp_path / "fresh.pickle")
    code, err = driver.drive(root, fresh)
    assert code == 0, err
    assert digest(root) == reference
    from hypograph.structure.checks import check_7_keep_apart
    from hypograph.vault.vault import open_vault

    assert check_7_keep_apart(open_vault(root)) == []


@pytest.mark.parametrize("whole", [False, True], ids=["step-by-step", "one-lock-over-the-step"])
def test_two_runs_at_once_end_as_one(world, driver, tmp_path, whole):
    step3, inputs, reference, _ = world
    for delay in (0.0, 0.4, 1.2):
        root = Path(shutil.copytree(step3, tmp_path / f"vault-{delay}"))
        extra = ("--whole",) if whole else ()
        a = driver.start(root, inputs, 0, None, *extra, "--run", "A")
        time.sleep(delay)
        b = driver.start(root, inputs, 0, None, *extra, "--run", "B")
        for run in (a, b):
            code, err = driver.wait(run)
            assert code == 0, err
        assert digest(root) == reference, delay


def test_a_step_run_per_process_interleaved_with_another_run_ends_as_one(world, driver, tmp_path):
    """A's 4a, then B's whole step 4 (its proximity recomputed on A's half-structured vault), then
    A's 4b and map: the order two Dagster runs' steps may take."""
    step3, inputs, reference, _ = world
    root = Path(shutil.copytree(step3, tmp_path / "vault"))
    assert driver.drive(root, inputs, 0, None, "--steps", "4a", "--run", "A")[0] == 0
    fresh = proximity_inputs(root, tmp_path / "fresh.pickle")
    assert driver.drive(root, fresh, 0, None, "--run", "B")[0] == 0
    assert driver.drive(root, inputs, 0, None, "--steps", "4b,map", "--run", "A")[0] == 0
    assert digest(root) == reference


def test_a_reader_during_a_structuring_waits_then_refuses_in_one_line_naming_the_run(world, tmp_path, monkeypatch):
    from hypograph.errors import HypographError
    from hypograph.hypotheses import load_corpus
    from hypograph.vault.vault import open_vault

    step3, _, _, _ = world
    root = Path(shutil.copytree(step3, tmp_path / "vault"))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; sys.path.insert(0, sys.argv[2])\n"
                "from hypograph.structure.session import structuring\n"
                "with structuring(sys.argv[1], 'dagster-run-1234'):\n"
                "    print('held', flush=True); time.sleep(30)\n"
            ),
            str(root),
            str(REPO),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setenv("HYPOGRAPH_READ_WAIT", "0.3")
        for read in (lambda: open_vault(root), lambda: load_corpus(root)):
            with pytest.raises(HypographError) as err:
                read()
            message = str(err.value)
            assert "\n" not in message and "run dagster-run-1234 (pid" in message
            assert "structuring this vault" in message
    finally:
        holder.kill()
        holder.wait()
    assert len(open_vault(root).nodes) > N  # free again
