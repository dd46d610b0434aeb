"""Descriptive cluster labels from each cluster's most distinctive terms (class-based TF-IDF).

c-TF-IDF (as in BERTopic), on the TF-IDF rows the proximity graph was built from, so the texts are
tokenized once: sum each cluster's rows into one class vector, normalise it by its total weight,
and weight term t by log(1 + A / f(t)), where A is the mean total weight per cluster and f(t) the
term's weight over all clusters. Terms heavy in one cluster but rare elsewhere win. Numbers and
English function words ("the", "or", "does", ``STOP_WORDS``) are not labels: the embedding keeps
them (the seed's vectorizer), the labels skip them. Two sparse products, O(nnz of the rows).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

# English function words (articles, pronouns, prepositions, conjunctions, auxiliaries, quantifiers):
# a label names a topic, and these name none. A term of several words is skipped when it starts or
# ends with one, or is made of them only.
_FUNCTION_WORDS = """a about above across after afterwards again against all almost alone along already also although
    always am among amongst an and another any anyhow anyone anything anyway anywhere are around as at
    be became because become becomes becoming been before beforehand behind being below beside besides
    between beyond both but by can cannot could did do does doing done down due during each either else
    elsewhere enough etc even ever every everyone everything everywhere except few for former formerly
    from further had has have having he hence her here hereby herein hers herself him himself his how
    however i ie if in indeed instead into is it its itself just last latter least less many may me
    meanwhile might mine more moreover most mostly much must my myself namely neither never nevertheless
    next no nobody none nor not nothing now nowhere of off often on once one only onto or other others
    otherwise our ours ourselves out over own per perhaps rather re same several she should since so
    some somehow someone something sometimes somewhere still such than that the their theirs them
    themselves then thence there thereafter thereby therefore therein thereupon these they this those
    though through throughout thru thus to together too toward towards under until up upon us very via
    was we well were what whatever when whence whenever where whereas whereby wherein whether which while
    whither who whoever whole whom whose why will with within without would yet you your yours yourself
    yourselves"""
STOP_WORDS = frozenset(_FUNCTION_WORDS.split())


def _labellike(term: str) -> bool:
    """A term that can stand in a label: has a letter, and does not start or end with a function word."""
    words = term.split()
    return (
        any(ch.isalpha() for ch in term) and bool(words) and words[0] not in STOP_WORDS and words[-1] not in STOP_WORDS
    )


def cluster_keywords(
    ids: list[str], rows: sp.csr_matrix, vocabulary: list[str], clusters: dict[str, list[str]], top: int = 3
) -> dict[str, str]:
    """Map each cluster label to its ``top`` distinctive terms, comma-separated ("" if none).

    ``rows[i]`` holds the TF-IDF weights of ``ids[i]`` over ``vocabulary``.
    """
    if not clusters:
        return {}
    vocab = np.asarray(vocabulary, dtype=object)
    wordlike = np.array([_labellike(term) for term in vocabulary], dtype=bool)
    weights = class_weights(ids, rows, list(clusters.values()))
    out = {}
    for k, label in enumerate(clusters):
        cols = weights.indices[weights.indptr[k] : weights.indptr[k + 1]]
        vals = weights.data[weights.indptr[k] : weights.indptr[k + 1]]
        keep = wordlike[cols]
        # Ties broken alphabetically so the label is stable.
        best = sorted(zip(-vals[keep], vocab[cols[keep]], strict=True))[:top]
        out[label] = ", ".join(term for _, term in best)
    return out


def class_weights(ids: list[str], rows: sp.csr_matrix, groups: list[list[str]]) -> sp.csr_matrix:
    """Row k: the c-TF-IDF weight of each term in the rows of ``groups[k]``'s ids (ids not among
    ``ids`` are left out): ``diags(1 / w) @ (indicator @ rows) @ diags(idf)``, where ``w`` is each
    class vector's total weight and ``idf = log(1 + mean(w) / f(t))``."""
    row = {i: k for k, i in enumerate(ids)}
    members = [sorted(row[m] for m in group if m in row) for group in groups]
    indptr = np.concatenate([[0], np.cumsum([len(m) for m in members])])
    cols = np.concatenate([np.asarray(m, dtype=np.int64) for m in members]) if members else np.empty(0, np.int64)
    indicator = sp.csr_matrix((np.ones(cols.size), cols, indptr), shape=(len(groups), rows.shape[0]))
    class_terms = (indicator @ rows).tocsr()
    total = np.asarray(class_terms.sum(axis=1)).ravel()
    idf = np.log1p(total.mean() / np.maximum(np.asarray(class_terms.sum(axis=0)).ravel(), 1e-12))
    weights = (sp.diags(1.0 / np.maximum(total, 1e-12)) @ class_terms @ sp.diags(idf)).tocsr()
    weights.eliminate_zeros()
    return weights
