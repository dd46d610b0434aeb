"""Read and write prox's files under ``<input>/proximity/`` (prox formats, plus extra keys).

==========================  ==================================================================
file                        content
==========================  ==================================================================
embeddings.npz              TF-IDF: ``scipy.sparse.save_npz``'s CSR layout (uncompressed: the
                            seed's reader loads it, and 100k rows write in milliseconds); sbert:
                            one dense float32 array ``embeddings``; both written by ``npz.py``
                            (the same bytes on every Python).
embedding-ids.json          ids in row order
embedding-meta.json         ``{"backend", "model", "vectorizer", "count", "dim", "digest"}``
                            (Hypograph's addition; the digest of the npz and ids, written last,
                            ties them together)
embedding-vocab.txt         tfidf: the term of each column, one per line (for cluster keywords)
graph.json, graph.npz       see ``graph_files.py``: the seed's graph.json, and its arrays for the
                            later stages, tied by the digest of graph.json
clusters.json               ``{"clusters": {label: [ids]}, "algorithm", "num_clusters",
                            "labels": {label: keywords}, "embedding": {...}}``
dupes.json                  ``[{"a", "b", "similarity"}]`` (what ``prox dupes`` prints)
==========================  ==================================================================

Keys beyond the seed's (``embedding``, ``labels``, ``max_neighbours``) are additions a seed-format
reader ignores. Every write is atomic and skipped when the bytes are unchanged.

Files another tool wrote are read as the seed reads them: an ``embeddings.npz`` without our
``embedding-meta.json``, or whose digest no longer matches it (the seed's ``prox embed`` replaced
it), has its rows L2-normalised like ``cosine_similarity`` does, and ``Embeddings.notes`` says so.

Id order: ``prox embed`` writes rows in natural id order (H-2 before H-10); graph.json lists nodes
in row order; duplicate pairs and cluster members are in natural id order. For the zero-padded
ids the seed writes (H-0001), that is the plain string order the seed uses.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import orjson

from hypograph.atomic import DATA_MAX, read_regular, read_utf8, write_atomic, write_json, write_text
from hypograph.errors import HypographError
from hypograph.proximity import graph_files
from hypograph.proximity.communities import Clusters
from hypograph.proximity.embed import TFIDF_MODELS, Embeddings
from hypograph.proximity.graph import DIGITS, SimilarityGraph
from hypograph.proximity.npz import csr_npz_bytes, npz_bytes

if TYPE_CHECKING:  # imported by read_dupes: embed, graph and clusters start without it
    from hypograph.proximity.dupes import DuplicatePair

__all__ = ["DIGITS"]


def proximity_dir(root: Path | str) -> Path:
    return Path(root) / "proximity"


def _load_json(path: Path, what: str):
    try:
        return orjson.loads(read_regular(path, DATA_MAX, follow=True))
    except FileNotFoundError:
        raise HypographError(f"{path}: missing — run {what} first") from None
    except orjson.JSONDecodeError as e:
        raise HypographError(f"{path}: not valid JSON ({e})") from None


# -- embeddings ---------------------------------------------------------------------------------


def write_embeddings(root: Path, emb: Embeddings) -> list[Path]:
    """Write the embedding files. embedding-meta.json first says a write is under way and is
    completed last, with the digest of the npz and ids, so a set half-written by a crashed run is
    told apart from one another tool replaced."""
    d = proximity_dir(root)
    if not isinstance(emb.rows, np.ndarray):
        npz = csr_npz_bytes(emb.rows.tocsr())
    else:
        npz = npz_bytes({"embeddings": np.asarray(emb.rows, dtype=np.float32)})
    vocabulary = "".join(f"{term}\n" for term in emb.vocabulary) if emb.vocabulary is not None else None
    emb.digest = _digest(npz, emb.ids)
    meta = {"backend": emb.backend, "model": emb.model, "count": len(emb.ids), "dim": emb.dim, "digest": emb.digest}
    if emb.model in TFIDF_MODELS:
        meta["vectorizer"] = {"class": "sklearn TfidfVectorizer", "arguments": TFIDF_MODELS[emb.model]}
    if not _on_disk(d, emb.digest):
        write_json(d / "embedding-meta.json", {**meta, "digest": None, "writing": True})
        write_atomic(d / "embeddings.npz", lambda fh: fh.write(npz))
        write_json(d / "embedding-ids.json", emb.ids)
    if vocabulary is not None:
        write_text(d / "embedding-vocab.txt", vocabulary)
    write_json(d / "embedding-meta.json", meta)
    return [
        d / f
        for f in ("embeddings.npz", "embedding-ids.json", "embedding-meta.json", "embedding-vocab.txt")
        if f != "embedding-vocab.txt" or vocabulary is not None
    ]


def _on_disk(d: Path, digest: str) -> bool:
    """Whether embeddings.npz and embedding-ids.json on disk already are the set with ``digest``."""
    try:
        npz = read_regular(d / "embeddings.npz", DATA_MAX, follow=True)
        return _digest(npz, orjson.loads(read_regular(d / "embedding-ids.json", DATA_MAX, follow=True))) == digest
    except (OSError, orjson.JSONDecodeError):
        return False


def _digest(npz: bytes, ids: list) -> str:
    h = hashlib.sha256(npz)
    h.update(json.dumps(ids).encode())
    return h.hexdigest()[:16]


def read_embeddings(root: Path) -> Embeddings:
    """The embeddings under ``root``; a file set another tool wrote is read as the seed reads it
    (rows normalised, backend from the matrix) with a note saying so."""
    d = proximity_dir(root)
    path = d / "embeddings.npz"
    if not path.exists():
        raise HypographError(f"{path}: missing — run prox embed first")
    ids = _load_json(d / "embedding-ids.json", "prox embed")
    npz = read_regular(path, DATA_MAX, follow=True)
    with np.load(io.BytesIO(npz), allow_pickle=False) as z:
        if "embeddings" in z.files:
            rows = z["embeddings"]
        elif "format" in z.files:
            rows = _sparse_rows(npz, path)
        else:
            raise HypographError(f"{path}: neither a scipy sparse matrix nor a dense 'embeddings' array")
    if not isinstance(ids, list) or len(ids) != rows.shape[0]:
        raise HypographError(
            f"{d / 'embedding-ids.json'}: {len(ids) if isinstance(ids, list) else 'no'} ids "
            f"for {rows.shape[0]} rows in embeddings.npz"
        )
    meta_path = d / "embedding-meta.json"
    meta = _load_json(meta_path, "prox embed") if meta_path.exists() else {}
    if meta.get("writing"):
        raise HypographError(f"{d}: an interrupted prox embed left its files half-written — run prox embed again")
    digest = _digest(npz, ids)
    if meta.get("digest") == digest:
        vocabulary = None
        vocab_path = d / "embedding-vocab.txt"
        if meta.get("backend") == "tfidf" and vocab_path.exists():
            vocabulary = read_utf8(vocab_path, DATA_MAX).splitlines()
            vocabulary = vocabulary if len(vocabulary) == rows.shape[1] else None
        return Embeddings(
            ids, rows, meta.get("backend", "unknown"), meta.get("model", "unknown"), vocabulary, digest=digest
        )
    why = "no embedding-meta.json" if not meta else "its digest differs from embedding-meta.json"
    return _foreign(path, ids, rows, why, digest)


def _sparse_rows(npz: bytes, path: Path):
    """The rows of a ``save_npz`` file (any scipy format, as a CSR matrix). Raises HypographError
    naming ``path`` when its arrays do not form a matrix."""
    import scipy.sparse as sp  # only where rows are read: prox dupes starts without it

    try:
        rows = sp.csr_matrix(sp.load_npz(io.BytesIO(npz)))
        rows.check_format(full_check=True)
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise HypographError(
            f"{path}: its CSR arrays (data, indices, indptr, shape) do not form a matrix ({e})"
        ) from None
    if not np.issubdtype(rows.dtype, np.number):
        raise HypographError(f"{path}: its CSR arrays (data, indices, indptr, shape) do not form a matrix")
    return rows


def _foreign(path: Path, ids: list, rows, why: str, digest: str) -> Embeddings:
    from hypograph.proximity.similarity import normalise_rows

    values = rows.data if hasattr(rows, "data") and not isinstance(rows, np.ndarray) else rows
    if not np.isfinite(values).all():
        raise HypographError(f"{path}: holds values that are not finite numbers (NaN or infinity)")
    matrix, off = normalise_rows(rows)
    note = f"{path}: written by another tool ({why}): read as the original prox reads it, " + (
        f"{off} of {matrix.shape[0]} rows L2-normalised" if off else "rows already unit length"
    )
    backend = "dense" if isinstance(matrix, np.ndarray) else "tfidf"
    return Embeddings(ids, matrix, backend, "another tool's", None, [note], digest)


# -- graph --------------------------------------------------------------------------------------


def write_graph(root: Path, graph: SimilarityGraph) -> Path:
    """Write graph.json and graph.npz; ``cluster`` fields are null unless the graph on disk is this
    very graph (same nodes, edges, threshold and embedding), whose clusters are then kept."""
    d = proximity_dir(root)
    clusters = None
    old = graph_files.read_graph_npz(d)
    if old is not None and _same_graph(old.graph, graph):
        clusters = old.clusters
    graph_files.write_graph_files(d, graph, clusters)
    return d / graph_files.GRAPH_JSON


def _same_graph(a: SimilarityGraph, b: SimilarityGraph) -> bool:
    return (
        a.ids == b.ids
        and a.threshold == b.threshold
        and a.embedding == b.embedding
        and a.info.get("max_neighbours") == b.info.get("max_neighbours")
        and np.array_equal(a.src, b.src)
        and np.array_equal(a.dst, b.dst)
        and np.array_equal(a.sim, b.sim)
    )


def load_graph(root: Path) -> tuple[SimilarityGraph, list[str | None]]:
    """The graph and each node's cluster (or None): from graph.npz when it is graph.json's twin,
    else parsed from graph.json (one written by the seed or edited by hand)."""
    d = proximity_dir(root)
    fast = graph_files.read_graph_npz(d)
    if fast is not None:
        return fast.graph, fast.clusters
    graph, clusters, _ = graph_files.parse_graph_json(d / graph_files.GRAPH_JSON)
    return graph, clusters


# -- clusters -----------------------------------------------------------------------------------


def clusters_document(clusters: Clusters, embedding: dict | None = None) -> dict:
    """clusters.json as a dict: the seed's three keys, then keyword ``labels`` and ``embedding``."""
    doc = {
        "clusters": clusters.clusters,
        "algorithm": clusters.algorithm,
        "num_clusters": clusters.num_clusters,
        "labels": clusters.keywords,
    }
    if embedding:
        doc["embedding"] = embedding
    return doc


def write_clusters(root: Path, clusters: Clusters, graph: SimilarityGraph | None = None) -> list[Path]:
    """Write clusters.json and set each node's ``cluster`` in graph.json and graph.npz (which must
    exist; ``graph``: the one on disk, when the caller has already loaded it)."""
    d = proximity_dir(root)
    stored = graph_files.read_graph_npz(d)
    if stored is not None and graph is not None and not _same_graph(stored.graph, graph):
        stored = None
    graph = stored.graph if stored is not None else graph if graph is not None else load_graph(root)[0]
    write_json(d / "clusters.json", clusters_document(clusters, graph.embedding))
    membership = clusters.membership()
    labels = [membership.get(i) for i in graph.ids]
    if stored is not None:  # graph.json is graph.npz's twin: splice the labels in
        graph_files.set_clusters(d, stored, labels)
    else:
        graph_files.write_graph_files(d, graph, labels)
    return [d / "clusters.json", d / graph_files.GRAPH_JSON]


def read_clusters(root: Path) -> Clusters:
    path = proximity_dir(root) / "clusters.json"
    doc = _load_json(path, "prox clusters")
    try:
        return Clusters(
            {k: list(v) for k, v in doc["clusters"].items()}, doc["algorithm"], dict(doc.get("labels") or {})
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise HypographError(f"{path}: not a prox clusters file ({type(e).__name__}: {e})") from None


# -- dupes --------------------------------------------------------------------------------------


def dupes_json(pairs: list[DuplicatePair]) -> bytes:
    """The pairs as the seed's ``prox dupes`` prints them: a JSON array of ``{"a", "b", "similarity"}``,
    indented by 2: the bytes of ``json.dumps(..., indent=2)``, by orjson (5x faster) unless a
    similarity is below 1e-4, which orjson writes as 0.000096 where json writes 9.6e-05."""
    doc = [{"a": p.a, "b": p.b, "similarity": p.similarity} for p in pairs]
    if any(0 < p.similarity < 1e-4 for p in pairs):
        return json.dumps(doc, indent=2).encode()
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2)


def write_dupes(root: Path, pairs: list[DuplicatePair]) -> Path:
    """dupes.json: ``dupes_json`` and a newline."""
    path = proximity_dir(root) / "dupes.json"
    text = dupes_json(pairs) + b"\n"
    write_atomic(path, lambda fh: fh.write(text))
    return path


def read_dupes(root: Path) -> list[DuplicatePair]:
    from pydantic import TypeAdapter

    from hypograph.proximity.dupes import DuplicatePair

    return _read_list(root, "dupes.json", DuplicatePair, TypeAdapter(DuplicatePair).validate_python, "prox dupes")


def _read_list(root: Path, name: str, record: type, validate, producer: str) -> list:
    """A JSON list of ``record``s (each checked by ``validate``) from ``proximity/<name>``,
    written by ``producer``."""
    path = proximity_dir(root) / name
    doc = _load_json(path, producer)
    try:
        return [validate(item) for item in doc]
    except Exception as e:
        raise HypographError(f"{path}: not a list of {record.__name__} records ({e})") from None


# -- verdicts and cluster names -------------------------------------------------------------------


def write_verdicts(root: Path, decisions: list) -> Path:
    from hypograph.proximity.adjudicate import verdicts_document

    path = proximity_dir(root) / "verdicts.json"
    write_json(path, verdicts_document(decisions))
    return path


def read_verdicts(root: Path) -> list:
    from hypograph.proximity.adjudicate import Decision

    return _read_list(root, "verdicts.json", Decision, Decision.model_validate, "prox adjudicate")


def write_cluster_names(root: Path, names: dict[str, dict]) -> Path:
    path = proximity_dir(root) / "cluster-labels.json"
    write_json(path, names)
    return path


def read_cluster_names(root: Path) -> dict[str, dict]:
    return _load_json(proximity_dir(root) / "cluster-labels.json", "prox label")
