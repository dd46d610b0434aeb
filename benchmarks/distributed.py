"""Benchmark the sharded proximity job on Celery workers (issue 36): whole processes, this machine.

For a corpus (``benchmarks/proximity_corpus.py``: ``--profile``, ``--size``) and each worker count
of ``--workers``, it starts a Redis server and that many Celery workers (one task at a
time each, ``--pool solo`` as ``deploy/`` starts them; each step's peak memory is measured by
``celery_peaks.py``), then runs the
whole ``proximity`` job on the corpus with ``shards`` ranges (``dagster job execute``: the run's
own process orchestrates, every step is a Celery task). Each row gives:

* the run's wall seconds (process start to exit);
* the peak resident memory of the largest step, and of the steps that do not shard (the joins of
  the embeddings and of the graph, the communities over the whole graph, the duplicates), from
  each task's ``getrusage`` (``celery_peaks.py``, imported by the workers);
* the bytes the steps handed to each other: the shard pickles under ``HYPOGRAPH_SHARD_STORAGE`` and
  the assets' files the IO manager wrote to ``proximity/`` (what a step on another machine reads).

The run directory's ``proximity/`` is removed before each run, and the digest of ``graph.json``
is printed so rows can be checked equal.

Usage::

    python benchmarks/distributed.py --profile dense --size 1000000 --workers 1,2 --shards 4
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proximity_corpus import PROFILES, ensure_run_dir  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
UNSHARDED = ("join_embedding_shards", "merge_similarity_shards", "proximity_clusters", "duplicate_pairs")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args: list, log: Path, env: dict) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
            [str(a) for a in args], env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL to the process's group."""
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def services(tmp: Path, root: Path, workers: int) -> tuple[dict, list[subprocess.Popen]]:
    """``root`` registered, Redis and ``workers`` Celery workers started; the environment every
    process of the run shares."""
    port = free_port()
    config = tmp / "celery.yaml"
    settings = yaml.safe_load((REPO / "deploy" / "celery.yaml").read_text(encoding="utf-8"))
    settings["execution"]["config"]["broker"] = f"redis://127.0.0.1:{port}/0"
    settings["execution"]["config"]["backend"] = f"redis://127.0.0.1:{port}/1"
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(Path(__file__).resolve().parent),  # celery_peaks, imported by the workers
        "DAGSTER_HOME": str(tmp / "home"),
        "HYPOGRAPH_EXECUTOR": "celery",
        "HYPOGRAPH_CELERY_CONFIG": str(config),
        "HYPOGRAPH_SHARD_STORAGE": str(tmp / "shards"),
        "HYPOGRAPH_BENCH_PEAKS": str(tmp / "peaks.jsonl"),
        "HYPOGRAPH_LLM": "offline",
    }
    (tmp / "home").mkdir()
    # registered (and the instance's SQLite storage made) before the workers open it
    added = subprocess.run([BIN / "hypograph", "add", root], env=env, check=False, capture_output=True, text=True)
    if added.returncode:
        raise RuntimeError(added.stderr)
    redis = start(
        ["redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--dir", tmp], tmp / "r.log", env
    )
    procs = [redis]
    for k in range(workers):
        # as deploy/systemd/hypograph-worker@.service starts them: one step at a time, free to fork,
        # both queues (the range steps go to `shards`)
        args = [BIN / "celery", "-A", "pipelines.celery_worker", "worker", "--pool", "solo", "-Q", "dagster,shards"]
        args += ["-n", f"w{k}@%h", "-I", "celery_peaks,pipelines.definitions"]
        procs.append(start(args, tmp / f"w{k}.log", env))
    time.sleep(3)
    return env, procs


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def one_run(root: Path, workers: int, shards: int) -> dict:
    """The proximity job on ``root`` with ``workers`` Celery workers: wall, peaks, bytes."""
    shutil.rmtree(root / "proximity", ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="hypograph-celery-") as name:
        tmp = Path(name)
        env, procs = services(tmp, root, workers)
        try:
            (tmp / "run.yaml").write_text(json.dumps({"resources": {"proximity": {"config": {"shards": shards}}}}))
            tags = json.dumps({"dagster/partition": root.name})
            command = [BIN / "dagster", "job", "execute", "-m", "pipelines.definitions", "-j", "proximity"]
            started = time.perf_counter()
            done = subprocess.run(
                [*command, "--tags", tags, "-c", tmp / "run.yaml"],
                check=False,
                env=env,
                cwd=REPO,
                capture_output=True,
                text=True,
            )
            wall = time.perf_counter() - started
            if done.returncode:
                raise RuntimeError(f"the run failed: {done.stderr[-3000:]}")
            peaks = [json.loads(line) for line in (tmp / "peaks.jsonl").read_text().splitlines()]
            return {
                "wall": wall,
                "peaks": peaks,
                "shard_bytes": folder_bytes(tmp / "shards"),
                "asset_bytes": folder_bytes(root / "proximity"),
                "digest": hashlib.sha256((root / "proximity" / "graph.json").read_bytes()).hexdigest()[:12],
            }
        finally:
            for process in reversed(procs):
                stop(process)


def row(profile: str, size: int, workers: int, shards: int, result: dict) -> str:
    peaks = result["peaks"]
    largest = max(peaks, key=lambda p: p["peak_mib"])
    unsharded = {op: max((p["peak_mib"] for p in peaks if op in p["step"]), default=0) for op in UNSHARDED}
    slowest = max(peaks, key=lambda p: p["seconds"])
    return (
        f"| {profile} {size:,} | {workers} | {shards} | {result['wall']:.0f} s | {largest['peak_mib']:.0f} MiB "
        f"({largest['step']}) | {slowest['seconds']:.0f} s ({slowest['step']}) | "
        + " / ".join(f"{unsharded[op]:.0f}" for op in UNSHARDED)
        + f" MiB | {result['shard_bytes'] / 2**20:.0f} MiB + {result['asset_bytes'] / 2**20:.0f} MiB "
        f"| {result['digest']} |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=PROFILES, default="dense")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "hypograph-bench")
    parser.add_argument("--steps", action="store_true", help="also print every step's seconds and peak")
    args = parser.parse_args(argv)

    root = ensure_run_dir(args.workdir, args.profile, args.size, args.seed)
    print("| corpus | workers | shards | run wall | largest step peak | slowest step | peaks: " + " / ".join(UNSHARDED))
    print("| bytes between steps (shard pickles + asset files) | graph.json |", flush=True)
    for workers in [int(w) for w in args.workers.split(",")]:
        result = one_run(root, workers, args.shards)
        print(row(args.profile, args.size, workers, args.shards, result), flush=True)
        if args.steps:
            for p in sorted(result["peaks"], key=lambda p: p["start"]):
                print(f"    {p['step']}: {p['seconds']:.1f} s, {p['peak_mib']:.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
