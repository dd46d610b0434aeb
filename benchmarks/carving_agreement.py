"""Agreement (adjusted Rand index) of the offline step-4b carving with real step-4 runs.

A real run is a vault structured by the seed-000 pipeline with a model (``../shared/examples/vaults``,
copied in ``tests/fixtures/vaults``), or the seed's own micro-example (``tests/fixtures/sahul`` with
the seed's 4a applied: H-127 merged into H-3, H-133 dropped; its carving is one cluster of H-3,
H-11 and H-21). Each vault is put back to the state 4b starts from — the real 4a result as
given: its hypothesis clusters, the members step 4 minted (residuals, constructed) and every
``cluster`` backlink removed — then the proximity chain runs with ``prox``'s defaults (what the
proximity job writes before step 4) and 4b runs offline (``run_clusters(root, OfflinePolicy())``).
The ARI compares the paper hypotheses' offline clusters with their real ones (``sklearn``), and
the table also says how many clusters each has.

    .venv/bin/python benchmarks/carving_agreement.py [--json] [--tfidf]

``--tfidf``: as if the sentence model were missing (the carving's TF-IDF fallback).

The demo vault (``examples/vault``) has no real run: it is where the offline carving was tuned
(its two near-duplicates share a cluster, its two reworded questions are one cluster), and every
vault in this table is held out from that tuning.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from hypograph.llm.policy import OfflinePolicy  # noqa: E402
from hypograph.prox_cli import main as prox_main  # noqa: E402
from hypograph.structure.carving import run_clusters  # noqa: E402
from hypograph.vault.node_view import NodeView  # noqa: E402
from hypograph.vault.vault import open_vault  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures"
SAHUL_TRUTH = {"H-3": "HC-1", "H-11": "HC-1", "H-21": "HC-1"}  # the seed's micro-example, after its 4a
VAULTS = {
    "covid1": (FIXTURES / "vaults" / "covid1", None),
    "eggs1": (FIXTURES / "vaults" / "eggs1", None),
    "sahul (seed micro-example)": (FIXTURES / "sahul", SAHUL_TRUTH),
}


def real_clusters(root: Path) -> dict[str, str]:
    """Paper hypothesis id -> the HC id the real run put it in (residuals and constructed left out)."""
    vault = open_vault(root)
    return {
        h.id: NodeView(h).cluster_id
        for h in vault.of_type("hypothesis")
        if NodeView(h).active and not NodeView(h).minted and NodeView(h).cluster_id
    }


def to_4b_input(root: Path, seed_4a: bool) -> None:
    """The vault as 4b finds it: no HC node, no minted member, no backlink (the seed's micro-example:
    its merged and dropped hypotheses taken out of ``hypotheses/``, as its 4a leaves them)."""
    shutil.rmtree(root / "hypothesis-clusters", ignore_errors=True)
    for path in sorted((root / "hypotheses").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        if seed_4a and path.name.startswith(("H-127 ", "H-133 ")) or "\norigin: step-4-" in text:
            path.unlink()
        else:
            head, sep, body = text.partition("\n---\n")
            kept = [line for line in head.splitlines() if not line.startswith("cluster:")]
            path.write_text("\n".join(kept) + sep + body, encoding="utf-8")


def offline_clusters(root: Path) -> dict[str, str]:
    """Paper hypothesis id -> its cluster after the proximity chain and an offline 4b."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for command in ("embed", "graph", "clusters", "dupes"):
            if prox_main([command, "--run-dir", str(root)]) != 0:
                raise SystemExit(f"prox {command} failed on {root}")
    report = run_clusters(root, OfflinePolicy())
    return {m: hc for hc, members in report.clusters.items() for m in members}


def agreement(name: str, source: Path, truth: dict[str, str] | None, tmp: Path) -> dict:
    from sklearn.metrics import adjusted_rand_score

    root = Path(
        shutil.copytree(
            source, tmp / name.split(maxsplit=1)[0], ignore=shutil.ignore_patterns("proximity", ".hypograph")
        )
    )
    truth = truth or real_clusters(root)
    to_4b_input(root, seed_4a=source.name == "sahul")
    offline = offline_clusters(root)
    ids = sorted(truth)
    return {
        "vault": name,
        "hypotheses": len(ids),
        "real_clusters": len(set(truth.values())),
        "offline_clusters": len({offline[i] for i in ids}),
        "ari": round(float(adjusted_rand_score([truth[i] for i in ids], [offline[i] for i in ids])), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON object per vault")
    parser.add_argument("--tfidf", action="store_true", help="the fallback: as if the sentence model were missing")
    args = parser.parse_args()
    if args.tfidf:
        from hypograph.errors import HypographError
        from hypograph.proximity import embed

        def missing(name):
            raise HypographError("--tfidf: sentence model left out")

        embed.sentence_model = missing
    with tempfile.TemporaryDirectory() as tmp:
        rows = [agreement(name, src, truth, Path(tmp)) for name, (src, truth) in VAULTS.items()]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    print("| vault | paper hypotheses | real clusters | offline clusters | ARI |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['vault']} | {r['hypotheses']} | {r['real_clusters']} | {r['offline_clusters']} | {r['ari']:.2f} |")


if __name__ == "__main__":
    main()
