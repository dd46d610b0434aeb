"""Benchmark the proximity chain as a user runs it: four whole ``prox`` processes against the naive chain.

What it measures
----------------
For each corpus size it generates (once, cached under ``--workdir``) a reproducible synthetic run
directory of the chosen shape (``benchmarks/proximity_corpus.py``: ``--profile sparse`` or
``dense``) and runs, each command as its own process, exactly as on the command line:

* ``hypograph``: ``prox embed``, ``prox graph``, ``prox clusters``, ``prox dupes`` (defaults:
  the seed's TF-IDF, every edge at or above 0.30 (no neighbour cap), dupes >= 0.80);
* ``naive``: ``benchmarks/naive_prox.py`` with the same four commands (dense N x N cosine,
  graph.json as a dict of dicts, networkx Louvain), on a second run directory sharing the same
  hypotheses. Skipped above ``--naive-max`` hypotheses (its N x N matrix alone would not fit).

Hypograph's modules are compiled to bytecode first, as ``pip install`` does: under
``PYTHONDONTWRITEBYTECODE=1`` (set on some machines, this one included) an editable checkout
would otherwise compile every module again in every process (~0.03 s each). The naive chain's
libraries are installed, hence compiled, already.

Each chain starts from a run directory without ``proximity/``, as a first run does (a re-run on
unchanged input rewrites nothing, and is not what is measured), and ends with a ``sync``
process, so each pays for flushing its own files (prox fsyncs what it writes, the naive chain
does not: unflushed, its graph.json would be flushed by whatever runs next).

Each chain runs ``--repeat`` times (default 5), the two alternating; each row gives the median
wall seconds of that process and its largest peak resident memory (``ru_maxrss`` from
``wait4``: the largest single process, workers included); ``total`` is the median of the runs'
summed walls. ``time x`` and ``mem x`` are naive over hypograph; below the table, the median and
range of the paired ratios (run k of naive over run k of hypograph). Then:
edges, clusters, duplicate pairs and the recall of the planted paraphrase pairs among each
chain's duplicate pairs.

Other modes:

* ``--cap-study``: for each K in ``--caps``, the capped graph against the uncapped one (K = 0):
  edges kept, agreement of the Louvain communities (adjusted Rand index, NMI), duplicate pairs
  identical or not, graph.json size.
* ``--knn-recall``: synthetic clustered dense embeddings (sentence-embedding-like, 384
  dimensions, 10% near-duplicates): faiss IVF neighbours against exact search, edge and duplicate
  recall and wall seconds.

Usage::

    python benchmarks/proximity.py --profile dense --sizes 20000,100000 [--naive-max 20000] [--json]
    python benchmarks/proximity.py --profile dense --sizes 20000 --cap-study [--caps 10,20,50,100]
    python benchmarks/proximity.py --knn-recall --sizes 50000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proximity_corpus import PROFILES, ensure_run_dir  # noqa: E402

STAGES = ("embed", "graph", "clusters", "dupes")
DUPE_THRESHOLD = 0.80
HERE = Path(__file__).resolve().parent


def prox_command() -> list[str]:
    script = Path(sys.executable).parent / "prox"
    return [str(script)] if script.exists() else [sys.executable, "-m", "hypograph_cli.prox"]


# Linux carries a process's peak RSS into the children it forks (and across exec): a command
# started by this process, once it has grown, would report this process's size as its own peak.
# So commands are started by a small launcher process, started once, that stays ~10 MiB.
LAUNCHER = r"""
import json, os, subprocess, sys, time
for line in sys.stdin:
    job = json.loads(line)
    start = time.perf_counter()
    proc = subprocess.Popen(job["command"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=job["env"], cwd=job["cwd"])
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    print(json.dumps({"seconds": time.perf_counter() - start, "cpu": usage.ru_utime + usage.ru_stime,
                      "peak_mib": usage.ru_maxrss / 1024, "returncode": os.waitstatus_to_exitcode(status),
                      "stderr": stderr.decode(errors="replace").strip()}), flush=True)
"""
_LAUNCHERS: list[subprocess.Popen] = []  # the one launcher, started on first use


def run_process(command: list[str], env: dict | None = None, cwd: Path | None = None) -> dict:
    """Run ``command`` to completion: wall seconds, CPU seconds and peak RSS (MiB) of the process
    (its workers included: the largest single one)."""
    if not _LAUNCHERS:
        _LAUNCHERS.append(
            subprocess.Popen(
                [sys.executable, "-S", "-c", LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
        )
    launcher = _LAUNCHERS[0]
    job = {"command": [str(c) for c in command], "env": env, "cwd": str(cwd) if cwd else None}
    launcher.stdin.write(json.dumps(job) + "\n")
    launcher.stdin.flush()
    result = json.loads(launcher.stdout.readline())
    if result.pop("returncode"):
        raise RuntimeError(f"{' '.join(job['command'])} failed: {result['stderr']}")
    del result["stderr"]
    return result


REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("hypograph", "hypograph_cli", "assets", "pipelines", "resources", "io_managers")


def compile_hypograph() -> None:
    """Write the bytecode of the project's modules, as installing the package does."""
    import compileall

    for package in PACKAGES:
        compileall.compile_dir(REPO / package, quiet=1)


def naive_dir(root: Path) -> Path:
    """A second run directory whose hypotheses/ is the corpus's (a symlink), for the naive chain."""
    other = root.parent / f"{root.name}-naive"
    other.mkdir(exist_ok=True)
    link = other / "hypotheses"
    if not link.exists():
        link.symlink_to(root / "hypotheses", target_is_directory=True)
    return other


def run_chain(approach: str, root: Path) -> dict:
    """The four commands on a run directory without ``proximity/`` (a first run: every file is
    written), then ``sync``: each chain pays for writing its own files to disk (prox fsyncs what it
    writes; the naive chain leaves hundreds of MB of JSON for whoever syncs next)."""
    shutil.rmtree(root / "proximity", ignore_errors=True)
    base = prox_command() if approach == "hypograph" else [sys.executable, str(HERE / "naive_prox.py")]
    stages = [{"stage": s, **run_process([*base, s, "--run-dir", str(root)])} for s in STAGES]
    stages.append({"stage": "sync", **run_process(["sync"])})
    return {"stages": stages, **outcome(root)}


def median_chain(runs: list[dict]) -> dict:
    """One chain's runs as one: each stage's median wall and CPU, and its largest peak."""
    stages = [
        {
            "stage": s["stage"],
            "seconds": float(np.median([r["stages"][k]["seconds"] for r in runs])),
            "cpu": float(np.median([r["stages"][k]["cpu"] for r in runs])),
            "peak_mib": max(r["stages"][k]["peak_mib"] for r in runs),
        }
        for k, s in enumerate(runs[0]["stages"])
    ]
    totals = [sum(s["seconds"] for s in r["stages"]) for r in runs]
    return {**runs[-1], "stages": stages, "runs": len(runs), "total_median": float(np.median(totals)), "totals": totals}


def outcome(root: Path) -> dict:
    """Edges, clusters, duplicate pairs and planted recall of the chain that wrote ``root/proximity``."""
    planted_file = Path(os.path.realpath(root / "hypotheses")).parent / "planted.json"
    planted = {tuple(p) for p in json.loads(planted_file.read_text())}
    d = root / "proximity"
    pairs = {(p["a"], p["b"]) for p in json.loads((d / "dupes.json").read_text()) if p["similarity"] >= DUPE_THRESHOLD}
    clusters = json.loads((d / "clusters.json").read_text())
    edges = None
    if (d / "graph.npz").exists():
        with np.load(d / "graph.npz") as z:
            edges = int(z["src"].size)
    else:
        doc = json.loads((d / "graph.json").read_text())
        edges = sum(len(n["edges"]) for n in doc["nodes"].values()) // 2
    return {
        "edges": edges,
        "clusters": clusters["num_clusters"],
        "dupes": len(pairs),
        "recall": sum(p in pairs for p in planted) / max(len(planted), 1),
        "planted": len(planted),
    }


def totals(run: dict) -> tuple[float, float]:
    """The chain's wall seconds (median of its runs' totals) and its largest peak."""
    return run["total_median"], max(s["peak_mib"] for s in run["stages"])


def table(profile: str, size: int, hyp: dict, naive: dict | None) -> list[str]:
    def ratio(a: float, b: float) -> str:
        return f"{a / b:.1f}x" if b > 0 else "-"

    row = "{:<10} {:>12} {:>10} {:>10} {:>10} {:>8} {:>8}"
    lines = [
        f"== {profile}, {size:,} hypotheses: {hyp['planted']:,} planted paraphrase pairs ==",
        row.format("process", "hypograph s", "peak MiB", "naive s", "peak MiB", "time x", "mem x"),
    ]
    labels = [*STAGES, "sync", "total"]
    hyp_rows = [*hyp["stages"], dict(zip(("seconds", "peak_mib"), totals(hyp), strict=True))]
    naive_rows = (
        [*naive["stages"], dict(zip(("seconds", "peak_mib"), totals(naive), strict=True))]
        if naive
        else [None] * len(labels)
    )
    for label, h, n in zip(labels, hyp_rows, naive_rows, strict=True):
        lines.append(
            row.format(
                label,
                f"{h['seconds']:.2f}",
                f"{h['peak_mib']:.0f}",
                f"{n['seconds']:.2f}" if n else "-",
                f"{n['peak_mib']:.0f}" if n else "-",
                ratio(n["seconds"], h["seconds"]) if n else "-",
                ratio(n["peak_mib"], h["peak_mib"]) if n else "-",
            )
        )
    if naive:  # each naive run over the hypograph run beside it, so a drift of the machine cancels
        paired = sorted(n / h for n, h in zip(naive["totals"], hyp["totals"], strict=True))
        lines.append(
            f"time x of the {len(paired)} paired runs: median {np.median(paired):.1f}x "
            f"(range {paired[0]:.1f}-{paired[-1]:.1f}x)"
        )
    for name, run in (("hypograph", hyp), ("naive", naive)):
        if run:
            lines.append(
                f"{name + ':':<10} {run['edges']:,} edges, {run['clusters']:,} clusters, "
                f"{run['dupes']:,} dupe pairs >= {DUPE_THRESHOLD}, planted recall {run['recall']:.4f}"
            )
    if not naive:
        lines.append(
            f"naive:     skipped (a dense N x N float64 matrix alone would need {size * size * 8 / 2**30:.0f} GiB)"
        )
    return lines


# -- the neighbour cap --------------------------------------------------------------------------


def cap_study(root: Path, caps: list[int], threshold: float = 0.30) -> list[str]:
    """Capped graphs against the uncapped one, on the corpus's embeddings (prox embed first)."""
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    from hypograph.proximity.communities import find_communities
    from hypograph.proximity.dupes import duplicate_pairs
    from hypograph.proximity.graph import similarity_graph
    from hypograph.proximity.graph_files import graph_json_bytes
    from hypograph.proximity.store import read_embeddings

    if not (root / "proximity" / "embeddings.npz").exists():
        run_process([*prox_command(), "embed", "--run-dir", str(root)])
    emb = read_embeddings(root)
    results = {}
    for k in [0, *caps]:
        start = time.perf_counter()
        graph = similarity_graph(emb.ids, emb.rows, threshold, k)
        seconds = time.perf_counter() - start
        membership = find_communities(graph).membership()
        labels = [membership[i] for i in emb.ids]
        results[k] = (
            graph,
            labels,
            {(p.a, p.b, p.similarity) for p in duplicate_pairs(graph, DUPE_THRESHOLD)},
            len(graph_json_bytes(graph)),
            seconds,
        )
    base_graph, base_labels, base_dupes, _, _ = results[0]
    row = "{:>5} {:>10} {:>8} {:>8} {:>7} {:>7} {:>10} {:>9}"
    lines = [
        row.format("K", "edges", "kept", "capped", "ARI", "NMI", "dupes", "json MB"),
        row.format(0, f"{base_graph.num_edges:,}", "1.000", 0, "1.000", "1.000", "exact", f"{results[0][3] / 1e6:.0f}"),
    ]
    for k in caps:
        graph, labels, dupes, size, _ = results[k]
        lines.append(
            row.format(
                k,
                f"{graph.num_edges:,}",
                f"{graph.num_edges / max(base_graph.num_edges, 1):.3f}",
                graph.info["capped_rows"],
                f"{adjusted_rand_score(base_labels, labels):.3f}",
                f"{normalized_mutual_info_score(base_labels, labels):.3f}",
                "identical" if dupes == base_dupes else f"{len(dupes & base_dupes)}/{len(base_dupes)}",
                f"{size / 1e6:.0f}",
            )
        )
    return lines


# -- dense embeddings: faiss against exact --------------------------------------------------------


def knn_recall(size: int, seed: int = 0, dim: int = 384, threshold: float = 0.5, cap: int = 20) -> list[str]:
    """Recall of the faiss IVF graph against the exact one on clustered unit vectors."""
    from hypograph.proximity import graph as graph_mod
    from hypograph.proximity import knn

    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(max(4, size // 400), dim)).astype(np.float32)
    originals = size - size // 10
    x = centers[rng.integers(len(centers), size=originals)] + rng.normal(scale=1.1, size=(originals, dim)).astype(
        np.float32
    )
    copies = x[rng.choice(originals, size=size - originals, replace=False)]
    x = np.vstack([x, copies + rng.normal(scale=0.35, size=copies.shape).astype(np.float32)])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    ids = [f"H-{k + 1}" for k in range(size)]
    out = []
    runs = {}
    for name, limit in (("exact", size + 1), ("faiss", 0)):
        knn.EXACT_MAX = limit
        start = time.perf_counter()
        g = graph_mod.similarity_graph(ids, x, threshold, cap, keep_above=DUPE_THRESHOLD)
        runs[name] = (g, time.perf_counter() - start)
    exact, faiss_g = runs["exact"][0], runs["faiss"][0]
    e_edges = set(zip(exact.src.tolist(), exact.dst.tolist(), strict=True))
    f_edges = set(zip(faiss_g.src.tolist(), faiss_g.dst.tolist(), strict=True))
    e_dupes = {
        e
        for e, s in zip(zip(exact.src.tolist(), exact.dst.tolist(), strict=True), exact.sim.tolist(), strict=True)
        if s >= DUPE_THRESHOLD
    }
    out.append(f"== dense embeddings, {size:,} x {dim}, threshold {threshold}, K {cap} ==")
    out.append(f"exact: {len(e_edges):,} edges, {len(e_dupes):,} pairs >= {DUPE_THRESHOLD}, {runs['exact'][1]:.1f} s")
    out.append(f"faiss: {len(f_edges):,} edges, {runs['faiss'][1]:.1f} s ({faiss_g.info.get('method')})")
    knn.EXACT_MAX = 20_000
    out.append(
        f"edge recall {len(e_edges & f_edges) / max(len(e_edges), 1):.4f}, "
        f"duplicate recall {len(e_dupes & f_edges) / max(len(e_dupes), 1):.4f}"
    )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=PROFILES, default="dense")
    parser.add_argument("--sizes", default="20000,100000", help="comma-separated corpus sizes")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed")
    parser.add_argument("--naive-max", type=int, default=20_000, help="largest size the naive chain runs at")
    parser.add_argument("--workdir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "hypograph-bench")
    parser.add_argument("--json", action="store_true", help="one JSON object per size instead of tables")
    parser.add_argument("--cap-study", action="store_true")
    parser.add_argument("--caps", default="10,20,30,50,100")
    parser.add_argument("--threshold", type=float, default=0.30, help="graph threshold of the cap study")
    parser.add_argument("--knn-recall", action="store_true")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each chain; the table gives medians")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    for size in sizes:
        if args.knn_recall:
            print("\n".join(knn_recall(size, args.seed)), end="\n\n", flush=True)
            continue
        root = ensure_run_dir(args.workdir, args.profile, size, args.seed)
        if args.cap_study:
            print(f"== neighbour cap, {args.profile}, {size:,} hypotheses, threshold {args.threshold} ==")
            print(
                "\n".join(cap_study(root, [int(k) for k in args.caps.split(",")], args.threshold)),
                end="\n\n",
                flush=True,
            )
            continue
        compile_hypograph()
        os.sync()  # the corpus just written is not the first chain's to flush
        hyp_runs, naive_runs = [], []
        for _ in range(args.repeat):  # alternating, so a drift in the machine's speed hits both
            hyp_runs.append(run_chain("hypograph", root))
            if size <= args.naive_max:
                naive_runs.append(run_chain("naive", naive_dir(root)))
        hyp, naive = median_chain(hyp_runs), median_chain(naive_runs) if naive_runs else None
        if args.json:
            print(json.dumps({"profile": args.profile, "size": size, "hypograph": hyp, "naive": naive}), flush=True)
        else:
            print("\n".join(table(args.profile, size, hyp, naive)), end="\n\n", flush=True)


if __name__ == "__main__":
    main()
