"""Read and write prox's files under ``<input>/proximity/`` (seed 003 formats, plus extra keys).

==========================  ==================================================================
file                        content
==========================  ==================================================================
embeddings.npz              TF-IDF: ``scipy.sparse.save_npz`` CSR; sbert: ``numpy.savez`` with
                            one dense float32 array ``embeddings``. Rows L2-normalised.
embedding-ids.json          ids in row order
embedding-meta.json         ``{"backend", "model", "count", "dim", "digest"}`` (Hypograph's addition;
                            the digest of the npz and ids, written last, ties them together)
embedding-vocab.txt         tfidf: the term of each column, one per line (for cluster keywords)
graph.json                  ``{"threshold", "nodes": {id: {"cluster", "edges": [{"target",
                            "similarity"}]}}, "embedding": {"backend", "model"}}``
clusters.json               ``{"clusters": {label: [ids]}, "algorithm", "num_clusters",
                            "labels": {label: keywords}, "embedding": {...}}``
dupes.json                  ``[{"a", "b", "similarity"}]`` (what ``prox dupes`` prints)
==========================  ==================================================================

Keys beyond the seed's (``embedding``, ``labels``) are additions a seed-format reader ignores.
Every write is atomic and skipped when the bytes are unchanged.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from hypograph.atomic import write_atomic, write_json, write_text
from hypograph.errors import HypographError
from hypograph.proximity.communities import Clusters
from hypograph.proximity.dupes import DuplicatePair
from hypograph.proximity.embed import Embeddings
from hypograph.proximity.graph import SimilarityGraph

DIGITS = 4  # similarities are written rounded to 4 decimals, like the seed's examples


def proximity_dir(root: Path | str) -> Path:
    return Path(root) / "proximity"


def _load_json(path: Path, what: str):
    if not path.exists():
        raise HypographError(f"{path}: missing — run {what} first")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise HypographError(f"{path}: not valid JSON ({e})") from None


# -- embeddings ---------------------------------------------------------------------------------

def write_embeddings(root: Path, emb: Embeddings) -> list[Path]:
    d = proximity_dir(root)
    buf = io.BytesIO()
    if sp.issparse(emb.matrix):
        sp.save_npz(buf, emb.matrix.tocsr(), compressed=True)
    else:
        np.savez_compressed(buf, embeddings=np.asarray(emb.matrix, dtype=np.float32))
    vocabulary = "".join(f"{term}\n" for term in emb.vocabulary) if emb.vocabulary is not None else None
    write_atomic(d / "embeddings.npz", lambda fh: fh.write(buf.getvalue()))
    write_json(d / "embedding-ids.json", emb.ids)
    if vocabulary is not None:
        write_text(d / "embedding-vocab.txt", vocabulary)
    # Written last, with a digest of the others: a set half-written by a crashed run is detected.
    write_json(d / "embedding-meta.json", {
        "backend": emb.backend, "model": emb.model, "count": len(emb.ids), "dim": emb.dim,
        "digest": _digest(buf.getvalue(), emb.ids)})
    return [d / f for f in ("embeddings.npz", "embedding-ids.json", "embedding-meta.json", "embedding-vocab.txt")
            if f != "embedding-vocab.txt" or vocabulary is not None]


def _digest(npz: bytes, ids: list) -> str:
    h = hashlib.sha256(npz)
    h.update(json.dumps(ids).encode())
    return h.hexdigest()[:16]


def read_embeddings(root: Path) -> Embeddings:
    d = proximity_dir(root)
    ids = _load_json(d / "embedding-ids.json", "prox embed")
    meta = _load_json(d / "embedding-meta.json", "prox embed") if (d / "embedding-meta.json").exists() else {}
    path = d / "embeddings.npz"
    if not path.exists():
        raise HypographError(f"{path}: missing — run prox embed first")
    with np.load(path, allow_pickle=False) as npz:
        if "embeddings" in npz.files:
            matrix = npz["embeddings"]
        elif "format" in npz.files:
            matrix = sp.load_npz(path).tocsr()
        else:
            raise HypographError(f"{path}: neither a scipy sparse matrix nor a dense 'embeddings' array")
    if not isinstance(ids, list) or len(ids) != matrix.shape[0]:
        raise HypographError(f"{d / 'embedding-ids.json'}: {len(ids) if isinstance(ids, list) else 'no'} ids for {matrix.shape[0]} rows in embeddings.npz")
    vocab_path = d / "embedding-vocab.txt"
    vocab_text = vocab_path.read_text(encoding="utf-8") if vocab_path.exists() and meta.get("backend") == "tfidf" else None
    if "digest" in meta and meta["digest"] != _digest(path.read_bytes(), ids):
        raise HypographError(f"{d}: embeddings.npz and embedding-ids.json do not match the digest in embedding-meta.json "
                             "(not from one run: an interrupted write, or another tool) — run prox embed again")
    backend = meta.get("backend", "tfidf" if sp.issparse(matrix) else "unknown")
    vocabulary = vocab_text.splitlines() if vocab_text is not None else None
    if vocabulary is not None and len(vocabulary) != matrix.shape[1]:
        vocabulary = None  # a prox without embedding-meta digests wrote it: re-tokenize for keywords
    return Embeddings(ids, matrix, backend, meta.get("model", "unknown"), vocabulary)


# -- graph --------------------------------------------------------------------------------------

def graph_document(graph: SimilarityGraph, membership: dict[str, str] | None = None) -> dict:
    """graph.json as a dict: every edge on both endpoints, each list by descending similarity."""
    membership = membership or {}
    adjacency: list[list[tuple[float, str]]] = [[] for _ in graph.ids]
    ids = graph.ids
    for i, j, s in zip(graph.src.tolist(), graph.dst.tolist(), graph.sim.tolist()):
        s = round(s, DIGITS)
        adjacency[i].append((s, ids[j]))
        adjacency[j].append((s, ids[i]))
    nodes = {}
    for k, node_id in enumerate(ids):
        edges = sorted(adjacency[k], key=lambda e: (-e[0], e[1]))
        nodes[node_id] = {"cluster": membership.get(node_id), "edges": [{"target": t, "similarity": s} for s, t in edges]}
    doc = {"threshold": graph.threshold, "nodes": nodes}
    if graph.embedding:
        doc["embedding"] = graph.embedding
    return doc


def write_graph(root: Path, graph: SimilarityGraph) -> Path:
    """Write graph.json; ``cluster`` fields are null unless the graph on disk is this very graph."""
    path = proximity_dir(root) / "graph.json"
    doc = graph_document(graph)
    if path.exists():
        # Same nodes, edges and threshold as on disk: keep its clusters, so a re-run writes nothing.
        old = json.loads(path.read_text(encoding="utf-8"))
        kept = graph_document(graph, {i: n.get("cluster") for i, n in old.get("nodes", {}).items()})
        if kept == old:
            doc = kept
    write_json(path, doc)
    return path


def read_graph(root: Path) -> tuple[SimilarityGraph, dict]:
    """Rebuild the graph (ids in file order, each undirected edge once) and return the raw document."""
    path = proximity_dir(root) / "graph.json"
    doc = _load_json(path, "prox graph")
    try:
        threshold = float(doc["threshold"])
        nodes = doc["nodes"]
        index = {node_id: k for k, node_id in enumerate(nodes)}
        src, dst, sim = [], [], []
        for node_id, node in nodes.items():
            i = index[node_id]
            for e in node["edges"]:
                j = index[e["target"]]
                if i < j:
                    src.append(i), dst.append(j), sim.append(float(e["similarity"]))
    except (KeyError, TypeError, ValueError) as e:
        raise HypographError(f"{path}: not a prox graph ({type(e).__name__}: {e})") from None
    graph = SimilarityGraph(
        list(nodes), threshold, np.asarray(src, dtype=np.int32), np.asarray(dst, dtype=np.int32),
        np.asarray(sim, dtype=np.float32), dict(doc.get("embedding") or {}),
    )
    return graph, doc


# -- clusters -----------------------------------------------------------------------------------

def clusters_document(clusters: Clusters, embedding: dict | None = None) -> dict:
    """clusters.json as a dict: the seed's three keys, then keyword ``labels`` and ``embedding``."""
    doc = {"clusters": clusters.clusters, "algorithm": clusters.algorithm, "num_clusters": clusters.num_clusters, "labels": clusters.keywords}
    if embedding:
        doc["embedding"] = embedding
    return doc


def write_clusters(root: Path, clusters: Clusters) -> list[Path]:
    """Write clusters.json and set each node's ``cluster`` in graph.json (which must exist)."""
    d = proximity_dir(root)
    _, doc = read_graph(root)
    write_json(d / "clusters.json", clusters_document(clusters, doc.get("embedding")))
    membership = clusters.membership()
    for node_id, node in doc["nodes"].items():
        node["cluster"] = membership.get(node_id)
    write_json(d / "graph.json", doc)
    return [d / "clusters.json", d / "graph.json"]


def read_clusters(root: Path) -> Clusters:
    path = proximity_dir(root) / "clusters.json"
    doc = _load_json(path, "prox clusters")
    try:
        return Clusters({k: list(v) for k, v in doc["clusters"].items()}, doc["algorithm"], dict(doc.get("labels") or {}))
    except (KeyError, TypeError, AttributeError) as e:
        raise HypographError(f"{path}: not a prox clusters file ({type(e).__name__}: {e})") from None


# -- dupes --------------------------------------------------------------------------------------

def dupes_document(pairs: list[DuplicatePair]) -> list[dict]:
    return [p.model_dump() for p in pairs]


def write_dupes(root: Path, pairs: list[DuplicatePair]) -> Path:
    path = proximity_dir(root) / "dupes.json"
    write_json(path, dupes_document(pairs))
    return path


def read_dupes(root: Path) -> list[DuplicatePair]:
    return _read_list(root, "dupes.json", DuplicatePair, "prox dupes")


def _read_list(root: Path, name: str, model, producer: str) -> list:
    """A JSON list of ``model`` records from ``proximity/<name>``, written by ``producer``."""
    path = proximity_dir(root) / name
    doc = _load_json(path, producer)
    try:
        return [model.model_validate(item) for item in doc]
    except Exception as e:
        raise HypographError(f"{path}: not a list of {model.__name__} records ({e})") from None


# -- verdicts and cluster names -------------------------------------------------------------------

def write_verdicts(root: Path, decisions: list) -> Path:
    from hypograph.proximity.adjudicate import verdicts_document

    path = proximity_dir(root) / "verdicts.json"
    write_json(path, verdicts_document(decisions))
    return path


def read_verdicts(root: Path) -> list:
    from hypograph.proximity.adjudicate import Decision

    return _read_list(root, "verdicts.json", Decision, "prox adjudicate")


def write_cluster_names(root: Path, names: dict[str, dict]) -> Path:
    path = proximity_dir(root) / "cluster-labels.json"
    write_json(path, names)
    return path


def read_cluster_names(root: Path) -> dict[str, dict]:
    return _load_json(proximity_dir(root) / "cluster-labels.json", "prox label")
