"""Benchmark the proximity pipeline (embed -> graph -> clusters -> dupes) against a naive baseline.

What it measures
----------------
For each corpus size it generates a reproducible synthetic corpus (seeded, no network, no files)
and runs the four proximity stages twice, each approach in a fresh Python subprocess:

* ``hypograph``: ``embed`` (TF-IDF, sparse) -> ``similarity_graph`` (chunked sparse products, never
  N x N) -> ``labelled_clusters`` (igraph Louvain split by components, plus c-TF-IDF keyword labels)
  -> ``duplicate_pairs`` (graph edges >= 0.80).
* ``naive``: the same ``embed`` -> ``sklearn.metrics.pairwise.cosine_similarity`` as a dense N x N
  matrix, edges >= 0.30 into a ``networkx.Graph`` -> ``networkx.community.louvain_communities``
  (no keyword labels, so this stage does less work than hypograph's) -> dupes read off the dense
  matrix >= 0.80. Skipped above ``--naive-max`` documents, where the dense matrix alone would not
  reasonably fit in memory.

Reading the output
------------------
``seconds`` is the wall time of one stage. ``peak MiB`` is the process's peak resident set size
(``ru_maxrss``) read right after the stage: a running high-water mark, so a stage that allocates
less than an earlier one shows the earlier peak. The ``baseline`` row is the RSS before the first
stage, after the libraries are imported and the corpus is generated (on Linux the peak is reset
there, so the corpus generator's freed temporaries do not mask the stages); the ``mem x`` column
divides naive's growth above its baseline by hypograph's (the memory the stages themselves need),
the summary line also gives the plain ratio of the final peaks. ``time x`` is naive seconds over
hypograph seconds: above 1, hypograph is faster.

Below each table: edge, cluster and duplicate-pair counts of both approaches, and the recall of the
planted paraphrase pairs among the duplicate pairs (fraction of planted pairs found at >= 0.80).

The corpus
----------
``size / 50`` topics (at least 4), each with its own vocabulary of invented pseudo-words (syllable
combinations, so the vocabulary grows with the corpus like a real one). A hypothesis is a 25-40
word sentence mixing words of its topic, shared general scientific words and common function
words, each drawn with a Zipf-like frequency. About 2% of the hypotheses are paraphrases planted
by copying another one and replacing ~10% of its words and swapping a few neighbours.

Usage::

    .venv/bin/python benchmarks/proximity.py --sizes 1000,10000,100000 [--json] [--seed 0] [--naive-max 20000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

GRAPH_THRESHOLD = 0.30
DUPE_THRESHOLD = 0.80
STAGES = ("embed", "graph", "clusters", "dupes")
APPROACHES = ("hypograph", "naive")

DOCS_PER_TOPIC = 50
TOPIC_VOCABULARY = 60
WORDS_PER_HYPOTHESIS = (25, 40)
# Share of a hypothesis's words drawn from its topic, from the general scientific words and from
# the common words (mostly English stop words, which the TF-IDF vectorizer drops).
WORD_MIX = (0.50, 0.20, 0.30)
# Flatter than Zipf's 1.0 so the most frequent general word is in ~40% of hypotheses, not ~70%.
GENERAL_ZIPF = 0.7
PARAPHRASE_SHARE = 0.02
PARAPHRASE_EDITS = 0.10

GENERAL_WORDS = """
    increase decrease expression activity levels cells response effect associated risk patients
    protein gene signaling pathway regulation function mechanism model role receptor binding
    inhibition activation growth development disease treatment therapy dose exposure concentration
    tissue brain liver muscle blood plasma serum membrane structure sequence variant mutation
    population species environment temperature climate soil water carbon nitrogen energy metabolism
    stress inflammation immune infection virus bacteria resistance tolerance adaptation selection
    evolution diversity abundance density distribution network interaction correlation variation
    difference change rate time duration frequency intensity severity outcome survival mortality
    incidence prevalence age sex diet behavior memory learning attention performance cognition
    signal noise accuracy sensitivity specificity measurement estimate prediction observed reduced
    elevated enhanced impaired altered modulates mediates promotes suppresses induces regulates
    contributes depends predicts explains drives limits affects controls influences determines
    higher lower greater stronger weaker faster slower early late chronic acute primary secondary
    specific general local global cellular molecular genetic clinical structural functional
    """.split()
COMMON_WORDS = """
    the of in and that with by is to a an on for from as at which this these its their are be
    may can will not more than between during under through within among across into
    """.split()
ONSETS = "b c d f g k l m n p r s t v z br cl dr fr gr kr pl pr st tr".split()
VOWELS = "a e i o u".split()
CODAS = ["", "n", "s", "r", "l", "x"]


@dataclass
class Corpus:
    ids: list[str]
    texts: list[str]
    num_topics: int
    planted: list[tuple[str, str]]  # each planted (original, paraphrase) pair as (smaller id, larger id)


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
        for code in rng.choice(space, size=min(space, 2 * (count - len(words))), replace=False).tolist():
            code, coda = divmod(code, len(CODAS))
            code, s3 = divmod(code, len(syllables))
            s1, s2 = divmod(code, len(syllables))
            word = syllables[s1] + syllables[s2] + syllables[s3] + CODAS[coda]
            if word not in seen:
                seen.add(word)
                words.append(word)
                if len(words) == count:
                    break
    return words


def make_corpus(size: int, seed: int) -> Corpus:
    """A seeded synthetic corpus of ``size`` hypotheses, ~2% of them planted paraphrases."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    rng = np.random.default_rng(seed)
    num_topics = max(4, size // DOCS_PER_TOPIC)
    num_pairs = max(1, round(PARAPHRASE_SHARE * size))
    num_originals = size - num_pairs

    topic_words = pseudo_words(rng, num_topics * TOPIC_VOCABULARY, set(ENGLISH_STOP_WORDS) | set(GENERAL_WORDS))
    vocabulary = np.array(COMMON_WORDS + GENERAL_WORDS + topic_words, dtype=object)
    general_offset = len(COMMON_WORDS)
    topic_offset = general_offset + len(GENERAL_WORDS)

    def draw_words(topic: np.ndarray) -> np.ndarray:
        """One vocabulary index per entry of ``topic`` (the topic of the hypothesis being written)."""
        kind = rng.choice(3, size=topic.size, p=WORD_MIX)
        topical = topic_offset + topic * TOPIC_VOCABULARY + rng.choice(TOPIC_VOCABULARY, size=topic.size, p=zipf(TOPIC_VOCABULARY))
        general = general_offset + rng.choice(len(GENERAL_WORDS), size=topic.size, p=zipf(len(GENERAL_WORDS), GENERAL_ZIPF))
        common = rng.choice(len(COMMON_WORDS), size=topic.size, p=zipf(len(COMMON_WORDS)))
        return np.select([kind == 0, kind == 1], [topical, general], common)

    topics = rng.integers(num_topics, size=num_originals)
    lengths = rng.integers(WORDS_PER_HYPOTHESIS[0], WORDS_PER_HYPOTHESIS[1] + 1, size=num_originals)
    words = draw_words(np.repeat(topics, lengths))
    sentences = np.split(words, np.cumsum(lengths)[:-1])

    originals = rng.choice(num_originals, size=num_pairs, replace=False)
    for k in originals.tolist():
        sentences.append(paraphrase(rng, sentences[k], lambda n, t=topics[k]: draw_words(np.full(n, t))))

    # Shuffle so that paraphrases sit anywhere in id order, not at the end.
    position = rng.permutation(size)
    ids = [""] * size
    texts = [""] * size
    width = max(6, len(str(size)))
    for k, sentence in enumerate(sentences):
        ids[position[k]] = f"H-{position[k] + 1:0{width}d}"
        texts[position[k]] = " ".join(vocabulary[sentence])
    planted = [tuple(sorted((ids[position[k]], ids[position[num_originals + m]]))) for m, k in enumerate(originals.tolist())]
    return Corpus(ids, texts, num_topics, planted)


def paraphrase(rng: np.random.Generator, sentence: np.ndarray, draw: Callable[[int], np.ndarray]) -> np.ndarray:
    """A copy of ``sentence`` with ~10% of its words replaced by ``draw(n)`` and two neighbours swapped."""
    copy = sentence.copy()
    edits = max(1, round(PARAPHRASE_EDITS * copy.size))
    copy[rng.choice(copy.size, size=edits, replace=False)] = draw(edits)
    for i in rng.choice(copy.size - 1, size=2, replace=False).tolist():
        copy[i], copy[i + 1] = copy[i + 1], copy[i]
    return copy


# --- one approach in this process --------------------------------------------------------------


def peak_mib() -> float:
    """Peak resident set size of this process so far, in MiB (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def forget_peak() -> None:
    """Reset the peak RSS to the current RSS (Linux), so memory freed before now cannot hide later growth.

    Elsewhere a no-op: the baseline then also holds the corpus generator's freed temporaries.
    """
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


class Stages:
    """Wall seconds and peak RSS after each ``with stages.run(name):`` block."""

    def __init__(self) -> None:
        forget_peak()
        self.baseline_mib = peak_mib()
        self.rows: list[dict] = []

    @contextmanager
    def run(self, name: str):
        start = time.perf_counter()
        yield
        self.rows.append({"stage": name, "seconds": time.perf_counter() - start, "peak_mib": peak_mib()})


def run_hypograph(corpus: Corpus) -> tuple[Stages, dict]:
    import igraph  # noqa: F401  (imported before the baseline, like the naive approach's libraries)
    from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: F401

    from hypograph.proximity.communities import labelled_clusters
    from hypograph.proximity.dupes import duplicate_pairs
    from hypograph.proximity.embed import embed
    from hypograph.proximity.graph import similarity_graph

    stages = Stages()
    with stages.run("embed"):
        embeddings = embed(corpus.ids, corpus.texts)
    with stages.run("graph"):
        graph = similarity_graph(embeddings.ids, embeddings.matrix, GRAPH_THRESHOLD)
    with stages.run("clusters"):
        clusters = labelled_clusters(graph, dict(zip(corpus.ids, corpus.texts)), terms=embeddings)
    with stages.run("dupes"):
        dupes = duplicate_pairs(graph, DUPE_THRESHOLD)
    pairs = {(d.a, d.b) for d in dupes}
    return stages, {"edges": graph.num_edges, "clusters": clusters.num_clusters, "dupe_pairs": pairs}


def run_naive(corpus: Corpus) -> tuple[Stages, dict]:
    import networkx as nx
    from sklearn.metrics.pairwise import cosine_similarity

    from hypograph.proximity.embed import embed

    stages = Stages()
    with stages.run("embed"):
        embeddings = embed(corpus.ids, corpus.texts)
    with stages.run("graph"):
        sim = cosine_similarity(embeddings.matrix)  # dense N x N
        rows, cols = np.nonzero(np.triu(sim >= GRAPH_THRESHOLD, k=1))
        graph = nx.Graph()
        graph.add_nodes_from(range(len(corpus.ids)))
        graph.add_weighted_edges_from(zip(rows.tolist(), cols.tolist(), sim[rows, cols].tolist()))
    with stages.run("clusters"):
        communities = nx.community.louvain_communities(graph, weight="weight", seed=42)
    with stages.run("dupes"):
        rows, cols = np.nonzero(np.triu(sim >= DUPE_THRESHOLD, k=1))
        pairs = {(corpus.ids[i], corpus.ids[j]) for i, j in zip(rows.tolist(), cols.tolist())}
    return stages, {"edges": graph.number_of_edges(), "clusters": len(communities), "dupe_pairs": pairs}


def worker(approach: str, size: int, seed: int) -> None:
    """Generate the corpus, run one approach, print its measurements as one JSON object."""
    corpus = make_corpus(size, seed)
    stages, result = (run_hypograph if approach == "hypograph" else run_naive)(corpus)
    found = result.pop("dupe_pairs")
    recall = sum(pair in found for pair in corpus.planted) / len(corpus.planted)
    print(json.dumps({
        "topics": corpus.num_topics,
        "planted": len(corpus.planted),
        "baseline_mib": stages.baseline_mib,
        "stages": stages.rows,
        **result,
        "dupes": len(found),
        "recall": recall,
    }))


def measure(approach: str, size: int, seed: int) -> dict:
    """Run one approach on one size in a fresh interpreter, so its peak RSS is its own."""
    command = [sys.executable, __file__, "--worker", approach, "--sizes", str(size), "--seed", str(seed)]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(done.stdout)


# --- reporting ----------------------------------------------------------------------------------


def skip_reason(size: int) -> str:
    """Why the naive approach did not run: its float32 N x N similarity matrix alone."""
    return f"skipped (dense N×N would need {size * size * 4 / 2**30:.1f} GiB)"


def ratio(naive: float, hypograph: float) -> float | None:
    return naive / hypograph if hypograph > 0 else None


def memory_ratio(naive: dict, hypograph: dict, peak_naive: float, peak_hypograph: float) -> float | None:
    """Growth above baseline, naive over hypograph; None when hypograph grew by less than 1 MiB."""
    grown = peak_hypograph - hypograph["baseline_mib"]
    return (peak_naive - naive["baseline_mib"]) / grown if grown >= 1 else None


def totals(run: dict) -> tuple[float, float]:
    return sum(s["seconds"] for s in run["stages"]), run["stages"][-1]["peak_mib"]


def json_lines(size: int, runs: dict[str, dict | None]) -> list[dict]:
    lines = []
    for approach in APPROACHES:
        run = runs[approach]
        if run is None:
            lines.append({"record": "skipped", "size": size, "approach": approach, "reason": skip_reason(size)})
            continue
        for stage in run["stages"]:
            lines.append({"record": "stage", "size": size, "approach": approach, **stage, "baseline_mib": run["baseline_mib"]})
        seconds, peak = totals(run)
        keys = ("topics", "planted", "baseline_mib", "edges", "clusters", "dupes", "recall")
        lines.append({"record": "summary", "size": size, "approach": approach, "seconds": seconds, "peak_mib": peak, **{k: run[k] for k in keys}})
    if runs["naive"] is not None:
        (hyp_s, hyp_peak), (naive_s, naive_peak) = totals(runs["hypograph"]), totals(runs["naive"])
        lines.append({
            "record": "comparison",
            "size": size,
            "time_ratio": ratio(naive_s, hyp_s),
            "memory_ratio": memory_ratio(runs["naive"], runs["hypograph"], naive_peak, hyp_peak),
            "peak_ratio": ratio(naive_peak, hyp_peak),
        })
    return lines


def table(size: int, runs: dict[str, dict | None]) -> list[str]:
    hyp, naive = runs["hypograph"], runs["naive"]

    def num(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    def times(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}x"

    row = "{:<10} {:>12} {:>10} {:>10} {:>10} {:>8} {:>8}"
    lines = [
        f"== {size:,} hypotheses: {hyp['topics']:,} topics, {hyp['planted']:,} planted paraphrase pairs ==",
        row.format("stage", "hypograph s", "peak MiB", "naive s", "peak MiB", "time x", "mem x"),
        row.format("baseline", "", f"{hyp['baseline_mib']:.0f}", "", num(naive and naive["baseline_mib"], ".0f"), "", ""),
    ]
    labels = [*STAGES, "total"]
    hyp_rows = [*hyp["stages"], dict(zip(("seconds", "peak_mib"), totals(hyp)))]
    naive_rows = [*naive["stages"], dict(zip(("seconds", "peak_mib"), totals(naive)))] if naive else [None] * len(labels)
    for label, h, n in zip(labels, hyp_rows, naive_rows):
        lines.append(row.format(
            label,
            f"{h['seconds']:.2f}",
            f"{h['peak_mib']:.0f}",
            num(n and n["seconds"], ".2f"),
            num(n and n["peak_mib"], ".0f"),
            times(n and ratio(n["seconds"], h["seconds"])),
            times(n and memory_ratio(naive, hyp, n["peak_mib"], h["peak_mib"])),
        ))
    lines.append(f"hypograph: {hyp['edges']:,} edges, {hyp['clusters']:,} clusters, {hyp['dupes']:,} dupe pairs >= {DUPE_THRESHOLD}, planted recall {hyp['recall']:.3f}")
    if naive:
        lines.append(f"naive:     {naive['edges']:,} edges, {naive['clusters']:,} clusters, {naive['dupes']:,} dupe pairs >= {DUPE_THRESHOLD}, planted recall {naive['recall']:.3f}")
        lines.append(f"peak RSS ratio naive/hypograph, baseline included: {ratio(totals(naive)[1], totals(hyp)[1]):.1f}x")
    else:
        lines.append(f"naive:     {skip_reason(size)}")
    return lines


HEADER = """\
Proximity benchmark: hypograph (sparse, chunked) vs naive (dense N x N cosine + networkx), TF-IDF.
Each approach runs in a fresh subprocess. 'hypograph s' / 'naive s': wall seconds of the stage.
'peak MiB': peak RSS (ru_maxrss) of the process right after the stage, a running high-water mark;
'baseline' is the RSS before the first stage (libraries imported, corpus generated, peak reset).
'time x' = naive s / hypograph s; 'mem x' = naive growth above its baseline / hypograph's."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated corpus sizes")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed")
    parser.add_argument("--naive-max", type=int, default=20_000, help="largest size the naive approach runs at")
    parser.add_argument("--json", action="store_true", help="one JSON object per line instead of tables")
    parser.add_argument("--worker", choices=APPROACHES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.worker:
        worker(args.worker, sizes[0], args.seed)
        return
    if not args.json:
        print(HEADER, end="\n\n", flush=True)
    for size in sizes:
        runs = {
            "hypograph": measure("hypograph", size, args.seed),
            "naive": measure("naive", size, args.seed) if size <= args.naive_max else None,
        }
        if args.json:
            for line in json_lines(size, runs):
                print(json.dumps(line), flush=True)
        else:
            print("\n".join(table(size, runs)), end="\n\n", flush=True)


if __name__ == "__main__":
    main()
