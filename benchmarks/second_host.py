"""Benchmark the sharded proximity job with its range steps on other machines (issue 44).

The simulated second host of ``tests/system/test_second_host.py``: machine A runs the daemon and the
worker of the queue ``dagster`` (the steps that read or write the input, which only A has); 1 or 2
other machines each run a worker of the queue ``shards`` (the range steps); all share only Redis,
PostgreSQL and an S3 emulator (``moto_server``), each with its own ``DAGSTER_HOME`` and working
folder, with deploy/dagster.yaml and deploy/celery.yaml as they are; where the machine allows, each
remote machine is a network namespace reaching the services by address (``tests/support/netns.py``). For
each count of ``--remote`` it queues one ``proximity`` run on the corpus
(``benchmarks/proximity_corpus.py``) with ``--shards`` ranges and prints: the run's wall seconds
(queued to ended), the bytes the shard store held for the run (its largest total, polled every
second), the bytes each remote machine's veth carried during the run (both ways: shards, the
instance's events, the broker, logs), the step that took longest, the machines that ran the range
steps, and the digest of ``graph.json``.

Usage::

    python benchmarks/second_host.py --profile sparse --size 100000 --remote 1,2 --shards 4
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import netns  # noqa: E402
from proximity_corpus import PROFILES, ensure_run_dir  # noqa: E402
from test_distributed import celery_hosts  # noqa: E402
from test_second_host import Machines  # noqa: E402

REPO = HERE.parent
BIN = Path(sys.executable).parent


def watch(machines, run) -> tuple:
    """The run once it has finished, and the most bytes its shard folder held meanwhile (polled)."""
    most = 0
    while True:
        with machines.instance() as instance:
            run = instance.get_run_by_id(run.run_id)
        if run.is_finished:
            return run, most
        client = machines.s3_client()
        pages = client.get_paginator("list_objects_v2").paginate(
            Bucket="team-bucket", Prefix=f"hypograph/shards/{run.run_id}/"
        )
        most = max(most, sum(o["Size"] for page in pages for o in page.get("Contents", [])))
        time.sleep(1)


def steps(machines, run_id: str) -> dict:
    """The run's longest step (its seconds) and the machines that ran the range steps."""
    with machines.instance() as instance:
        events = [e for e in instance.all_logs(run_id) if e.dagster_event is not None]
    starts = {e.step_key: e.timestamp for e in events if e.dagster_event.event_type_value == "STEP_START"}
    ends = {e.step_key: e.timestamp for e in events if e.dagster_event.event_type_value == "STEP_SUCCESS"}
    longest = max(ends, key=lambda k: ends[k] - starts.get(k, ends[k]))
    hosts = sorted({h.split("@")[0] for k, hs in celery_hosts(events).items() if "_shard[" in k for h in hs})
    return {"longest_step": f"{longest} {ends[longest] - starts[longest]:.1f} s", "range_steps_on": hosts}


def one_run(corpus: Path, remote: int, shards: int) -> dict:
    base = Path(tempfile.mkdtemp(prefix="hypograph-2host-"))
    os.environ["DAGSTER_HOME"] = str(base / "bench-home")  # this process's own (the machines have theirs)
    machines = Machines(base, remote=tuple("bcdefg"[:remote]))
    try:
        machines.start()
        root = base / "a" / "inputs" / corpus.name
        shutil.copytree(corpus, root, ignore=shutil.ignore_patterns("proximity", ".hypograph"))
        env = machines.env["a"]
        added = subprocess.run([BIN / "hypograph", "add", root], env=env, capture_output=True, text=True, check=True)
        key = added.stdout.split(":")[0]
        config = {"resources": {"proximity": {"config": {"shards": shards}}}}
        started = time.monotonic()
        subprocess.run(
            [BIN / "dagster", "job", "launch", "-j", "proximity", "-w", "workspace.yaml"]
            + ["--tags", json.dumps({"dagster/partition": key}), "--config-json", json.dumps(config)],
            cwd=REPO,
            env=env,
            capture_output=True,
            check=True,
        )
        with machines.instance() as instance:
            (run,) = [r for r in instance.get_runs() if r.tags.get("dagster/partition") == key]
        moved = {name: machines.network.moved(name) for name in machines.remote} if machines.network else {}
        run, most = watch(machines, run)
        wall = time.monotonic() - started
        if machines.network:  # what each remote machine's veth carried during the run, both ways
            moved = {name: machines.network.moved(name) - before for name, before in moved.items()}
        return {
            "remote": remote,
            "status": run.status.value,
            "wall_s": round(wall, 1),
            "shard_store_bytes": most,
            "bytes_through_remote_veths": moved or "no network namespaces here: " + str(netns.unavailable()),
            **steps(machines, run.run_id),
            "graph_json": hashlib.sha256((root / "proximity" / "graph.json").read_bytes()).hexdigest()[:12],
        }
    finally:
        machines.stop()
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=PROFILES, default="sparse")
    parser.add_argument("--size", type=int, default=100000)
    parser.add_argument("--remote", default="1,2", help="counts of machines serving the queue `shards`")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "hypograph-bench")
    args = parser.parse_args()
    corpus = ensure_run_dir(args.workdir, args.profile, args.size, 0)
    for remote in (int(n) for n in args.remote.split(",")):
        print(json.dumps(one_run(corpus, remote, args.shards)), flush=True)


if __name__ == "__main__":
    main()
