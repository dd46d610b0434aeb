"""Reproducible synthetic hypothesis corpora for the proximity benchmark (seeded, no network).

Two shapes:

* ``sparse``: ``size / 50`` topics (at least 4), 25-40 word texts mixing words of the topic's own
  60-word vocabulary (50%), shared general scientific words (20%) and English function words (30%),
  each drawn with a Zipf-like frequency; 2% of the hypotheses are planted paraphrases.
* ``dense``: ``size / 400`` topics (250 at 100k), 24-word texts: 45% drawn uniformly from the
  topic's 60-word vocabulary, 35% from a 3,000-word general vocabulary (Zipf), 20% English
  function words; 10% of the hypotheses are planted paraphrases. About 9 edges per node at 0.30
  with the seed's vectorizer, and each topic is one dense community.

A paraphrase copies an original, replaces ~10% of its words (two at least) with words drawn the
same way, and swaps two pairs of neighbours. Ids are H-000001..., shuffled so that paraphrases sit
anywhere in id order; ``planted`` lists each (original, paraphrase) pair in id order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PROFILES = ("sparse", "dense")

GENERAL_WORDS = [
    "increase",
    "decrease",
    "expression",
    "activity",
    "levels",
    "cells",
    "response",
    "effect",
    "associated",
    "risk",
    "patients",
    "protein",
    "gene",
    "signaling",
    "pathway",
    "regulation",
    "function",
    "mechanism",
    "model",
    "role",
    "receptor",
    "binding",
    "inhibition",
    "activation",
    "growth",
    "development",
    "disease",
    "treatment",
    "therapy",
    "dose",
    "exposure",
    "concentration",
    "tissue",
    "brain",
    "liver",
    "muscle",
    "blood",
    "plasma",
    "serum",
    "membrane",
    "structure",
    "sequence",
    "variant",
    "mutation",
    "population",
    "species",
    "environment",
    "temperature",
    "climate",
    "soil",
    "water",
    "carbon",
    "nitrogen",
    "energy",
    "metabolism",
    "stress",
    "inflammation",
    "immune",
    "infection",
    "virus",
    "bacteria",
    "resistance",
    "tolerance",
    "adaptation",
    "selection",
    "evolution",
    "diversity",
    "abundance",
    "density",
    "distribution",
    "network",
    "interaction",
    "correlation",
    "variation",
    "difference",
    "change",
    "rate",
    "time",
    "duration",
    "frequency",
    "intensity",
    "severity",
    "outcome",
    "survival",
    "mortality",
    "incidence",
    "prevalence",
    "age",
    "sex",
    "diet",
    "behavior",
    "memory",
    "learning",
    "attention",
    "performance",
    "cognition",
    "signal",
    "noise",
    "accuracy",
    "sensitivity",
    "specificity",
    "measurement",
    "estimate",
    "prediction",
    "observed",
    "reduced",
    "elevated",
    "enhanced",
    "impaired",
    "altered",
    "modulates",
    "mediates",
    "promotes",
    "suppresses",
    "induces",
    "regulates",
    "contributes",
    "depends",
    "predicts",
    "explains",
    "drives",
    "limits",
    "affects",
    "controls",
    "influences",
    "determines",
    "higher",
    "lower",
    "greater",
    "stronger",
    "weaker",
    "faster",
    "slower",
    "early",
    "late",
    "chronic",
    "acute",
    "primary",
    "secondary",
    "specific",
    "general",
    "local",
    "global",
    "cellular",
    "molecular",
    "genetic",
    "clinical",
    "structural",
    "functional",
]
COMMON_WORDS = [
    "the",
    "of",
    "in",
    "and",
    "that",
    "with",
    "by",
    "is",
    "to",
    "a",
    "an",
    "on",
    "for",
    "from",
    "as",
    "at",
    "which",
    "this",
    "these",
    "its",
    "their",
    "are",
    "be",
    "may",
    "can",
    "will",
    "not",
    "more",
    "than",
    "between",
    "during",
    "under",
    "through",
    "within",
    "among",
    "across",
    "into",
]
ONSETS = [
    "b",
    "c",
    "d",
    "f",
    "g",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "cl",
    "dr",
    "fr",
    "gr",
    "kr",
    "pl",
    "pr",
    "st",
    "tr",
]
VOWELS = ["a", "e", "i", "o", "u"]
CODAS = ["", "n", "s", "r", "l", "x"]
TOPIC_VOCABULARY = 60
PARAPHRASE_EDITS = 0.10


@dataclass
class Corpus:
    ids: list[str]
    texts: list[str]
    num_topics: int
    topics: np.ndarray  # topic of each text (a paraphrase has its original's)
    planted: list[tuple[str, str]]


def zipf(n: int, exponent: float = 1.0) -> np.ndarray:
    """Probabilities of ranks 1..n proportional to 1 / rank**exponent."""
    p = 1.0 / np.arange(1, n + 1) ** exponent
    return p / p.sum()


def pseudo_words(rng: np.random.Generator, count: int, reserved: set[str]) -> list[str]:
    """``count`` distinct invented words of three syllables and an optional coda, none in ``reserved``."""
    syllables = [o + v for o in ONSETS for v in VOWELS]
    space = len(syllables) ** 3 * len(CODAS)
    words: list[str] = []
    seen = set(reserved)
    while len(words) < count:
        for drawn in rng.choice(space, size=min(space, 2 * (count - len(words))), replace=False).tolist():
            rest, coda = divmod(drawn, len(CODAS))
            rest, s3 = divmod(rest, len(syllables))
            s1, s2 = divmod(rest, len(syllables))
            word = syllables[s1] + syllables[s2] + syllables[s3] + CODAS[coda]
            if word not in seen:
                seen.add(word)
                words.append(word)
                if len(words) == count:
                    break
    return words


@dataclass
class Shape:
    docs_per_topic: int
    words: tuple[int, int]
    mix: tuple[float, float, float]  # topic, general, common
    topic_zipf: float  # 0: uniform
    general_size: int | None  # None: GENERAL_WORDS; else that many invented words
    general_zipf: float
    paraphrase_share: float


SHAPES = {
    "sparse": Shape(50, (25, 40), (0.50, 0.20, 0.30), 1.0, None, 0.7, 0.02),
    "dense": Shape(400, (24, 24), (0.45, 0.35, 0.20), 0.0, 3000, 1.0, 0.10),
}


def make_corpus(size: int, seed: int = 0, profile: str = "sparse") -> Corpus:
    """A seeded synthetic corpus of ``size`` hypotheses of the given shape."""
    shape = SHAPES[profile]
    rng = np.random.default_rng(seed)
    num_topics = max(4, size // shape.docs_per_topic)
    num_pairs = max(1, round(shape.paraphrase_share * size))
    num_originals = size - num_pairs
    extra = shape.general_size or 0
    invented = pseudo_words(rng, num_topics * TOPIC_VOCABULARY + extra, set(COMMON_WORDS) | set(GENERAL_WORDS))
    general = invented[:extra] if extra else GENERAL_WORDS
    vocabulary = np.array(COMMON_WORDS + general + invented[extra:], dtype=object)
    general_offset = len(COMMON_WORDS)
    topic_offset = general_offset + len(general)
    topic_p = zipf(TOPIC_VOCABULARY, shape.topic_zipf)
    general_p = zipf(len(general), shape.general_zipf)
    common_p = zipf(len(COMMON_WORDS))

    def draw_words(topic: np.ndarray) -> np.ndarray:
        """One vocabulary index per entry of ``topic`` (the topic of the hypothesis being written)."""
        kind = rng.choice(3, size=topic.size, p=shape.mix)
        topical = topic_offset + topic * TOPIC_VOCABULARY + rng.choice(TOPIC_VOCABULARY, size=topic.size, p=topic_p)
        general_w = general_offset + rng.choice(len(general), size=topic.size, p=general_p)
        common = rng.choice(len(COMMON_WORDS), size=topic.size, p=common_p)
        return np.select([kind == 0, kind == 1], [topical, general_w], common)

    topics = rng.integers(num_topics, size=num_originals)
    lengths = rng.integers(shape.words[0], shape.words[1] + 1, size=num_originals)
    words = draw_words(np.repeat(topics, lengths))
    sentences = np.split(words, np.cumsum(lengths)[:-1])
    originals = rng.choice(num_originals, size=num_pairs, replace=False)
    for k in originals.tolist():
        sentences.append(paraphrase(rng, sentences[k], lambda n, t=topics[k]: draw_words(np.full(n, t))))
    all_topics = np.concatenate([topics, topics[originals]])

    position = rng.permutation(size)  # paraphrases anywhere in id order, not at the end
    ids, texts, by_position = [""] * size, [""] * size, np.empty(size, dtype=np.int64)
    width = max(6, len(str(size)))
    for k, sentence in enumerate(sentences):
        ids[position[k]] = f"H-{position[k] + 1:0{width}d}"
        texts[position[k]] = " ".join(vocabulary[sentence])
        by_position[position[k]] = all_topics[k]
    planted = [
        tuple(sorted((ids[position[k]], ids[position[num_originals + m]]))) for m, k in enumerate(originals.tolist())
    ]
    return Corpus(ids, texts, num_topics, by_position, planted)


def paraphrase(rng: np.random.Generator, sentence: np.ndarray, draw: Callable[[int], np.ndarray]) -> np.ndarray:
    """A copy of ``sentence`` with ~10% of its words (two at least) replaced by ``draw(n)`` and two
    pairs of neighbours swapped."""
    copy = sentence.copy()
    edits = max(2, round(PARAPHRASE_EDITS * copy.size))
    copy[rng.choice(copy.size, size=edits, replace=False)] = draw(edits)
    for i in rng.choice(copy.size - 1, size=2, replace=False).tolist():
        copy[i], copy[i + 1] = copy[i + 1], copy[i]
    return copy


def write_run_dir(corpus: Corpus, root: Path) -> Path:
    """``root/hypotheses/H-*.json`` ({"id", "title": first six words, "statement": the rest}) and
    ``root/planted.json``; written once per corpus (a ``.complete`` marker says it is whole)."""
    root = Path(root)
    if (root / ".complete").exists():
        return root
    hyp = root / "hypotheses"
    hyp.mkdir(parents=True, exist_ok=True)
    for hid, text in zip(corpus.ids, corpus.texts, strict=True):
        words = text.split()
        with open(hyp / f"{hid}.json", "w", encoding="utf-8") as f:
            json.dump({"id": hid, "title": " ".join(words[:6]), "statement": " ".join(words[6:])}, f)
    (root / "planted.json").write_text(json.dumps(corpus.planted), encoding="utf-8")
    (root / "topics.json").write_text(json.dumps(corpus.topics.tolist()), encoding="utf-8")
    (root / ".complete").write_text("", encoding="utf-8")
    return root


def corpus_dir(workdir: Path, profile: str, size: int, seed: int) -> Path:
    return Path(workdir) / f"{profile}-{size}-s{seed}"


def ensure_run_dir(workdir: Path, profile: str, size: int, seed: int) -> Path:
    """The run directory of this corpus, generated on first use."""
    root = corpus_dir(workdir, profile, size, seed)
    if not (root / ".complete").exists():
        write_run_dir(make_corpus(size, seed, profile), root)
    return root


if __name__ == "__main__":  # python benchmarks/proximity_corpus.py PROFILE SIZE DIR [SEED]
    import sys

    profile, size, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    write_run_dir(make_corpus(size, int(sys.argv[4]) if len(sys.argv) > 4 else 0, profile), out)
    print(out, len(os.listdir(out / "hypotheses")))
