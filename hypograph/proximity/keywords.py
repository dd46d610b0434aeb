"""Descriptive cluster labels from each cluster's most distinctive terms (class-based TF-IDF).

c-TF-IDF (as in BERTopic), on the TF-IDF rows the proximity graph was built from, so the texts are
tokenized once: sum each cluster's rows into one class vector, normalise it by its total weight,
and weight term t by log(1 + A / f(t)), where A is the mean total weight per cluster and f(t) the
term's weight over all clusters. Terms heavy in one cluster but rare elsewhere win. Numbers are
not labels. O(nnz of the rows).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def cluster_keywords(ids: list[str], rows: sp.csr_matrix, vocabulary: list[str], clusters: dict[str, list[str]],
                     top: int = 3) -> dict[str, str]:
    """Map each cluster label to its ``top`` distinctive terms, comma-separated ("" if none).

    ``rows[i]`` holds the TF-IDF weights of ``ids[i]`` over ``vocabulary``.
    """
    if not clusters:
        return {}
    vocab = np.asarray(vocabulary, dtype=object)
    wordlike = np.array([any(ch.isalpha() for ch in term) for term in vocabulary], dtype=bool)
    row = {i: k for k, i in enumerate(ids)}
    labels = list(clusters)
    members = [[row[m] for m in clusters[label] if m in row] for label in labels]
    indicator = sp.csr_matrix(
        (np.ones(sum(map(len, members))),
         (np.repeat(np.arange(len(labels)), [len(m) for m in members]),
          np.concatenate([np.asarray(m, dtype=np.int64) for m in members]))),
        shape=(len(labels), len(ids)),
    )
    class_terms = (indicator @ rows).tocsr().astype(np.float64)
    weight_per_class = np.asarray(class_terms.sum(axis=1)).ravel()
    term_weight = np.asarray(class_terms.sum(axis=0)).ravel()
    idf = np.log1p(weight_per_class.mean() / np.maximum(term_weight, 1e-12))
    weights = (sp.diags(1.0 / np.maximum(weight_per_class, 1e-12)) @ class_terms @ sp.diags(idf)).tocsr()
    out = {}
    for k, label in enumerate(labels):
        cols = weights.indices[weights.indptr[k]:weights.indptr[k + 1]]
        vals = weights.data[weights.indptr[k]:weights.indptr[k + 1]]
        keep = wordlike[cols]
        # Ties broken alphabetically so the label is stable.
        best = sorted(zip(-vals[keep], vocab[cols[keep]], strict=True))[:top]
        out[label] = ", ".join(term for _, term in best)
    return out
