"""``TfidfVectorizer``'s term counting spread over forked workers, with the very result it computes.

scikit-learn counts terms in one Python loop (``CountVectorizer._count_vocab``): at 100k texts it
is most of ``prox embed``'s own work. ``count_in_workers(vectorizer)`` gives one vectorizer a
counting step that tokenises slices of the texts in ``fork_map`` workers and joins them as the
serial loop would have built them: a term's column is its first appearance across all texts,
each row's entries sorted by column. Everything after the counting (feature sorting, idf, norms)
is scikit-learn's own, so the rows are the same bits (tests/core/proximity/test_proximity.py checks).
"""

from __future__ import annotations

import numpy as np

from hypograph.proximity.forks import available_cpus, fork_map

PARALLEL_MIN_TEXTS = 20_000  # below this, forking costs more than it saves


def count_in_workers(vectorizer, texts: list[str]) -> None:
    """Make ``vectorizer.fit_transform(texts)`` count its terms in forked workers (when the texts
    are many and this machine has several cores); a fixed vocabulary is counted as before."""
    workers = available_cpus()
    if workers < 2 or len(texts) < PARALLEL_MIN_TEXTS:
        return
    serial = vectorizer._count_vocab

    def count_vocab(raw_documents, fixed_vocab):
        if fixed_vocab or raw_documents is not texts:
            return serial(raw_documents, fixed_vocab)
        return _joined(vectorizer, texts, workers)

    vectorizer._count_vocab = count_vocab


def _joined(vectorizer, texts: list[str], workers: int):
    """(vocabulary, counts) as ``_count_vocab(texts, False)`` returns them."""
    import scipy.sparse as sp
    from sklearn.base import clone
    from sklearn.utils._sparse import _align_api_if_sparse

    slices = np.linspace(0, len(texts), 4 * workers + 1).round().astype(int).tolist()
    settings = clone(vectorizer)  # its parameters alone: the patched counter stays here
    parts = fork_map(
        _count_slice, [(settings, texts[a:b]) for a, b in zip(slices[:-1], slices[1:], strict=True)], workers
    )
    vocabulary: dict[str, int] = {}
    columns, values, lengths = [], [], []
    for terms, local_columns, local_values, local_lengths in parts:
        # a term new to this slice may have appeared in an earlier one: it keeps that column
        to_global = np.fromiter((vocabulary.setdefault(t, len(vocabulary)) for t in terms), np.int64, len(terms))
        columns.append(to_global[local_columns])
        values.append(local_values)
        lengths.append(local_lengths)
    if not vocabulary:
        raise ValueError("empty vocabulary; perhaps the documents only contain stop words")
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(lengths))])
    dtype = np.int32 if indptr[-1] <= np.iinfo(np.int32).max else np.int64
    counts = sp.csr_array(
        (np.concatenate(values), np.concatenate(columns).astype(dtype), indptr.astype(dtype)),
        shape=(len(texts), len(vocabulary)),
        dtype=vectorizer.dtype,
    )
    counts.sort_indices()
    return vocabulary, _align_api_if_sparse(counts)


def _count_slice(task) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """One slice's terms in order of first appearance, and each text's (column, count) entries in
    the order the serial loop appends them (columns local to the slice), and entries per text."""
    vectorizer, texts = task
    analyze = vectorizer.build_analyzer()
    vocabulary: dict[str, int] = {}
    columns: list[int] = []
    values: list[int] = []
    lengths = np.empty(len(texts), dtype=np.int64)
    for k, text in enumerate(texts):
        counter: dict[int, int] = {}
        for term in analyze(text):
            column = vocabulary.setdefault(term, len(vocabulary))
            counter[column] = counter.get(column, 0) + 1
        columns.extend(counter.keys())
        values.extend(counter.values())
        lengths[k] = len(counter)
    return list(vocabulary), np.asarray(columns, dtype=np.int64), np.asarray(values, dtype=np.intc), lengths
