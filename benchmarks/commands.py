"""Wall time and peak memory of the commands people run, as whole processes (issue 33): not the
domain functions (``structure.py --time`` and ``proximity.py`` time those).

* ``structure``: ``hypograph structure VAULT --llm offline`` on generated vaults of N step-3
  hypotheses (``structure.build``: the example's thirty claims, site variants and 30% paraphrases),
  a first run (proximity, step 4, proximity again) and a second on the unchanged vault (no run);
  then ``hypograph report VAULT`` (the report job: the pictures).
* ``proximity``: ``hypograph proximity RUN --llm offline`` on a copy of examples/run against its
  yardstick, the four ``prox`` commands (embed, graph, clusters, dupes) one after another on
  another copy, alternating, ``--repeat`` pairs; the ratio is taken pair by pair.

The project's modules are compiled to bytecode first, as ``pip install`` does (under
``PYTHONDONTWRITEBYTECODE=1`` an editable checkout compiles every module it imports again in every
process, which weighs on ``hypograph``, importing Dagster's definitions, more than on ``prox``).
Each command is its own process on a fresh Dagster instance (``DAGSTER_HOME`` in the work
folder), offline; peak memory is the largest process's (``ru_maxrss`` of the children, read by
a launcher so this script's own size never counts).

    .venv/bin/python benchmarks/commands.py [--sizes 500,5000] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO / "benchmarks"))

from proximity import compile_hypograph  # noqa: E402

# Starts one command and prints its wall seconds and its peak RSS (MiB) as JSON: the launcher is
# small, so the children's ru_maxrss is the command's own (Linux carries a parent's peak into a fork).
LAUNCHER = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
wall = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"exit": code, "wall": wall, "peak_mib": peak}))
"""


def timed(argv: list, env: dict) -> dict:
    """One whole process: exit code, wall seconds, peak MiB; raises if it failed."""
    out = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *map(str, argv)], env=env, capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout)
    if result["exit"] != 0:
        raise SystemExit(f"{' '.join(map(str, argv))}: exit {result['exit']}")
    return result


def environment(work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HYPOGRAPH_", "OPENAI_", "DAGSTER_"))}
    home = work / "dagster-home"
    home.mkdir(exist_ok=True)
    return {**env, "DAGSTER_HOME": str(home), "HYPOGRAPH_LLM": "offline", "HF_HUB_OFFLINE": "1"}


def structure_rows(sizes: list[int], work: Path) -> list[dict]:
    import structure

    rows = []
    for n in sizes:
        vault = work / f"vault-{n}"
        structure.build(vault, n)
        env = environment(work)
        first = timed([BIN / "hypograph", "structure", vault, "--llm", "offline"], env)
        again = timed([BIN / "hypograph", "structure", vault, "--llm", "offline"], env)
        report = timed([BIN / "hypograph", "report", vault], env)
        html = (vault / "proximity" / "report.html").stat().st_size / 1e6
        rows.append(
            {
                "hypotheses": n,
                "structure_s": round(first["wall"], 1),
                "structure_peak_mib": round(first["peak_mib"]),
                "unchanged_s": round(again["wall"], 2),
                "report_s": round(report["wall"], 1),
                "report_html_mb": round(html, 2),
            }
        )
        shutil.rmtree(vault)
    return rows


def proximity_row(repeat: int, work: Path) -> dict:
    env = environment(work)
    ours, yardstick = work / "run-a", work / "run-b"
    shutil.copytree(REPO / "examples" / "run", ours)
    shutil.copytree(REPO / "examples" / "run", yardstick)
    walls, prox_walls, ratios = [], [], []
    for _ in range(repeat):
        a = timed([BIN / "hypograph", "proximity", ours, "--llm", "offline", "-q"], env)["wall"]
        b = sum(timed([BIN / "prox", step, "--run-dir", yardstick], env)["wall"] for step in PROX_STEPS)
        walls.append(a)
        prox_walls.append(b)
        ratios.append(a / b)
    return {
        "hypograph_proximity_s": round(statistics.median(walls), 2),
        "four_prox_s": round(statistics.median(prox_walls), 2),
        "ratio": round(statistics.median(ratios), 2),
    }


PROX_STEPS = ("embed", "graph", "clusters", "dupes")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="500,5000", help="vault sizes for structure (default 500,5000)")
    p.add_argument("--repeat", type=int, default=5, help="pairs of the proximity comparison (default 5)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    args = p.parse_args()
    compile_hypograph()
    with tempfile.TemporaryDirectory(prefix="hypograph-commands-") as tmp:
        work = Path(tmp)
        rows = structure_rows([int(s) for s in args.sizes.split(",") if s], work)
        prox = proximity_row(args.repeat, work)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        print(json.dumps(prox))
        return
    print("| hypotheses | `structure` first run | peak | unchanged re-run | `report` | report.html |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['hypotheses']:,} | {r['structure_s']} s | {r['structure_peak_mib']} MiB | {r['unchanged_s']} s "
            f"| {r['report_s']} s | {r['report_html_mb']} MB |"
        )
    print(
        f"\n`hypograph proximity` (examples/run) {prox['hypograph_proximity_s']} s, the four `prox` commands "
        f"{prox['four_prox_s']} s: {prox['ratio']}x (median of {args.repeat} pairs)"
    )


if __name__ == "__main__":
    main()
