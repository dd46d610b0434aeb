"""Descriptive cluster labels from each cluster's most distinctive terms (class-based TF-IDF).

c-TF-IDF (as in BERTopic), on the TF-IDF rows the proximity graph was built from, so the texts are
tokenized once: sum each cluster's rows into one class vector, normalise it by its total weight,
and weight term t by log(1 + A / f(t)), where A is the mean total weight per cluster and f(t) the
term's weight over all clusters. Terms heavy in one cluster but rare elsewhere win. Numbers and
English function words ("the", "or", "does", ``STOP_WORDS``) are not labels: the embedding keeps
them (the seed's vectorizer), the labels skip them. O(nnz of the rows log nnz), with numpy alone:
the floats are the ones scipy's sparse product gives (each sum taken in the same order), so the
labels are too.
"""

from __future__ import annotations

import numpy as np

from hypograph.proximity.csr import Csr

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
    ids: list[str], rows: Csr, vocabulary: list[str], clusters: dict[str, list[str]], top: int = 3
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


def class_weights(ids: list[str], rows: Csr, groups: list[list[str]]) -> Csr:
    """Row k: the c-TF-IDF weight of each term in the rows of ``groups[k]``'s ids (a zero is not
    stored). The floats of scipy's ``diags(1 / w) @ (indicator @ rows) @ diags(idf)``: each
    group's rows are added in row order from 0.0, and its total weight ``w`` is ``np.add.reduceat``
    over its terms in reverse order of first appearance, the order that product stores them in."""
    v = max(rows.shape[1], 1)
    row = {i: k for k, i in enumerate(ids)}
    picked = [np.sort(np.asarray([row[m] for m in group if m in row], dtype=np.int64)) for group in groups]
    member_rows = np.concatenate(picked) if picked else np.empty(0, np.int64)
    # Every stored entry of every member row, in (group, row, stored) order.
    lengths = (rows.indptr[member_rows + 1] - rows.indptr[member_rows]).astype(np.int64)
    entry = np.repeat(rows.indptr[member_rows].astype(np.int64) - np.cumsum(lengths) + lengths, lengths)
    entry += np.arange(entry.size)
    key = np.repeat(np.repeat(np.arange(len(picked)), [p.size for p in picked]), lengths) * v + rows.indices[entry]
    unique, first_seen, slot = np.unique(key, return_index=True, return_inverse=True)
    sums = np.bincount(slot, weights=rows.data[entry].astype(np.float64), minlength=unique.size)
    group, cols = np.divmod(unique, v)
    order = np.lexsort((-first_seen, group))
    group, cols, sums = group[order], cols[order], sums[order]
    indptr = np.zeros(len(groups) + 1, dtype=np.int64)
    np.cumsum(np.bincount(group, minlength=len(groups)), out=indptr[1:])
    total = np.zeros(len(groups))
    filled = np.flatnonzero(np.diff(indptr))
    total[filled] = np.add.reduceat(sums, indptr[filled])
    term_total = np.bincount(cols, weights=sums, minlength=rows.shape[1])  # added group by group
    idf = np.log1p(total.mean() / np.maximum(term_total, 1e-12))
    weights = sums * (1.0 / np.maximum(total, 1e-12))[group] * idf[cols]
    stored = weights != 0
    indptr[1:] = np.cumsum(np.bincount(group[stored], minlength=len(groups)))
    return Csr(weights[stored], cols[stored], indptr, (len(groups), rows.shape[1]))
