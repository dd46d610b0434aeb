"""The naive proximity chain, the baseline of benchmarks/proximity.py: what a straightforward
implementation of the seed's four commands does, one process per command, same files.

    python benchmarks/naive_prox.py embed|graph|clusters|dupes --run-dir D [--threshold T]

* embed: read every ``hypotheses/H-*.json`` with ``json``, ``TfidfVectorizer()``, ``save_npz``;
* graph: ``cosine_similarity`` as a dense N x N matrix, every pair >= 0.30 into a dict of dicts,
  ``json.dump``;
* clusters: ``json.load`` the graph, ``networkx`` Louvain (seeded), ``json.dump`` both files;
* dupes: ``json.load`` the graph, every edge >= 0.80, printed as a JSON array.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def embed(run_dir: Path) -> None:
    import scipy.sparse
    from sklearn.feature_extraction.text import TfidfVectorizer

    docs = [json.loads(p.read_text()) for p in sorted((run_dir / "hypotheses").glob("H-*.json"))]
    texts = [" ".join(d[k] for k in ("title", "statement", "mechanism") if d.get(k)) for d in docs]
    out = run_dir / "proximity"
    out.mkdir(exist_ok=True)
    scipy.sparse.save_npz(out / "embeddings.npz", TfidfVectorizer().fit_transform(texts))
    (out / "embedding-ids.json").write_text(json.dumps([d["id"] for d in docs]))


def graph(run_dir: Path, threshold: float) -> None:
    import numpy as np
    import scipy.sparse
    from sklearn.metrics.pairwise import cosine_similarity

    out = run_dir / "proximity"
    ids = json.loads((out / "embedding-ids.json").read_text())
    sim = cosine_similarity(scipy.sparse.load_npz(out / "embeddings.npz"))
    np.fill_diagonal(sim, -1.0)
    nodes = {}
    for i, node in enumerate(ids):
        js = np.flatnonzero(sim[i] >= threshold)
        edges = sorted(
            ({"target": ids[j], "similarity": round(float(sim[i, j]), 6)} for j in js.tolist()),
            key=lambda e: (-e["similarity"], e["target"]),
        )
        nodes[node] = {"cluster": None, "edges": edges}
    (out / "graph.json").write_text(json.dumps({"threshold": threshold, "nodes": nodes}, indent=2))


def clusters(run_dir: Path) -> None:
    import networkx as nx

    out = run_dir / "proximity"
    doc = json.loads((out / "graph.json").read_text())
    g = nx.Graph()
    g.add_nodes_from(doc["nodes"])
    for a, node in doc["nodes"].items():
        for e in node["edges"]:
            g.add_edge(a, e["target"], weight=e["similarity"])
    communities = sorted(
        (sorted(c) for c in nx.community.louvain_communities(g, weight="weight", seed=42)),
        key=lambda c: (-len(c), c[0]),
    )
    labels = {f"C-{k:02d}": members for k, members in enumerate(communities, start=1)}
    for label, members in labels.items():
        for m in members:
            doc["nodes"][m]["cluster"] = label
    (out / "graph.json").write_text(json.dumps(doc, indent=2))
    (out / "clusters.json").write_text(
        json.dumps({"clusters": labels, "algorithm": "louvain", "num_clusters": len(labels)}, indent=2)
    )


def dupes(run_dir: Path, threshold: float) -> None:
    doc = json.loads((run_dir / "proximity" / "graph.json").read_text())
    pairs = {}
    for a, node in doc["nodes"].items():
        for e in node["edges"]:
            if e["similarity"] >= threshold:
                pairs[tuple(sorted((a, e["target"])))] = e["similarity"]
    out = [{"a": a, "b": b, "similarity": s} for (a, b), s in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))]
    (run_dir / "proximity" / "dupes.json").write_text(json.dumps(out))
    print(json.dumps(out, indent=2))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["embed", "graph", "clusters", "dupes"])
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--threshold", type=float, default=None)
    args = p.parse_args()
    if args.command == "embed":
        embed(args.run_dir)
    elif args.command == "graph":
        graph(args.run_dir, 0.30 if args.threshold is None else args.threshold)
    elif args.command == "clusters":
        clusters(args.run_dir)
    else:
        dupes(args.run_dir, 0.80 if args.threshold is None else args.threshold)


if __name__ == "__main__":
    main()
