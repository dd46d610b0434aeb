"""4b without a model (deterministic, heuristic): hypotheses grouped by what their questions mean.

* **Units.** A near-duplicate pair of the proximity graph (``proximity/dupes.json``: similarity at
  or above the dupe threshold, both hypotheses still to carve) is never split: such pairs are
  joined first (transitively). A pair whose other member already sits in a frozen cluster cannot
  share the new one; that split is recorded in the new cluster's justification.
* **Questions.** Units are joined by average linkage over the similarity of their question hints
  (``Grouping.link``). At the adopted 0.90 this joins hints worded (almost) alike.
* **Answers.** A hypothesis left alone joins the group of its best answer partner — the one whose
  statement best answers its question, and whose question its own statement best answers
  (``Grouping.join``) — so a question worded unlike every other still lands where its answers are.

The hint similarity (``ADOPTED``) is the mean of the TF-IDF cosine of the hints and the cosine of
their all-mpnet-base-v2 sentence embeddings (offline, in the default install); the answer
similarity is that sentence model's, statements against hints. Both were chosen on the real
step-4 runs (benchmarks/README.md, "Offline step 4 judged on real runs"). Where the sentence model
cannot load, TF-IDF of the hints alone decides (``FALLBACK``), and every justification says so.
Each group becomes a cluster with one residual; every justification says plainly it is heuristic."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from hypograph.errors import HypographError
from hypograph.ids import id_sort_key
from hypograph.model_parts import MPNET
from hypograph.proximity import embed
from hypograph.structure.carving.plan import ClusterPlan
from hypograph.structure.checks import NUMBERISH
from hypograph.vault.node_view import NodeView
from hypograph.vault.nodes import Node

LOGGER = logging.getLogger(__name__)
HEURISTIC = "Heuristic (offline, no model):"
SENTENCE_MODELS = {"minilm": embed.DEFAULT_SBERT_MODEL, "mpnet": MPNET}


@dataclass(frozen=True)
class Grouping:
    """A setting of the offline grouping. ``signal``: what the question-hint similarity is —
    ``tfidf`` (TF-IDF cosines of the hints), a sentence model (``minilm``, ``mpnet``: cosines of
    its embeddings) or ``tfidf+<model>`` (the mean of both); ``link``: the similarity at which
    average linkage joins groups; ``join``: the answer similarity a lone hypothesis needs to join
    its best answer partner (None: never). The answer similarity is the sentence model's
    (statements against hints), or TF-IDF of the hints when the signal has no sentence model."""

    signal: str
    link: float
    join: float | None

    def __post_init__(self) -> None:
        if self.signal not in ("tfidf", *SENTENCE_MODELS, *(f"tfidf+{m}" for m in SENTENCE_MODELS)):
            raise ValueError(f"unknown offline grouping signal {self.signal!r}")

    @property
    def model(self) -> str | None:
        """The sentence model the signal needs (None: TF-IDF alone)."""
        return SENTENCE_MODELS.get(self.signal.rpartition("+")[2])

    @property
    def tfidf(self) -> bool:
        return self.signal.split("+")[0] == "tfidf"


# Chosen on the real step-4 runs (eggs1, covid1, the seed's sahul example) by the rule in
# benchmarks/README.md, "Offline step 4 judged on real runs" (benchmarks/carving_agreement.py --tune);
# FALLBACK: the same rule over the TF-IDF-only settings (none keeps the demo's reworded pair
# together, so without that constraint), for when the sentence model cannot load.
ADOPTED = Grouping("tfidf+mpnet", 0.9, 0.45)
FALLBACK = Grouping("tfidf", 0.55, 0.25)


@dataclass
class Meaning:
    """The similarities a :class:`Grouping` groups by. ``hints``: L2-normalised rows of the question
    hints, one matrix per part of the signal (dense or sparse); ``answer_hints``: the hints' rows
    in the space the statements are embedded in; the statements are made from
    ``statement_texts`` when first needed, by ``embedder`` (only a lone hypothesis needs them);
    ``how``: one sentence naming what made them."""

    hints: list[Any]
    answer_hints: Any
    statement_texts: list[str]
    embedder: Callable[[list[str]], Any]
    grouping: Grouping
    how: str

    @cached_property
    def statements(self):
        return self.embedder(self.statement_texts)

    def question(self) -> np.ndarray:
        """``[i, j]``: how alike hints i and j are (n x n): the mean over the signal's parts."""
        sims = [_dense(q @ q.T) for q in self.hints]
        return sims[0] if len(sims) == 1 else np.mean(sims, axis=0, dtype=np.float32)

    def answer(self, rows: list[int]) -> np.ndarray:
        """``[k, j]``: how well statement j answers question ``rows[k]`` and statement ``rows[k]``
        question j (the mean of both): only the rows asked for, so a large vault keeps one n x n."""
        q, s = self.answer_hints[rows], self.statements[rows]
        return (_dense(q @ self.statements.T) + _dense(s @ self.answer_hints.T)) / 2


def _dense(m) -> np.ndarray:
    return np.asarray(m.toarray() if hasattr(m, "toarray") else m, dtype=np.float32)


@dataclass(frozen=True)
class Pair:
    """A near-duplicate pair of the proximity graph (similarity at or above its dupe threshold)."""

    a: str
    b: str
    similarity: float


def hint(h: Node) -> str:
    view = NodeView(h)
    return str(view.question or view.statement or h.title)


def measure(hyps: list[Node], grouping: Grouping = ADOPTED) -> Meaning:
    """The similarities of ``hyps``' question hints and statements by ``grouping``'s signal; when
    its sentence model cannot be loaded, by :data:`FALLBACK` (TF-IDF), saying why."""
    hints = [hint(h) for h in hyps]
    why = ""
    if grouping.model:
        try:
            embed.sentence_model(grouping.model)
        except HypographError as e:
            LOGGER.warning("offline carving: TF-IDF of the question hints (sentence embeddings unavailable: %s)", e)
            grouping, why = FALLBACK, f" (sentence embeddings unavailable: {str(e).splitlines()[0]})"
    parts = [embed.embed_tfidf(hints)[0]] if grouping.tfidf else []
    model = grouping.model
    if model is None:
        return Meaning(parts, parts[0], hints, lambda _texts: parts[0], grouping, f"TF-IDF of the question hints{why}")

    def sentence(texts: list[str]) -> np.ndarray:
        return sentence_rows(texts, model)

    parts.append(sentence(hints))
    statements = [str(NodeView(h).statement or h.title) for h in hyps]
    how = f"sentence embeddings ({model}) of the question hints and statements"
    if grouping.tfidf:
        how = f"the mean of TF-IDF and {how}"
    return Meaning(parts, parts[-1], statements, sentence, grouping, how)


def sentence_rows(texts: list[str], model: str = embed.DEFAULT_SBERT_MODEL) -> np.ndarray:
    """Sentence embeddings of ``texts`` by ``model``, each distinct text encoded once (hints
    repeat: papers pose their hypotheses against a few questions)."""
    distinct = list(dict.fromkeys(texts))
    rows = embed.embed_sbert(distinct, model)
    at = {t: k for k, t in enumerate(distinct)}
    return rows[[at[t] for t in texts]]


def offline_plans(
    hyps: list[Node],
    pairs: list[Pair] | None = None,
    frozen: dict[str, str] | None = None,
    note: str = "",
    grouping: Grouping = ADOPTED,
) -> list[ClusterPlan]:
    """One plan per group of ``hyps`` (module docstring), ordered by lowest member id.

    ``pairs``: the proximity graph's near-duplicate pairs (any ids; those outside ``hyps`` and
    ``frozen`` are ignored); ``frozen``: hypothesis id -> the existing cluster it is in; ``note``:
    a line added to every justification (what the pairs came from, if they did not);
    ``grouping``: the setting (the benchmark tries others)."""
    if not hyps:
        return []
    hyps = sorted(hyps, key=lambda h: id_sort_key(h.id))
    meaning = measure(hyps, grouping)
    index = {h.id: k for k, h in enumerate(hyps)}
    pairs = pairs or []
    sims = meaning.question()
    links = [(index[p.a], index[p.b]) for p in pairs if p.a in index and p.b in index]
    groups = group(meaning, sims, units(links, len(hyps)))
    plans = []
    for members in groups:
        nodes = [hyps[i] for i in members]
        question = central_question(nodes, sims[np.ix_(members, members)])
        reasons = split_reasons({h.id for h in nodes}, pairs, frozen or {})
        plans.append(_plan(nodes, question, meaning.how, [*reasons, note] if note else reasons))
    return plans


def units(links: list[tuple[int, int]], n: int) -> list[int]:
    """The unit (a representative row) of each of ``n`` rows, ``links`` joined transitively."""
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in links:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [root(i) for i in range(n)]


def group(meaning: Meaning, sims: np.ndarray, unit: list[int]) -> list[list[int]]:
    """Rows in groups (each sorted, groups by first row): units joined by average linkage of
    question similarity ``sims`` at the grouping's link threshold, then each lone row moved to the
    group of its best answer partner if their answer similarity reaches the join threshold."""
    link, join = meaning.grouping.link, meaning.grouping.join
    labels = _linkage(sims, unit, link)
    counts = np.bincount(labels)
    lone = [i for i in range(len(labels)) if counts[labels[i]] == 1] if len(labels) > 1 and join is not None else []
    if lone:
        answer = meaning.answer(lone)
        answer[np.arange(len(lone)), lone] = -np.inf
        for k, i in enumerate(lone):  # in id order; a row joined earlier carries its new group
            best = int(np.argmax(answer[k]))  # ties: the lowest row
            if answer[k, best] >= join:
                labels[i] = labels[best]
    out: dict[int, list[int]] = {}
    for i, g in enumerate(labels):
        out.setdefault(int(g), []).append(i)
    return sorted(out.values(), key=lambda rows: rows[0])


def _linkage(sims: np.ndarray, unit: list[int], link: float) -> np.ndarray:
    """Flat average-linkage clusters of ``sims`` cut at similarity ``link``; rows of one unit at
    distance 0 from each other, so no cut separates them."""
    n = len(unit)
    if n == 1:
        return np.zeros(1, dtype=int)
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    dist = np.clip(1.0 - sims, 0.0, 2.0)
    same = np.asarray(unit)[:, None] == np.asarray(unit)[None, :]
    dist[same] = 0.0
    condensed = squareform(dist, checks=False).astype(np.float64)
    del dist, same
    return fcluster(linkage(condensed, "average"), 1.0 - link, "distance")


def split_reasons(members: set[str], pairs: list[Pair], frozen: dict[str, str]) -> list[str]:
    """Why each near-duplicate pair with one member in ``members`` has the other in a frozen cluster."""
    out = []
    for p in pairs:
        for mine, other in ((p.a, p.b), (p.b, p.a)):
            if mine in members and other in frozen:
                out.append(
                    f"{mine} and {other} are near-duplicates (at or above the dupe threshold) but {other} is "
                    f"in {frozen[other]}, an existing cluster, which new hypotheses never "
                    "join: the pair is split on purpose."
                )
    return out


def _plan(nodes: list[Node], question: str, how: str, reasons: list[str]) -> ClusterPlan:
    """The heuristic plan of one group, ``question`` its central question hint."""
    topic = question.rstrip("?").strip()
    return ClusterPlan(
        title=f"Answers to - {topic}" if len(topic) < 110 else f"Answers to - {topic[:105].rsplit(' ', 1)[0]}",
        members=[h.id for h in nodes],
        # A hint like "Did rainfall drop by 30%?" stays out of the number-free step-4 fields.
        question=question if question.endswith("?") and not NUMBERISH.search(question) else None,
        exclusivity=(
            f"{HEURISTIC} the members were posed against the same sub-question "
            "and are read as alternative answers to it, at most one true; not verified."
        ),
        independence=(
            f"{HEURISTIC} assumed to factorize from the other clusters because its sub-question differs; not verified."
        ),
        justification=(
            f"{HEURISTIC} grouped because their questions mean the same sub-question, or each answers "
            f"the other's question, by {how}; near-duplicate pairs of the proximity graph are kept "
            "together. Exclusivity, independence and grain have not been judged. "
            "Re-run with a model configured, or review by hand." + "".join(f"\n\n{r}" for r in reasons)
        ),
        residual_title=f"The answer is not listed here - {topic}"[:140],
        residual_statement=(
            f'The answer to "{question}" is something none of '
            f"{', '.join(h.id for h in nodes)} states "
            "— a cause, mechanism or outcome that no source in this vault proposed."
        ),
        residual_note=(
            f"{HEURISTIC} catch-all so that exactly one member of the cluster is true; "
            "it names no concrete escape because none was judged."
        ),
    )


def central_question(nodes: list[Node], sims: np.ndarray) -> str:
    """The question hint of ``nodes`` most similar to the others' (``sims``: their hint
    similarities; ties, within ``TIE`` — the last bits of an embedding follow the processor's
    kernels and threads, so two hints equally similar must not be told apart by them: lowest id)."""
    sums = np.asarray(sims, dtype=np.float64).sum(axis=1)
    best = next(k for k in range(len(nodes)) if sums[k] >= sums.max() - TIE)
    return hint(nodes[best])


TIE = 1e-6  # similarity sums closer than this are equal (float32 embeddings carry about 7 digits)
