"""Descriptive cluster labels from each cluster's most distinctive terms (class-based TF-IDF).

c-TF-IDF (as in BERTopic): treat each cluster's concatenated texts as one document; weight term t in
cluster c by tf(t, c) / |c| * log(1 + A / f(t)), where A is the mean number of words per cluster
and f(t) the term's frequency over all clusters. Terms frequent in one cluster but rare elsewhere
win. O(total text length).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer


def cluster_keywords(ids: list[str], texts: list[str], clusters: dict[str, list[str]], top: int = 3) -> dict[str, str]:
    """Map each cluster label to its ``top`` distinctive terms, comma-separated (\"\" if none)."""
    if not clusters:
        return {}
    try:
        counts = CountVectorizer(stop_words="english", token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z0-9-]+\b")
        doc_terms = counts.fit_transform(texts)
    except ValueError:  # empty vocabulary
        return {label: "" for label in clusters}
    vocab = counts.get_feature_names_out()
    row = {i: k for k, i in enumerate(ids)}
    labels = list(clusters)
    member_rows = [[row[m] for m in clusters[label] if m in row] for label in labels]
    indicator = sp.csr_matrix(
        (np.ones(sum(map(len, member_rows))), (np.repeat(np.arange(len(labels)), [len(r) for r in member_rows]), np.concatenate([np.asarray(r, dtype=np.int64) for r in member_rows]) if member_rows else [])),
        shape=(len(labels), len(ids)),
    )
    class_terms = (indicator @ doc_terms).tocsr().astype(np.float64)
    words_per_class = np.asarray(class_terms.sum(axis=1)).ravel()
    term_freq = np.asarray(class_terms.sum(axis=0)).ravel()
    idf = np.log1p(words_per_class.mean() / np.maximum(term_freq, 1))
    tf = sp.diags(1.0 / np.maximum(words_per_class, 1)) @ class_terms
    weights = (tf @ sp.diags(idf)).tocsr()
    out = {}
    for k, label in enumerate(labels):
        start, end = weights.indptr[k], weights.indptr[k + 1]
        cols, vals = weights.indices[start:end], weights.data[start:end]
        # Ties broken alphabetically so the label is stable.
        best = sorted(zip(-vals, vocab[cols]))[:top]
        out[label] = ", ".join(term for _, term in best)
    return out
