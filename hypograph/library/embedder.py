"""Embedders for the library: a function from texts to L2-normalised rows, fitted jointly.

The library reuses the proximity engine's backends (``hypograph.proximity.embed``): ``tfidf``
(offline, lexical; rows fitted on the texts given together) or ``sbert`` (offline weights).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from hypograph.proximity.embed import embed

Embedder = Callable[[list[str]], "sp.csr_matrix | np.ndarray"]


def make_embedder(backend: str = "tfidf", model: str | None = None) -> Embedder:
    """An embedder for ``backend`` (tfidf | sbert)."""
    def run(texts: list[str]):
        return embed([str(i) for i in range(len(texts))], texts, backend, model).matrix

    run.backend = backend  # type: ignore[attr-defined]
    return run


def cosine(a, b) -> np.ndarray:
    """Dense ``len(a) x len(b)`` cosine matrix of L2-normalised rows (sparse or dense)."""
    if a.shape[0] == 0 or b.shape[0] == 0:
        return np.zeros((a.shape[0], b.shape[0]), dtype=np.float32)
    product = a @ b.T
    return np.asarray(product.toarray() if sp.issparse(product) else product, dtype=np.float32)
