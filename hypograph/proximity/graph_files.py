"""graph.json (the seed's format, written streaming) and graph.npz (the same graph as arrays).

``graph.json`` is what the seed and its users read::

    {"threshold": 0.3, "max_neighbours": 50, "embedding": {...},
     "nodes": {"H-1": {"cluster": "C-01", "edges": [{"target": "H-2", "similarity": 0.923077}, ...]}, ...}}

one node per line, each edge on both endpoints, each node's edges by descending similarity then
target id (plain string order, as the seed sorts them). It is written from arrays, node by node,
never as a dict of dicts in memory.

``graph.npz`` (numpy, uncompressed) holds ``ids``, ``src``/``dst``/``sim`` (each undirected edge
once, src < dst), ``cluster`` (index into the meta's ``clusters`` list, -1 for none) and ``meta``
(JSON: threshold, embedding, info, and the sha256 of the graph.json it was written with). The
chain's later stages read the npz when that digest matches graph.json; a graph.json written or
edited by another tool no longer matches, and is parsed instead.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from hypograph.atomic import DATA_MAX, open_regular, read_regular, write_atomic
from hypograph.errors import HypographError
from hypograph.proximity.graph import SimilarityGraph
from hypograph.proximity.npz import npz_bytes

FORMAT = "hypograph-graph/1"
GRAPH_JSON = "graph.json"
GRAPH_NPZ = "graph.npz"


def graph_json_bytes(graph: SimilarityGraph, clusters: list[str | None] | None = None) -> bytes:
    """The graph.json text of ``graph``; ``clusters[i]`` is node i's cluster label (or None)."""
    return b"".join(graph_json_chunks(graph, clusters))


CLUSTER_KEY = b': {"cluster": '


def graph_json_chunks(
    graph: SimilarityGraph,
    clusters: list[str | None] | None = None,
    offsets: np.ndarray | None = None,
    entries_per_chunk: int = 200_000,
):
    """graph.json as a stream of byte chunks, built ``entries_per_chunk`` directed edges at a time
    (in worker processes when there are several chunks). ``offsets``, if given, receives the byte
    offset of each node's cluster value."""
    from hypograph.proximity.forks import available_cpus, fork_map  # writers only: readers start light

    n = len(graph.ids)
    head = {"threshold": graph.threshold}
    if "max_neighbours" in graph.info:
        head["max_neighbours"] = graph.info["max_neighbours"]
    if graph.embedding:
        head["embedding"] = graph.embedding
    first = json.dumps(head).encode()[:-1] + b', "nodes": {'
    yield first
    pos = len(first)
    rows, cols, sims = _directed(graph)
    bounds = np.searchsorted(rows, np.arange(n + 1)).tolist()
    quoted = _json_strings(graph.ids)
    cluster_text = _json_strings(clusters) if clusters is not None else [b"null"] * n
    spans, k = [], 0
    while k < n:  # nodes [k, m) hold about entries_per_chunk directed edges
        m = min(n, max(k + 1, int(np.searchsorted(bounds, bounds[k] + entries_per_chunk, side="right")) - 1))
        spans.append((k, m))
        k = m
    tasks = [
        _NodesText(
            k, cols[bounds[k] : bounds[m]], sims[bounds[k] : bounds[m]], bounds[k : m + 1], quoted, cluster_text[k:m]
        )
        for k, m in spans
    ]
    for (k, m), (piece, starts) in zip(spans, fork_map(_nodes_text, tasks, available_cpus()), strict=True):
        if offsets is not None:
            offsets[k:m] = pos + starts
        pos += len(piece)
        yield piece
    yield b"\n}}\n" if n else b"}}\n"


@dataclass(frozen=True)
class _NodesText:
    """What one chunk of graph.json is written from: nodes ``first`` .. ``first + len(clusters)``,
    their directed edges ``cols``/``sims`` (``bounds``: each node's first edge, from the chunk's
    first node's), every node's quoted id, and these nodes' cluster values as JSON."""

    first: int
    cols: np.ndarray
    sims: np.ndarray
    bounds: list[int]
    quoted: list[bytes]
    clusters: list[bytes]


def _nodes_text(task: _NodesText) -> tuple[bytes, np.ndarray]:
    """The text of the task's nodes and where each one's cluster value starts in it."""
    sims, quoted, base = task.sims, task.quoted, task.bounds[0]
    sim_text = orjson.dumps(sims.tolist())[1:-1].split(b",") if sims.size else []
    for e in np.flatnonzero((np.abs(sims) < 1e-4) & (sims != 0)).tolist():
        sim_text[e] = repr(float(sims[e])).encode()  # 9.6e-05 as json writes it, not orjson's 0.000096
    entries = [
        b'{"target": ' + quoted[c] + b', "similarity": ' + t + b"}"
        for c, t in zip(task.cols.tolist(), sim_text, strict=True)
    ]
    out, starts, pos = [], np.empty(len(task.clusters), dtype=np.int64), 0
    for local, cluster in enumerate(task.clusters):
        node = task.first + local
        head_text = (b"\n" if node == 0 else b",\n") + quoted[node] + CLUSTER_KEY
        starts[local] = pos + len(head_text)
        edges = b", ".join(entries[task.bounds[local] - base : task.bounds[local + 1] - base])
        piece = head_text + cluster + b', "edges": [' + edges + b"]}"
        out.append(piece)
        pos += len(piece)
    return b"".join(out), starts


def splice_clusters(
    text: bytes, offsets: np.ndarray, old: list[str | None], new: list[str | None]
) -> tuple[list[bytes | memoryview], np.ndarray]:
    """graph.json ``text`` with each node's cluster value ``old[i]`` (at ``offsets[i]``) replaced by
    ``new[i]``, as pieces to write in order (views of ``text`` between the new values: nothing is
    copied), and the new offsets: setting the clusters without rebuilding the edges' text."""
    old_text, new_text = _json_strings(old), _json_strings(new)
    view = memoryview(text)
    pieces, start = [], 0
    for at, before, after in zip(offsets.tolist(), old_text, new_text, strict=True):
        if view[at : at + len(before)] != before:
            raise ValueError("graph.json does not hold the expected cluster value")
        pieces.append(view[start:at])
        pieces.append(after)
        start = at + len(before)
    pieces.append(view[start:])
    growth = np.fromiter(
        (len(b) - len(a) for a, b in zip(old_text, new_text, strict=True)), dtype=np.int64, count=len(old_text)
    )
    return pieces, offsets + np.concatenate([[0], np.cumsum(growth)[:-1]]).astype(np.int64)


def _json_strings(values: list) -> list[bytes]:
    """Each value as JSON text (one orjson call when no value holds a comma to split on)."""
    if values and not any("," in v for v in values if isinstance(v, str)):
        return orjson.dumps(values)[1:-1].split(b",")
    return [orjson.dumps(v) for v in values]


def _directed(graph: SimilarityGraph):
    """Every edge from both endpoints, ordered by node, then descending similarity, then target id
    (plain string order)."""
    from hypograph.proximity.similarity import strongest_first

    n = len(graph.ids)
    rows = np.concatenate([graph.src, graph.dst]).astype(np.int64)
    cols = np.concatenate([graph.dst, graph.src]).astype(np.int64)
    sims = np.concatenate([graph.sim, graph.sim])
    string_rank = np.empty(n, dtype=np.int64)
    string_rank[sorted(range(n), key=graph.ids.__getitem__)] = np.arange(n)
    order = strongest_first(rows, string_rank[cols], sims, n)  # sims are rounded to 6 decimals
    return rows[order], cols[order], sims[order]


def write_graph_files(d: Path, graph: SimilarityGraph, clusters: list[str | None] | None = None) -> list[Path]:
    """Write graph.json (streamed, hashed as it goes), then graph.npz carrying its digest. A crash
    between the two leaves a digest that does not match, so readers fall back to graph.json."""
    digest = hashlib.sha256()
    offsets = np.zeros(len(graph.ids), dtype=np.int64)

    def write(fh) -> None:
        for chunk in graph_json_chunks(graph, clusters, offsets):
            digest.update(chunk)
            fh.write(chunk)

    write_atomic(d / GRAPH_JSON, write)
    _write_npz(d, graph, clusters, offsets, digest.hexdigest())
    return [d / GRAPH_JSON, d / GRAPH_NPZ]


def set_clusters(d: Path, stored: StoredGraph, clusters: list[str | None]) -> list[Path]:
    """Set each node's cluster in graph.json and graph.npz, given the pair as read (``read_graph_npz``):
    the labels are spliced into graph.json's text, the edges are not written again."""
    pieces, offsets = splice_clusters(
        read_regular(d / GRAPH_JSON, DATA_MAX, follow=True), stored.offsets, stored.clusters, clusters
    )
    digest = hashlib.sha256()

    def write(fh) -> None:
        for k in range(0, len(pieces), 8192):  # a few large writes, not two per node
            chunk = b"".join(pieces[k : k + 8192])
            digest.update(chunk)
            fh.write(chunk)

    write_atomic(d / GRAPH_JSON, write)
    _write_npz(d, stored.graph, clusters, offsets, digest.hexdigest())
    return [d / GRAPH_JSON, d / GRAPH_NPZ]


def _write_npz(
    d: Path, graph: SimilarityGraph, clusters: list[str | None] | None, offsets: np.ndarray, digest: str
) -> None:
    labels = sorted({c for c in clusters or [] if c is not None})
    index = {c: k for k, c in enumerate(labels)}
    codes = (
        np.asarray([index[c] if c is not None else -1 for c in clusters], dtype=np.int32)
        if clusters is not None
        else np.full(len(graph.ids), -1, dtype=np.int32)
    )
    meta = {
        "format": FORMAT,
        "threshold": graph.threshold,
        "embedding": graph.embedding,
        "info": graph.info,
        "clusters": labels,
        "graph_json_sha256": digest,
    }
    npz = npz_bytes(
        {
            "ids": np.asarray(graph.ids, dtype=str),
            "src": graph.src.astype(np.int32),
            "dst": graph.dst.astype(np.int32),
            "sim": graph.sim.astype(np.float64),
            "cluster": codes,
            "cluster_offset": offsets.astype(np.int64),
            "meta": np.frombuffer(orjson.dumps(meta), dtype=np.uint8),
        }
    )
    write_atomic(d / GRAPH_NPZ, lambda fh: fh.write(npz))


_DIGESTS: dict[tuple, str] = {}  # (path, inode, size, mtime) -> sha256: each file hashed once per process


def file_sha256(path: Path) -> str:
    st = os.stat(path)
    key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = _hash_file(path)
    return _DIGESTS[key]


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with os.fdopen(open_regular(path, follow=True), "rb") as f:  # a FIFO: one line, never waited on
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class StoredGraph:
    """A graph as read from graph.npz: its nodes' clusters and where graph.json holds them."""

    graph: SimilarityGraph
    clusters: list[str | None]
    offsets: np.ndarray


def read_graph_npz(d: Path) -> StoredGraph | None:
    """The graph from graph.npz, or None when it is missing, unreadable, or not the twin of the
    graph.json beside it."""
    npz_path, json_path = d / GRAPH_NPZ, d / GRAPH_JSON
    if not npz_path.exists() or not json_path.exists():
        return None
    try:
        with os.fdopen(open_regular(npz_path, follow=True), "rb") as fh, np.load(fh, allow_pickle=False) as z:
            meta = orjson.loads(z["meta"].tobytes())
            if meta.get("format") != FORMAT or meta.get("graph_json_sha256") != file_sha256(json_path):
                return None
            ids, src, dst, sim = z["ids"].tolist(), z["src"], z["dst"], z["sim"]
            codes, offsets = z["cluster"], z["cluster_offset"]
    except (OSError, ValueError, KeyError, orjson.JSONDecodeError):
        return None
    labels = meta.get("clusters") or []
    clusters = [labels[c] if c >= 0 else None for c in codes.tolist()]
    graph = SimilarityGraph(
        ids, float(meta["threshold"]), src, dst, sim, dict(meta.get("embedding") or {}), dict(meta.get("info") or {})
    )
    return StoredGraph(graph, clusters, offsets)


def parse_graph_json(path: Path) -> tuple[SimilarityGraph, list[str | None], dict]:
    """A graph.json from any tool: the graph (ids in file order, each edge once), node clusters and
    the raw document. An edge listed on one endpoint only still counts once."""
    try:
        doc = orjson.loads(read_regular(path, DATA_MAX, follow=True))
    except FileNotFoundError:
        raise HypographError(f"{path}: missing — run prox graph first") from None
    except orjson.JSONDecodeError as e:
        raise HypographError(f"{path}: not valid JSON ({e})") from None
    try:
        threshold = float(doc["threshold"])
        nodes = doc["nodes"]
        ids = list(nodes)
        index = {node_id: k for k, node_id in enumerate(ids)}
        src, dst, sim, clusters = [], [], [], []
        for node_id, node in nodes.items():
            i = index[node_id]
            clusters.append(node.get("cluster"))
            for e in node["edges"]:
                j = index[e["target"]]
                if i != j:
                    src.append(min(i, j)), dst.append(max(i, j)), sim.append(float(e["similarity"]))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise HypographError(f"{path}: not a prox graph ({type(e).__name__}: {e})") from None
    src_a, dst_a, sim_a = np.asarray(src, np.int64), np.asarray(dst, np.int64), np.asarray(sim, np.float64)
    key, first = np.unique(src_a * max(len(ids), 1) + dst_a, return_index=True)
    graph = SimilarityGraph(
        ids,
        threshold,
        src_a[first].astype(np.int32),
        dst_a[first].astype(np.int32),
        sim_a[first],
        dict(doc.get("embedding") or {}),
        {"max_neighbours": doc["max_neighbours"]} if isinstance(doc.get("max_neighbours"), int) else {},
    )
    return graph, clusters, doc
