"""The cross-topic guard: one topic per library file (seed 001, Phase 0.3).

The run's topic is compared with the file's by embedding similarity, not string equality, so
"LLM sycophancy" and "sycophancy in language models" are one topic. Backends, both offline:

* ``tfidf`` (default): character 3–5-gram vectors within word boundaries, raw term frequency
  (no IDF: two short strings give IDF nothing to learn), cosine >= 0.30. Shares stems across
  word forms ("sycophancy" / "sycophantic"); measured: the pair above 0.58, "LLM sycophancy" vs
  "LLM hallucination" 0.16, vs "honeybee colony collapse" 0.0.
* ``sbert``: the proximity engine's sentence embeddings, cosine >= 0.50. (all-MiniLM-L6-v2 puts
  "LLM sycophancy" nearer "LLM hallucination", 0.58, than "sycophancy in language models", 0.53:
  on two-to-five-word topics it is the weaker judge, hence not the default.)

A mismatch halts with one line naming both topics and nothing is written. ``move_aside`` (the
explicit ``--new-library`` flag) renames the old file and its tool state out of the way — never
deleting them — so a new library starts; ``--confirm-topic`` keeps the file for a topic the guard
judged different.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from hypograph.errors import HypographError
from hypograph.library.modes import normalise
from hypograph.library.schema import LIBRARY_FILE, library_path, read_library, slugify
from hypograph.library.state import library_state
from hypograph.proximity.embed import embed_sbert

THRESHOLDS = {"tfidf": 0.30, "sbert": 0.50}


class TopicMismatch(HypographError):
    """The run's topic is not the library's."""


@dataclass
class TopicCheck:
    library_topic: str | None
    similarity: float
    same: bool


def topic_similarity(a: str, b: str, backend: str = "tfidf") -> float:
    """Cosine of the two topics' embeddings (1.0 when equal after normalisation)."""
    if normalise(a) == normalise(b):
        return 1.0
    if backend == "sbert":
        m = embed_sbert([a, b])
        return float(m[0] @ m[1])
    if backend != "tfidf":
        raise HypographError(f"unknown guard backend {backend!r}: choose tfidf or sbert")
    from sklearn.feature_extraction.text import TfidfVectorizer

    try:
        m = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), use_idf=False, sublinear_tf=True).fit_transform(
            [normalise(a), normalise(b)])
    except ValueError:  # no n-gram at all (e.g. one-letter topics)
        return 0.0
    return float((m[0] @ m[1].T).toarray()[0, 0])


def check_topic(root: Path, topic: str, backend: str = "tfidf", confirm: bool = False) -> TopicCheck:
    """Compare ``topic`` with the library file's; TopicMismatch (one line) when they differ."""
    loaded = read_library(root)
    if loaded is None:
        return TopicCheck(None, 1.0, True)
    existing = loaded[0].topic
    sim = topic_similarity(existing, topic, backend)
    same = sim >= THRESHOLDS[backend] - 1e-9
    if not same and not confirm:
        raise TopicMismatch(
            f"{library_path(root)} is about {existing!r}, not {topic!r} (topic similarity {sim:.2f} < "
            f"{THRESHOLDS[backend]}): pass --new-library to move it aside and start a new library, or "
            "--confirm-topic to add to it anyway")
    return TopicCheck(existing, round(sim, 3), same)


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
