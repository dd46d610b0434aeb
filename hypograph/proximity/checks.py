"""Invariants of the proximity files. Each function returns violations as (id, reason) pairs;
an empty list means the check passed. Used by the blocking asset checks and by the tests."""

from __future__ import annotations

import re

import numpy as np

from hypograph.ids import id_sort_key
from hypograph.proximity.dupes import DuplicatePair
from hypograph.proximity.graph import EPS, SimilarityGraph
from hypograph.proximity.store import DIGITS

# Similarities are written rounded to DIGITS decimals: a kept pair may read up to half a unit low.
TOLERANCE = 0.5 * 10**-DIGITS + EPS

Violation = tuple[str, str]
LABEL_RE = re.compile(r"^C-\d{2,}$")


def embedded_ids_in_graph(embedded_ids: list[str], node_ids) -> list[Violation]:
    """Every embedded id is a graph node, and the graph has no node that was not embedded.
    ``node_ids``: the graph's node ids (graph.json's ``nodes``, or graph.npz's ids)."""
    nodes = set(node_ids)
    out = [(i, "embedded but not a graph node") for i in embedded_ids if i not in nodes]
    known = set(embedded_ids)
    out += [(i, "graph node that was not embedded") for i in nodes if i not in known]
    return out


def graph_symmetric(graph_doc: dict) -> list[Violation]:
    """No self-edges, no edge below the threshold, no duplicate edge, and every edge on both endpoints."""
    nodes, t = graph_doc["nodes"], float(graph_doc["threshold"])
    seen = {}
    out: list[Violation] = []
    for a, node in nodes.items():
        for e in node["edges"]:
            b, s = e["target"], float(e["similarity"])
            if b == a:
                out.append((a, "self-edge"))
            elif b not in nodes:
                out.append((a, f"edge to unknown node {b}"))
            elif s < t - TOLERANCE:
                out.append((a, f"edge to {b} has similarity {s} below threshold {t}"))
            if (a, b) in seen:
                out.append((a, f"edge to {b} listed twice"))
            seen[(a, b)] = s
    for (a, b), s in seen.items():
        back = seen.get((b, a))
        if back is None:
            out.append((a, f"edge to {b} is not listed on {b}"))
        elif abs(back - s) > EPS:
            out.append((a, f"edge to {b} has similarity {s} here and {back} on {b}"))
    return out


def graph_edges_valid(graph: SimilarityGraph) -> list[Violation]:
    """``graph_symmetric`` for a graph held as arrays (graph.npz, each undirected edge once):
    vectorised, so a graph of millions of edges is checked in seconds without parsing graph.json."""
    ids, n = graph.ids, len(graph.ids)
    src, dst, sim = graph.src.astype(np.int64), graph.dst.astype(np.int64), np.asarray(graph.sim, dtype=np.float64)
    out: list[Violation] = []
    if len(set(ids)) != n:
        out.append(("nodes", "a node id is listed twice"))
    if not (src.size == dst.size == sim.size):
        return [*out, ("edges", "source, target and similarity arrays differ in length")]
    unknown = (src < 0) | (src >= n) | (dst < 0) | (dst >= n)
    out += [(str(int(a)), f"edge to unknown node {int(b)}") for a, b in zip(src[unknown], dst[unknown], strict=True)]
    src, dst, sim = src[~unknown], dst[~unknown], sim[~unknown]
    out += [(ids[a], "self-edge") for a in src[src == dst].tolist()]
    low = sim < graph.threshold - TOLERANCE
    out += [
        (ids[a], f"edge to {ids[b]} has similarity {s} below threshold {graph.threshold}")
        for a, b, s in zip(src[low].tolist(), dst[low].tolist(), sim[low].tolist(), strict=True)
    ]
    key = np.minimum(src, dst) * max(n, 1) + np.maximum(src, dst)
    uniq, counts = np.unique(key, return_counts=True)
    out += [(ids[k // n], f"edge to {ids[k % n]} listed twice") for k in uniq[counts > 1].tolist()]
    return out


def clusters_partition(
    clusters: dict[str, list[str]], node_ids: list[str], num_clusters: int | None = None
) -> list[Violation]:
    """Every node in exactly one cluster, labels C-NN numbered 1..k without gaps, no unknown member."""
    out: list[Violation] = []
    where: dict[str, str] = {}
    nodes = set(node_ids)
    for label, members in clusters.items():
        if not LABEL_RE.match(label):
            out.append((label, "label is not of the form C-NN"))
        if not members:
            out.append((label, "empty cluster"))
        for m in members:
            if m in where:
                out.append((m, f"in both {where[m]} and {label}"))
            elif m not in nodes:
                out.append((m, f"member of {label} but not a graph node"))
            where[m] = label
    out += [(m, "in no cluster") for m in node_ids if m not in where]
    expected = [f"C-{k:0{max(2, len(str(len(clusters))))}d}" for k in range(1, len(clusters) + 1)]
    if sorted(clusters) != expected:
        out.append(("clusters", f"labels are not C-01..C-{len(clusters):02d} in sequence"))
    if num_clusters is not None and num_clusters != len(clusters):
        out.append(("clusters", f"num_clusters is {num_clusters} but there are {len(clusters)} clusters"))
    return out


def duplicate_pairs_valid(pairs: list[DuplicatePair], threshold: float) -> list[Violation]:
    """Pairs unique, a before b, at or above threshold, sorted by descending similarity."""
    out: list[Violation] = []
    seen = set()
    for k, p in enumerate(pairs):
        name = f"{p.a}/{p.b}"
        if not id_sort_key(p.a) < id_sort_key(p.b):
            out.append((name, "a does not sort before b"))
        key = frozenset((p.a, p.b))
        if key in seen:
            out.append((name, "pair listed twice"))
        seen.add(key)
        if p.similarity < threshold - TOLERANCE:
            out.append((name, f"similarity {p.similarity} below threshold {threshold}"))
        if k and p.similarity > pairs[k - 1].similarity:
            out.append((name, "not sorted by descending similarity"))
    return out
