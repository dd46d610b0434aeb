"""Benchmark library rounds: banlist prompt tokens and model calls per round as the library grows.

What it measures
----------------
For each library size (behaviors already in ``hypothesis_library.json``) one round of 10 candidate
behaviors — 5 reworded duplicates of random library behaviors and 5 new ones — is prepared with the
real domain functions, each size in a fresh Python process, no model and no network:

* ``seed``: seed 001 as written — the generation prompt pastes every existing statement, and the
  behavior dedup is one call that pastes the whole library next to the candidates;
* ``budgeted``: this project — the generation prompt carries ``build_banlist`` (the whole list while
  it fits the budget, else one representative per proximity cluster plus labels), and the behavior
  dedup is the embedding prefilter plus model calls of 8 candidates each with their 5 nearest
  library behaviors (``dedup.behavior_items`` -> ``prefilter`` -> ``judge_request``).

Prompt tokens are estimated as ceil(characters / 4) over system prompt + user prompt + the answer's
JSON schema (what the client sends). Calls per round = 1 generation + behavior-dedup calls + 5 scoring
calls (one per surviving behavior, the same in both); the mechanism layer is the same in both and
does not grow with the library, so it is left out. ``prefilter recall`` is the share of planted
duplicates whose original is among the candidate's 5 nearest neighbours (what the model judge can
catch); ``auto`` the share the prefilter removes by itself (cosine >= 0.92). Wall seconds and peak
RSS cover building the banlist and running the prefilter (``budgeted``) or pasting (``seed``).

The corpus: ``benchmarks/proximity.py``'s seeded synthetic hypotheses (topic vocabularies of
invented words); a reworded duplicate replaces ``--edits`` (default 30%) of an original's words
with words of other library statements and rotates the sentence.

Usage::

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


def measure(size: int, approach: str, budget: int, seed: int, edits: float, dups: int = CANDIDATES_DUP) -> dict:
    """One (size, approach) in this process."""
    import resource

    from hypograph.library.banlist import build_banlist, estimate_tokens
    from hypograph.library.dedup import SYSTEM as JUDGE_SYSTEM
    from hypograph.library.dedup import behavior_items, judge_batches, judge_request, prefilter
    from hypograph.library.embedder import make_embedder
    from hypograph.library.generate import generation_request
    from hypograph.library.landscape import Landscape
    from hypograph.library.rounds import CandidateBehavior, RoundSettings
    from hypograph.library.schema import Library
    from hypograph.library.strategies import load_strategies

    items, cands, planted = round_inputs(size, seed, edits, dups)
    settings = RoundSettings(topic="synthetic topic", banlist_budget=budget, web=False)
    strategies = load_strategies()
    started = time.perf_counter()
    out = {"size": size, "approach": approach}
    if approach == "seed":
        banlist = build_banlist(items, budget=10**12)
        out["gen_tokens"] = tokens(generation_request(settings, strategies, banlist.text, Landscape(), None, items))
        out["dedup_calls"] = 1
        out["dedup_tokens"] = estimate_tokens(JUDGE_SYSTEM + banlist.text + "\n".join(cands))
        out["recall"] = out["auto"] = None  # no prefilter: the whole library is in the one dedup prompt
    else:
        banlist = build_banlist(items, budget=budget)
        out["gen_tokens"] = tokens(generation_request(settings, strategies, banlist.text, Landscape(), None, items))
        out["banlist_mode"] = banlist.stats.mode
        library = Library(topic="t", created="2026-01-01", updated="2026-01-01",
                          behaviors=[{"id": i, "source": "discover", "statement": t} for i, t in items])
        behaviors = [CandidateBehavior(key=f"c{k + 1}", source="discover", statement=t) for k, t in enumerate(cands)]
        found = behavior_items(library, behaviors, make_embedder("tfidf"), settings.neighbours)
        verdicts, ask = prefilter(found, settings.auto_drop, "behavior")
        batches = judge_batches(ask)
        out["dedup_calls"] = len(batches)
        out["dedup_tokens"] = sum(tokens(judge_request("behavior", b)) for b in batches)
        hits = [planted[k] in [r for r, _, _ in found[k].neighbours] for k in planted]
        out["recall"] = sum(hits) / len(planted)
        out["auto"] = sum(1 for k in planted
                          if verdicts.get(f"c{k + 1}") and verdicts[f"c{k + 1}"].verdict == "duplicate") / len(planted)
    out["calls"] = 1 + out["dedup_calls"] + CANDIDATES_NEW  # one scoring call per surviving (new) behavior
    out["seconds"] = round(time.perf_counter() - started, 3)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out["peak_mib"] = round(peak / 2**20 if sys.platform == "darwin" else peak / 2**10, 1)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100,1000,10000")
    p.add_argument("--budget", type=int, default=6000)
    p.add_argument("--edits", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dups", type=int, default=CANDIDATES_DUP, help="reworded duplicates among the candidates")
    p.add_argument("--json", action="store_true")
    p.add_argument("--one", nargs=2, metavar=("SIZE", "APPROACH"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(measure(int(args.one[0]), args.one[1], args.budget, args.seed, args.edits, args.dups)))
        return
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        for approach in ("seed", "budgeted"):
            cmd = [sys.executable, __file__, "--one", str(size), approach, "--budget", str(args.budget),
                   "--seed", str(args.seed), "--edits", str(args.edits), "--dups", str(args.dups)]
            rows.append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"banlist budget {args.budget} tokens; round = {args.dups + CANDIDATES_NEW} candidates "
          f"({args.dups} reworded duplicates with {args.edits:.0%} of words replaced, {CANDIDATES_NEW} new)")
    head = f"{'behaviors':>9} {'approach':>9} {'gen prompt tok':>14} {'dedup calls':>11} {'dedup tok':>10} " \
           f"{'calls/round':>11} {'prefilter recall@5':>18} {'auto':>5} {'seconds':>8} {'peak MiB':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        mode = f" ({r['banlist_mode']})" if "banlist_mode" in r else ""
        print(f"{r['size']:>9} {r['approach']:>9} {r['gen_tokens']:>14,} {r['dedup_calls']:>11} "
              f"{r['dedup_tokens']:>10,} {r['calls']:>11} {_pct(r['recall']):>18} {_pct(r['auto']):>5} "
              f"{r['seconds']:>8.2f} {r['peak_mib']:>8.1f}{mode}")


def _pct(value) -> str:
    return "—" if value is None else f"{value:.0%}"


if __name__ == "__main__":
    main()
