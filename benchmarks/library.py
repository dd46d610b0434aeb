"""Benchmark library dedup: does the model see the true duplicate, and what a round costs as the library grows.

Part 1 — the labelled set (default)
-----------------------------------
``tests/data/library_pairs.json``: 72 behavior pairs written by hand (40 paraphrases with little
word overlap, 12 opposite claims, 10 narrower or broader claims, 10 unrelated), all on LLM
behaviors so neighbours compete. The library is every pair's ``a``; the candidates (the ``b``s)
arrive in rounds of 10, as a round's generation would give them, and ``dedup.neighbour_items``
chooses what the model judge is shown for each. ``recall`` is the share of duplicate pairs whose
``a`` is among the neighbours shown — what the model can catch at best; ``shown`` the mean number
of neighbours per candidate (k library nodes + up to 5 earlier candidates + cluster
representatives, the library being past 60 nodes). Per backend (sbert = the ``semantic`` extra's
MiniLM, tfidf = the lexical fallback) and k.

Part 2 — growth (``--sizes``)
-----------------------------
For each library size one round of 10 candidate behaviors — 5 reworded duplicates of random library
behaviors and 5 new ones — is prepared with the real domain functions, each size in a fresh Python
process, no model and no network:

* ``seed``: the library rounds spec as written — the generation prompt pastes every existing statement, and the
  behavior dedup is one call that pastes the whole library next to the candidates;
* ``budgeted``: this project — the generation prompt carries ``build_banlist`` (the whole list while
  it fits the budget, else one representative per proximity cluster plus labels), and the behavior
  dedup is model calls of 8 candidates each with their nearest library behaviors
  (``dedup.behavior_items`` -> ``judge_request``; only exact repeats are settled without a call).

Prompt tokens are estimated as ceil(characters / 4) over system prompt + user prompt + the answer's
JSON schema (what the client sends). Calls per round = 1 generation + behavior-dedup calls + 5 scoring
calls (one per surviving behavior, the same in both); the mechanism layer and the search-query call
are the same in both and left out. ``recall`` is the share of planted duplicates whose original is
shown to the judge. The corpus: ``benchmarks/proximity.py``'s seeded synthetic hypotheses (topic
vocabularies of invented words, hence ``--embedder tfidf`` by default here); a reworded duplicate
replaces ``--edits`` (default 30%) of an original's words with words of other library statements and
rotates the sentence.

Usage::

    .venv/bin/python benchmarks/library.py                      # part 1: the labelled set
    .venv/bin/python benchmarks/library.py --sizes 100,1000,10000 [--budget 6000] [--edits 0.3] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]
CANDIDATES_NEW, CANDIDATES_DUP = 5, 5
PAIRS = HERE.parent / "tests" / "data" / "library_pairs.json"
ROUND_SIZE = 10


def load_pairs(path: Path = PAIRS) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["pairs"]


def pair_recall(pairs: list[dict], embedder, k: int) -> dict:
    """Share of duplicate pairs whose ``a`` is among the neighbours shown for ``b`` (candidates in
    rounds of ``ROUND_SIZE`` against the library of every ``a``), and the mean neighbours shown."""
    from hypograph.library.dedup import neighbour_items

    existing = [(f"B{i + 1}", p["a"]) for i, p in enumerate(pairs)]
    hits, duplicates, shown, misses = 0, 0, [], []
    for start in range(0, len(pairs), ROUND_SIZE):
        queries = [(f"c{i + 1}", pairs[i]["b"]) for i in range(start, min(start + ROUND_SIZE, len(pairs)))]
        for i, item in zip(
            range(start, start + len(queries)), neighbour_items("behavior", existing, queries, embedder, k), strict=True
        ):
            shown.append(len(item.neighbours))
            if pairs[i]["label"] == "duplicate":
                duplicates += 1
                found = f"B{i + 1}" in [r for r, _, _ in item.neighbours]
                hits += found
                if not found:
                    misses.append(i + 1)
    return {
        "k": k,
        "duplicates": duplicates,
        "found": hits,
        "recall": hits / duplicates,
        "shown": sum(shown) / len(shown),
        "missed_pairs": misses,
    }


def pairs_table(backends=("sbert", "tfidf"), ks=(5, 10, 15)) -> list[dict]:
    from hypograph.library.embedder import backend_of, make_embedder

    pairs = load_pairs()
    rows = []
    for backend in backends:
        embedder = make_embedder(backend)
        for k in ks:
            rows.append({"backend": backend_of(embedder), **pair_recall(pairs, embedder, k)})
    return rows


def round_inputs(size: int, seed: int, edits: float, dups: int = CANDIDATES_DUP):
    """(library items, candidate texts, {candidate index: original id}) for one round."""
    import numpy as np
    from proximity_corpus import make_corpus

    corpus = make_corpus(size + CANDIDATES_NEW, seed)
    rng = np.random.default_rng(seed + 1)
    items = [(f"B{k + 1}", t) for k, t in enumerate(corpus.texts[:size])]
    new = corpus.texts[size:]
    planted = {}
    cands = []
    for k in rng.choice(size, size=min(dups, size), replace=False).tolist():
        words = items[k][1].split()
        donor = items[int(rng.integers(size))][1].split()
        for i in rng.choice(len(words), size=max(1, round(edits * len(words))), replace=False).tolist():
            words[i] = donor[int(rng.integers(len(donor)))]
        cut = int(rng.integers(1, len(words)))
        planted[len(cands)] = items[k][0]
        cands.append(" ".join(words[cut:] + words[:cut]))
    cands += new
    return items, cands, planted


def tokens(request) -> int:
    from hypograph.library.banlist import estimate_tokens

    return estimate_tokens(request.system + request.user + json.dumps(request.schema.model_json_schema()))


def measure(size: int, approach: str, args: argparse.Namespace) -> dict:
    """One (size, approach) in this process; ``args``: the command line's budget, seed, edits,
    dups and embedder."""
    import resource

    from hypograph.library.banlist import build_banlist, estimate_tokens
    from hypograph.library.dedup import behavior_items, judge_batches, judge_request, settled
    from hypograph.library.embedder import make_embedder
    from hypograph.library.generate import generation_request
    from hypograph.library.landscape import Landscape
    from hypograph.library.prompts import prompt
    from hypograph.library.rounds import CandidateBehavior, RoundSettings
    from hypograph.library.schema import Library
    from hypograph.library.strategies import load_strategies

    budget = args.budget
    items, cands, planted = round_inputs(size, args.seed, args.edits, args.dups)
    settings = RoundSettings(topic="synthetic topic", banlist_budget=budget, web=False)
    strategies = load_strategies()
    started = time.perf_counter()
    out = {"size": size, "approach": approach}
    if approach == "seed":
        banlist = build_banlist(items, budget=10**12)
        out["gen_tokens"] = tokens(generation_request(settings, strategies, banlist.text, Landscape(), None))
        out["dedup_calls"] = 1
        out["dedup_tokens"] = estimate_tokens(prompt("dedup")[1] + banlist.text + "\n".join(cands))
        out["recall"] = 1.0  # the whole library is in the one dedup prompt
    else:
        banlist = build_banlist(items, budget=budget)
        out["gen_tokens"] = tokens(generation_request(settings, strategies, banlist.text, Landscape(), None))
        out["banlist_mode"] = banlist.stats.mode
        library = Library(
            topic="t",
            created="2026-01-01",
            updated="2026-01-01",
            behaviors=[{"id": i, "source": "discover", "statement": t} for i, t in items],
        )
        behaviors = [CandidateBehavior(key=f"c{k + 1}", source="discover", statement=t) for k, t in enumerate(cands)]
        found = behavior_items(library, behaviors, make_embedder(args.embedder), settings.neighbours)
        _, ask = settled(found, "behavior")
        batches = judge_batches(ask)
        out["dedup_calls"] = len(batches)
        out["dedup_tokens"] = sum(tokens(judge_request("behavior", b)) for b in batches)
        hits = [planted[k] in [r for r, _, _ in found[k].neighbours] for k in planted]
        out["recall"] = sum(hits) / len(planted)
    out["calls"] = 1 + out["dedup_calls"] + CANDIDATES_NEW  # one scoring call per surviving (new) behavior
    out["seconds"] = round(time.perf_counter() - started, 3)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out["peak_mib"] = round(peak / 2**20 if sys.platform == "darwin" else peak / 2**10, 1)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", help="part 2: library sizes, e.g. 100,1000,10000 (default: part 1, the labelled set)")
    p.add_argument("--embedder", default="tfidf", help="part 2's embedder (its corpus is of invented words)")
    p.add_argument("--budget", type=int, default=6000)
    p.add_argument("--edits", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dups", type=int, default=CANDIDATES_DUP, help="reworded duplicates among the candidates")
    p.add_argument("--json", action="store_true")
    p.add_argument("--one", nargs=2, metavar=("SIZE", "APPROACH"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(measure(int(args.one[0]), args.one[1], args)))
    elif not args.sizes:
        _part_1(args.json)
    else:
        _part_2(args)


def _part_1(as_json: bool) -> None:
    """Part 1: the labelled pairs, each backend and k: is the true duplicate among the neighbours shown."""
    rows = pairs_table()
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    pairs = load_pairs()
    counts = {lab: sum(1 for p in pairs if p["label"] == lab) for lab in dict.fromkeys(p["label"] for p in pairs)}
    print(
        f"labelled set {PAIRS.relative_to(HERE.parent)}: {len(pairs)} pairs "
        f"({', '.join(f'{n} {lab}' for lab, n in counts.items())}); candidates in rounds of {ROUND_SIZE}"
    )
    head = f"{'backend':>26} {'k':>3} {'true duplicate shown':>21} {'neighbours shown':>17}  missed pairs"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['backend'][:26]:>26} {r['k']:>3} {r['found']:>8}/{r['duplicates']} = {r['recall']:>6.1%} "
            f"{r['shown']:>17.1f}  {r['missed_pairs'] or '-'}"
        )


def _part_2(args: argparse.Namespace) -> None:
    """Part 2: synthetic libraries of each size, the seed's whole-library prompts against the budgeted
    banlist and neighbours; each measured in a process of its own (its peak memory alone)."""
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        for approach in ("seed", "budgeted"):
            cmd = [
                sys.executable,
                __file__,
                "--one",
                str(size),
                approach,
                "--budget",
                str(args.budget),
                "--seed",
                str(args.seed),
                "--edits",
                str(args.edits),
                "--dups",
                str(args.dups),
                "--embedder",
                args.embedder,
            ]
            rows.append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"banlist budget {args.budget} tokens; round = {args.dups + CANDIDATES_NEW} candidates "
        f"({args.dups} reworded duplicates with {args.edits:.0%} of words replaced, {CANDIDATES_NEW} new)"
    )
    head = (
        f"{'behaviors':>9} {'approach':>9} {'gen prompt tok':>14} {'dedup calls':>11} {'dedup tok':>10} "
        f"{'calls/round':>11} {'judge sees dup':>14} {'seconds':>8} {'peak MiB':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        mode = f" ({r['banlist_mode']})" if "banlist_mode" in r else ""
        print(
            f"{r['size']:>9} {r['approach']:>9} {r['gen_tokens']:>14,} {r['dedup_calls']:>11} "
            f"{r['dedup_tokens']:>10,} {r['calls']:>11} {_pct(r['recall']):>14} "
            f"{r['seconds']:>8.2f} {r['peak_mib']:>8.1f}{mode}"
        )


def _pct(value) -> str:
    return "—" if value is None else f"{value:.0%}"


if __name__ == "__main__":
    main()
