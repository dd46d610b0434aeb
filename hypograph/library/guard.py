"""The cross-topic guard: one topic per library file (library rounds, Phase 0.3: "if its topic differs
semantically from this run's topic, halt and ask").

``check_topic(L, topic, client=…)`` compares the run's topic with the file's by meaning:

1. equal after normalisation: the same topic, nothing asked;
2. with a model configured, **the model judges** (prompt ``topic.v1``): embeddings alone cannot
   tell "sycophancy in language models" from "hallucination in language models" (MiniLM cosine
   0.61, while "LLM sycophancy" vs "sycophancy in large language models" is 0.50); the answer is
   cached, so a re-run costs no call. No sentence model is loaded first: loading it (torch) took
   most of the 40 s a refusal used to take, to save one cached call on a topic worded twice;
3. with no model, the two topics' sentence embeddings (the ``semantic`` extra's MiniLM; character
   n-gram TF-IDF where it is absent, said in ``TopicCheck.decided_by``) against ``THRESHOLDS``
   decide (such a run cannot generate anyway; the guard still refuses what is plainly another
   topic).

A mismatch halts with one line naming both topics and what decided, and nothing is written.
``move_aside`` (the explicit ``--new-library`` flag) renames the old file and its tool state out
of the way — never deleting them — so a new library starts; ``--confirm-topic`` keeps the file for
a topic the guard judged different.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from hypograph.errors import HypographError, NotDone, both_names
from hypograph.library.prompts import prompt
from hypograph.library.schema import LIBRARY_FILE, library_path, read_library, slugify
from hypograph.library.state import library_state
from hypograph.llm.client import Rejected, Request, untrusted
from hypograph.text import normalise

THRESHOLDS = {"tfidf": 0.30, "sbert": 0.40}


class TopicMismatch(NotDone):
    """The run's topic is not the library's: a person decides (confirm_topic or new_library), exit 2."""


@dataclass
class TopicCheck:
    library_topic: str | None
    similarity: float | None  # the embeddings' cosine; None when the model judged (none computed)
    same: bool
    decided_by: str = "no library yet"
    reason: str = ""


class TopicAnswer(BaseModel):
    same: bool
    reason: str = Field(default="", max_length=300)


def topic_similarity(a: str, b: str, backend: str = "tfidf") -> float:
    """Cosine of the two topics' embeddings (1.0 when equal after normalisation)."""
    if normalise(a) == normalise(b):
        return 1.0
    if backend == "sbert":
        from hypograph.library.embedder import sbert_rows  # numpy and scipy: only when embeddings decide

        m = sbert_rows([a, b])
        return float(m[0] @ m[1])
    if backend != "tfidf":
        raise HypographError(f"unknown guard backend {backend!r}: choose tfidf or sbert")
    from sklearn.feature_extraction.text import TfidfVectorizer

    try:
        m = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), use_idf=False, sublinear_tf=True).fit_transform(
            [normalise(a), normalise(b)]
        )
    except ValueError:  # no n-gram at all (e.g. one-letter topics)
        return 0.0
    return float((m[0] @ m[1].T).toarray()[0, 0])


def guard_backend() -> str:
    """``sbert`` when the sentence model loads offline, else ``tfidf``."""
    from hypograph.library.embedder import sentence_model

    try:
        sentence_model()
    except HypographError:
        return "tfidf"
    return "sbert"


def check_topic(
    root: Path, topic: str, backend: str | None = None, confirm: bool = False, client=None, traces=None
) -> TopicCheck:
    """Compare ``topic`` with the library file's (see the module docstring); TopicMismatch (one
    line) when they differ and ``confirm`` is not given. ``client``: an ``LLMClient`` whose model
    judges the pairs embeddings do not settle; ``traces``: the invocation's ``TraceRun`` (the
    question is traced in its ``phase0/`` folder)."""
    loaded = read_library(root)
    if loaded is None:
        return TopicCheck(None, 1.0, True)
    existing = loaded[0].topic
    if normalise(existing) == normalise(topic):
        return TopicCheck(existing, 1.0, True, "equal after normalisation")
    if client is not None and not client.offline:
        if traces is not None:
            client.trace_to(traces.dir / "phase0")
        check = _ask_model(existing, topic, client)
    else:
        backend = backend or guard_backend()
        sim = round(topic_similarity(existing, topic, backend), 3)
        check = TopicCheck(
            existing,
            sim,
            sim >= THRESHOLDS[backend] - 1e-9,
            f"{backend} cosine {sim:.2f} against {THRESHOLDS[backend]} (no model configured)",
        )
    if not check.same and not confirm:
        why = f"{check.decided_by}: {check.reason}" if check.reason else check.decided_by
        raise TopicMismatch(
            f"{library_path(root)} is about {existing!r}, not {topic!r} ({why}): set {both_names('new_library')} "
            f"to move it aside and start a new library, or {both_names('confirm_topic')} to add to it anyway"
        )
    return check


def _ask_model(existing: str, topic: str, client) -> TopicCheck:
    user = "Are these the same research topic?\n" + untrusted(
        "topics", {}, {"library_topic": existing, "run_topic": topic}
    )
    answer = client.ask(Request(name="topic-guard", system=prompt("topic")[1], user=user, schema=TopicAnswer))
    if isinstance(answer, Rejected):
        raise HypographError(f"the topic guard's model answer was rejected ({answer.reason}); nothing was changed")
    reason = " ".join(answer.reason.split())
    return TopicCheck(existing, None, answer.same, f"judged by model {client.config.model}", reason)


def move_aside(root: Path) -> Path | None:
    """Rename the library file (and its tool state) to ``hypothesis_library.<slug>.<date>[.n].json``."""
    if not library_path(root).exists():
        return None
    try:
        slug = slugify(read_library(root)[0].topic)
    except HypographError:  # an invalid file is moved aside too, under a neutral name
        slug = "invalid"
    stem = f"hypothesis_library.{slug}.{dt.date.today().isoformat()}"
    n, target = 1, Path(root) / f"{stem}.json"
    while target.exists() or (library_state(root).parent / "library-archive" / target.stem).exists():
        n += 1
        target = Path(root) / f"{stem}.{n}.json"
    os.rename(library_path(root), target)
    if library_state(root).exists():
        archive = library_state(root).parent / "library-archive" / target.stem
        archive.parent.mkdir(parents=True, exist_ok=True)
        os.rename(library_state(root), archive)
    return target


__all__ = ["LIBRARY_FILE", "TopicCheck", "TopicMismatch", "check_topic", "move_aside", "topic_similarity"]
