"""Benchmark the sharded similarity graph as a deployment runs it: whole ``dagster`` processes.

For a corpus (``benchmarks/proximity_corpus.py``, ``--profile`` and ``--size``) it materializes
``hypothesis_texts`` and ``hypothesis_embeddings`` once, then ``similarity_graph`` alone under each
configuration, each as ``dagster asset materialize`` in its own process with its own settings:

* ``in-process, 1 shard``: the default (one step; its row blocks in forked workers on every core);
* ``multiprocess, N shards, 1 process``: ``HYPOGRAPH_EXECUTOR=multiprocess``, ``max_concurrent: 1``;
* ``multiprocess, N shards, 2 processes``: the same with ``max_concurrent: 2``.

Each row gives the run's wall seconds (process start to exit: imports, loading the embeddings in
every step, the merge and writing graph.json/graph.npz included), the span of the shard steps
alone (first shard start to last shard end, from the run's event log), and the peak resident
memory of the largest process (``wait4``). The graph's digest is checked equal across rows.

Usage::

    python benchmarks/shards.py --profile dense --size 200000 --shards 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proximity import run_process  # noqa: E402
from proximity_corpus import PROFILES, ensure_run_dir  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def materialize(home: Path, key: str, select: str, executor: str, config: dict) -> dict:
    """One ``dagster asset materialize`` process: wall seconds and peak RSS (MiB, largest process)."""
    env = {**os.environ, "DAGSTER_HOME": str(home), "HYPOGRAPH_EXECUTOR": executor}
    return run_process(
        [
            str(BIN / "dagster"),
            "asset",
            "materialize",
            "-m",
            "pipelines.definitions",
            "--partition",
            key,
            "--select",
            select,
            "--config-json",
            json.dumps(config),
        ],
        env=env,
        cwd=REPO,
    )


def shard_span(home: Path) -> tuple[float, int]:
    """Seconds from the first shard step's start to the last one's end in the newest run, and how many."""
    from dagster import DagsterEventType, DagsterInstance

    instance = DagsterInstance.from_config(str(home))
    run = instance.get_runs(limit=1)[0]
    events = instance.all_logs(run.run_id, of_type={DagsterEventType.STEP_START, DagsterEventType.STEP_SUCCESS})
    shard = [e for e in events if e.step_key and ".similarity_shard[" in e.step_key]
    times = [e.timestamp for e in shard]
    return (max(times) - min(times)) if times else 0.0, len(shard) // 2


def graph_digest(root: Path) -> str:
    return hashlib.sha256((root / "proximity" / "graph.json").read_bytes()).hexdigest()[:12]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=PROFILES, default="dense")
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "hypograph-bench")
    args = parser.parse_args(argv)

    root = ensure_run_dir(args.workdir, args.profile, args.size, args.seed)
    key = str(root.resolve())
    with tempfile.TemporaryDirectory(prefix="hypograph-shards-") as tmp:
        home = Path(tmp)
        env = {**os.environ, "DAGSTER_HOME": str(home)}
        subprocess.run([str(BIN / "hypograph"), "add", key], env=env, check=True, capture_output=True)
        prep = materialize(home, key, "hypothesis_texts,hypothesis_embeddings", "in_process", {})
        print(f"{args.profile} corpus, {args.size:,} hypotheses: texts + embeddings once, {prep['seconds']:.1f} s")
        print()
        print("| configuration | run wall | shard steps | peak memory | graph.json |")
        print("|---|---:|---:|---:|---|")
        rows = [
            ("in-process, 1 shard (forked workers on every core)", "in_process", 1, None),
            (f"multiprocess, {args.shards} shards, 1 process", "multiprocess", args.shards, 1),
            (f"multiprocess, {args.shards} shards, 2 processes", "multiprocess", args.shards, 2),
        ]
        for label, executor, shards, concurrent in rows:
            config = {"resources": {"proximity": {"config": {"shards": shards}}}}
            if concurrent:
                config["execution"] = {"config": {"max_concurrent": concurrent}}
            run = materialize(home, key, "similarity_graph", executor, config)
            span, steps = shard_span(home)
            print(
                f"| {label} | {run['seconds']:.1f} s | {span:.1f} s ({steps} steps) | {run['peak_mib']:.0f} MiB "
                f"| {graph_digest(root)} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
