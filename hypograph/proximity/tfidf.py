"""scikit-learn's ``TfidfVectorizer()`` with its default arguments, without importing scikit-learn.

The seed tool embeds with ``TfidfVectorizer()``; importing scikit-learn alone costs 1-2 s per
``prox embed`` process and its per-token Python loop another 2 s at 100k texts. This module
computes the same matrix, bit for bit (tested against scikit-learn), in the same steps, with numpy
alone (``csr.py``):

1. each text lowercased and split with the default ``token_pattern`` ``(?u)\\b\\w\\w+\\b``;
2. counts per text, columns numbered in order of first appearance, entries sorted by that number;
3. columns renumbered in alphabetical order of the terms (entries keep their stored order);
4. idf = ln((1 + n) / (1 + df)) + 1, each count times its term's idf;
5. each row divided by its L2 norm, the squares added in stored order as scikit-learn's C loop does.

O(total text length); the vocabulary is the sorted list of terms.
"""

from __future__ import annotations

import re

import numpy as np

from hypograph.proximity.csr import Csr, sequential_row_sums

TOKEN_PATTERN = re.compile(r"(?u)\b\w\w+\b")


def seed_tfidf(texts: list[str], workers: int | None = None) -> tuple[Csr, list[str]]:
    """``TfidfVectorizer().fit_transform(texts)`` (float64 CSR arrays) and ``get_feature_names_out()``;
    a corpus without any token gives an (n, 0) matrix and no terms."""
    n = len(texts)
    lengths, number, vocabulary = _tokens(texts, workers)
    v = len(vocabulary)
    if v == 0:
        return Csr(np.empty(0), np.empty(0, np.int32), np.zeros(n + 1, np.int32), (n, 0)), []
    # Counts per (text, term), each row's entries sorted by first-appearance number. The keys come
    # in text order already: a stable sort (timsort, which runs through sorted stretches) orders
    # each text's few terms.
    key = np.repeat(np.arange(n, dtype=np.int64), lengths) * v + number
    key.sort(kind="stable")
    starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    data = np.diff(np.append(starts, key.size)).astype(np.float64)
    text_of, number = np.divmod(key[starts], v)
    indptr = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(text_of, minlength=n), out=indptr[1:])
    terms = sorted(vocabulary)
    alphabetical = np.empty(v, dtype=np.int64)
    alphabetical[[vocabulary[t] for t in terms]] = np.arange(v)
    indices = alphabetical[number].astype(np.int32)
    df = np.bincount(indices, minlength=v).astype(np.float64)
    df += 1.0
    idf = np.full(v, float(n + 1))
    idf /= df
    np.log(idf, out=idf)
    idf += 1.0
    data *= idf[indices]
    norms = np.sqrt(sequential_row_sums(data * data, indptr))
    data /= np.repeat(np.where(norms > 0, norms, 1.0), np.diff(indptr))
    return Csr(data, indices, indptr, (n, v)), terms


PARALLEL_MIN_TEXTS = 20_000  # below this, a worker process costs more than it saves
_TEXTS: list[str] | None = None  # what _number_tokens reads: inherited by forked workers


def _tokens(texts: list[str], workers: int | None) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Tokens per text, each token's column in order of first appearance, and that vocabulary.

    Equal parts of the texts are tokenised in worker processes, each numbering its own terms; their
    vocabularies are then merged in text order, which gives the numbers one pass would give."""
    from hypograph.proximity.forks import available_cpus, fork_map

    global _TEXTS
    workers = workers or (available_cpus() if len(texts) >= PARALLEL_MIN_TEXTS else 1)
    bounds = np.linspace(0, len(texts), max(1, workers) + 1).astype(int).tolist()
    _TEXTS = texts
    try:
        parts = list(fork_map(_number_tokens, list(zip(bounds[:-1], bounds[1:], strict=True)), workers))
    finally:
        _TEXTS = None
    vocabulary: dict[str, int] = {}
    first_seen = vocabulary.setdefault
    numbers = []
    for _, local, terms in parts:
        to_global = np.fromiter((first_seen(t, len(vocabulary)) for t in terms), dtype=np.int64, count=len(terms))
        numbers.append(to_global[local])
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate(numbers) if numbers else np.empty(0, np.int64),
        vocabulary,
    )


def _number_tokens(span: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """For texts [a, b): tokens per text, each token's number among these texts' terms (in order
    of first appearance), and those terms."""
    findall = TOKEN_PATTERN.findall
    tokens_per_text = [findall(t.lower()) for t in _TEXTS[span[0] : span[1]]]
    lengths = np.fromiter(map(len, tokens_per_text), dtype=np.int64, count=len(tokens_per_text))
    vocabulary: dict[str, int] = {}
    first_seen = vocabulary.setdefault
    number = np.fromiter(
        (first_seen(tok, len(vocabulary)) for toks in tokens_per_text for tok in toks),
        dtype=np.int64,
        count=int(lengths.sum()),
    )
    return lengths, number, list(vocabulary)
