"""Descriptive cluster labels from each cluster's most distinctive terms (class-based TF-IDF).

c-TF-IDF (as in BERTopic), on the TF-IDF rows the proximity graph was built from, so the texts are
tokenized once: sum each cluster's rows into one class vector, normalise it by its total weight,
and weight term t by log(1 + A / f(t)), where A is the mean total weight per cluster and f(t) the
term's weight over all clusters. Terms heavy in one cluster but rare elsewhere win. Numbers are
not labels. O(nnz of the rows log nnz), with numpy alone: the floats are the ones scipy's sparse
product gives (each sum taken in the same order), so the labels are too.
"""

from __future__ import annotations

import numpy as np

from hypograph.proximity.csr import Csr


def cluster_keywords(ids: list[str], rows: Csr, vocabulary: list[str], clusters: dict[str, list[str]],
                     top: int = 3) -> dict[str, str]:
    """Map each cluster label to its ``top`` distinctive terms, comma-separated ("" if none).

    ``rows[i]`` holds the TF-IDF weights of ``ids[i]`` over ``vocabulary``.
    """
    if not clusters:
        return {}
    vocab = np.asarray(vocabulary, dtype=object)
    wordlike = np.array([any(ch.isalpha() for ch in term) for term in vocabulary], dtype=bool)
    labels = list(clusters)
    cls, cols, class_terms, indptr = _class_terms(ids, rows, [clusters[label] for label in labels])
    weight_per_class = np.zeros(len(labels))
    filled = np.flatnonzero(np.diff(indptr))
    weight_per_class[filled] = np.add.reduceat(class_terms, indptr[filled])
    term_weight = np.bincount(cols, weights=class_terms, minlength=rows.shape[1])
    idf = np.log1p(weight_per_class.mean() / np.maximum(term_weight, 1e-12))
    weights = class_terms * (1.0 / np.maximum(weight_per_class, 1e-12))[cls] * idf[cols]
    out = {}
    for k, label in enumerate(labels):
        c, w = cols[indptr[k]:indptr[k + 1]], weights[indptr[k]:indptr[k + 1]]
        keep = wordlike[c] & (w != 0)  # the sparse product drops a zero
        # Ties broken alphabetically so the label is stable.
        best = sorted(zip(-w[keep], vocab[c[keep]], strict=True))[:top]
        out[label] = ", ".join(term for _, term in best)
    return out


def _class_terms(ids: list[str], rows: Csr, members: list[list[str]]):
    """Each cluster's rows summed: (cluster, column, sum) per nonzero, and each cluster's range.

    Within a cluster, the rows are added in row order from 0.0 and the columns come in reverse
    order of first appearance: what scipy's product of a 0/1 cluster-by-row indicator with the
    rows stores, whose row sums (``np.add.reduceat``) depend on that order."""
    row = {i: k for k, i in enumerate(ids)}
    picked = [np.sort(np.asarray([row[m] for m in group if m in row], dtype=np.int64)) for group in members]
    member_rows = np.concatenate(picked) if picked else np.empty(0, np.int64)
    cluster_of_member = np.repeat(np.arange(len(picked)), [p.size for p in picked])
    # Every stored entry of every member row, in (cluster, row, stored) order.
    lengths = (rows.indptr[member_rows + 1] - rows.indptr[member_rows]).astype(np.int64)
    first = np.repeat(rows.indptr[member_rows].astype(np.int64) - np.cumsum(lengths) + lengths, lengths)
    entry = first + np.arange(int(lengths.sum()))
    cluster = np.repeat(cluster_of_member, lengths)
    key = cluster * max(rows.shape[1], 1) + rows.indices[entry]
    unique, first_seen, slot = np.unique(key, return_index=True, return_inverse=True)
    sums = np.bincount(slot, weights=rows.data[entry].astype(np.float64), minlength=unique.size)
    cls, cols = np.divmod(unique, max(rows.shape[1], 1))
    order = np.lexsort((-first_seen, cls))
    indptr = np.zeros(len(members) + 1, dtype=np.int64)
    np.cumsum(np.bincount(cls, minlength=len(members)), out=indptr[1:])
    return cls[order], cols[order], sums[order], indptr
