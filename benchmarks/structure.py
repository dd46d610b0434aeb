"""Model calls and tokens of structure step 4 (4a merge/drop, 4b carving) as a vault grows, and the
recall of 4a's candidate net.

Vaults of N step-3 hypotheses are generated from the example vault's thirty (``examples/vault``):

* distinct claims: the thirty, then variants of them set at one site each ("At Pylos, …"), distinct
  hypotheses that read alike (the hard negatives);
* paraphrases (30% of N): a claim reworded by synonyms and clause order, the same hypothesis (a
  family of two or three: the duplicates 4a should merge, some only by chaining).

The model is a local OpenAI-compatible stub server (``tests/support/llm_stub.py``) that answers every
question deterministically and correctly from the generator's ground truth (MERGE exactly when two
hypotheses are of one family; nothing off-topic; one cluster per question hint), so the figures
are the cost of asking, not of a model's mistakes. Tokens are counted as characters / 4.

Two tables:

1. ``net``: for each candidate net (no model), the candidate pairs and the recall of the duplicate
   pairs a perfect judge would recover from them (directly or by chaining MERGE answers);
2. ``cost``: 4a + 4b end to end through the real client and the policy seam, one pair per call
   (the narrow net of 3 neighbours, as before) against batched pairs (``PAIR_BATCH``), narrow and
   wide (``NET``): calls, prompt and completion tokens, recall, groups closed by chaining, wall time.

    .venv/bin/python benchmarks/structure.py [--sizes 32,100,500] [--json]

3. ``--time``: wall time of step 4 offline (no model) on vaults of 500, 5,000 and 20,000 hypotheses,
   first run and a no-change re-run, through the domain functions the assets call, one after the
   other as the three assets do (each reads the vault once under the structuring lock):
   ``run_dispositions(root, verdicts, embeddings, OfflinePolicy())`` (4a),
   ``run_clusters(root, OfflinePolicy())`` (4b), ``write_map(root)``, then the seven checks
   (``all_checks(open_vault(root), read_baseline(root))``, as ``hypograph check``). Proximity's
   inputs (TF-IDF embeddings, duplicate pairs at 0.80, offline verdicts) are computed first, timed
   apart. Each size runs in a process of its own:

    .venv/bin/python benchmarks/structure.py --time [--sizes 500,5000,20000] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from itertools import combinations
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

import llm_stub  # noqa: E402

from hypograph.environment import llm_config  # noqa: E402
from hypograph.hypotheses import load_corpus  # noqa: E402
from hypograph.llm import LLMClient, LLMConfig, ModelPolicy  # noqa: E402
from hypograph.paths import OURS  # noqa: E402
from hypograph.proximity.adjudicate import adjudicate  # noqa: E402
from hypograph.proximity.dupes import duplicate_pairs  # noqa: E402
from hypograph.proximity.embed import embed  # noqa: E402
from hypograph.proximity.graph import similarity_graph  # noqa: E402
from hypograph.structure.carving import CARVE_SYSTEM, run_clusters  # noqa: E402
from hypograph.structure.dispositions import MERGE_SYSTEM, NET, PAIR_BATCH, TOPIC_SYSTEM, Net, run_dispositions  # noqa: E402
from hypograph.structure.dispositions.candidates import candidate_pairs  # noqa: E402
from hypograph.structure.scope import open_to_4a  # noqa: E402
from hypograph.vault.vault import open_vault  # noqa: E402

EXAMPLE = REPO / "examples" / "vault"
SITES = [
    "Pylos",
    "Mycenae",
    "Tiryns",
    "Thebes",
    "Knossos",
    "Ugarit",
    "Hattusa",
    "Emar",
    "Alalakh",
    "Enkomi",
    "Kition",
    "Sidon",
    "Byblos",
    "Megiddo",
    "Lachish",
    "Ashkelon",
    "Carchemish",
    "Tarsus",
]
SYNONYMS = dict(
    pair.split(":")
    for pair in [
        "multi-decade:decades-long",
        "across:throughout",
        "eastern:east",
        "beginning:starting",
        "around:about",
        "repeated:recurrent",
        "harvest:crop",
        "failures:losses",
        "undermined:weakened",
        "led:brought",
        "destruction:ruin",
        "layers:levels",
        "conventionally:traditionally",
        "attributed:ascribed",
        "single:one",
        "local:regional",
        "wars:conflicts",
        "neighbouring:adjacent",
        "polities:states",
        "rather:instead",
        "common:shared",
        "external:outside",
        "agent:cause",
        "earthquakes:quakes",
        "strong:severe",
        "destroyed:ruined",
        "centres:cities",
        "sequence:series",
        "raiders:marauders",
        "seaborne:maritime",
        "main:chief",
        "coastal:seaside",
        "loss:disappearance",
        "starved:deprived",
        "trade:commerce",
        "routes:paths",
        "epidemic:plague",
        "kingdoms:realms",
        "protracted:prolonged",
        "lasting:spanning",
        "abrupt:sudden",
        "generation:lifetime",
        "several:multiple",
        "stresses:pressures",
        "cheap:inexpensive",
        "power:dominance",
        "elites:rulers",
        "fell:collapsed",
        "depended:relied",
        "grain:cereal",
        "shipped:carried",
        "revolts:uprisings",
        "exactions:levies",
        "famine:hunger",
        "displaced:uprooted",
        "groups:peoples",
        "failure:breakdown",
        "hub:central",
        "cascaded:spread",
        "network:system",
        "flood:inundation",
        "agriculture:farming",
        "buffered:shielded",
        "standing:permanent",
        "army:military",
        "repel:repulse",
        "survived:endured",
        "invaders:attackers",
        "households:families",
        "foreigners:outsiders",
        "conquering:invading",
        "caused:triggered",
        "collapse:breakdown",
        "economies:economy",
        "palace:palatial",
    ]
)
WORD_RE = re.compile(r"^(\W*)([\w-]+)(\W*)$")


# -- the generated vault ----------------------------------------------------------------------------------------------


def reword(text: str, rng: random.Random) -> str:
    """``text`` with most words that have a synonym replaced (capitals and punctuation kept)."""
    out = []
    for token in text.split():
        m = WORD_RE.match(token)
        word = m.group(2) if m else ""
        swap = SYNONYMS.get(word.lower())
        if swap and rng.random() < 0.8:
            swap = swap[0].upper() + swap[1:] if word[0].isupper() else swap
            out.append(m.group(1) + swap + m.group(3))
        else:
            out.append(token)
    return " ".join(out)


def frontmatter(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8").split("---", 2)[1])


# The example vault's planted duplicates (examples/VAULT_NOTES.md): near word for word, reworded,
# and paraphrased with almost no word in common (TF-IDF cosine near 0).
PLANTED = [{1, 2, 22}, {3, 10}, {12, 13}, {8, 21}, {7, 16}, {5, 17}, {19, 26}]


def claims(n: int) -> list[tuple[dict, tuple[int, int]]]:
    """``n`` claims (at least the example's thirty), each with its family: the example's thirty
    (planted duplicates share a family), then new claims set at one site each, made of the first
    half of one claim and the second half of another (each its own family)."""
    bases = []
    for path in sorted((EXAMPLE / "hypotheses").glob("H-*.md"), key=lambda p: int(p.name.split()[0][2:])):
        meta = frontmatter(path)
        bases.append(
            {
                "title": path.stem.split(" - ", 1)[1],
                **{k: meta[k] for k in ("statement", "question", "source", "locator")},
            }
        )
    family = {
        i: min(g) if i in g else i
        for i in range(1, len(bases) + 1)
        for g in [next((g for g in PLANTED if i in g), set())]
    }
    rng = random.Random(n)
    out = [(dict(b), (family[k + 1],)) for k, b in enumerate(bases)]
    for k in range(len(bases), n):
        # A new claim at one site: the first part of one claim, the rest of another.
        i, j = k % len(bases), rng.randrange(len(bases))
        where = SITES[(k // len(bases) - 1) % len(SITES)]
        head, tail = bases[i]["statement"].rstrip(".").split(), bases[j]["statement"].rstrip(".").split()
        statement = " ".join(head[: len(head) // 2] + ["and"] + tail[len(tail) // 2 :])
        title = " ".join(bases[i]["title"].split()[:5] + ["and"] + bases[j]["title"].split()[-4:])
        out.append(
            (
                {
                    **bases[i],
                    "title": f"{title} at {where}",
                    "statement": f"At {where}, {statement[0].lower()}{statement[1:]}.",
                },
                (family[i + 1], j, where),
            )
        )
    return out


def build(root: Path, n: int, seed: int = 0) -> dict[str, tuple[int, int]]:
    """Write a step-3 vault of ``n`` hypotheses to ``root``: the claims, then paraphrases of
    randomly chosen ones up to ``n`` (30% of ``n``, at least two); returns id -> family."""
    rng = random.Random(seed)
    hyps = claims(min(n - 2, n - round(0.3 * n)))
    distinct = list(hyps)
    while len(hyps) < n:  # paraphrases: a claim may get two, so some families need chaining
        c, f = distinct[rng.randrange(len(distinct))]
        statement = reword(c["statement"], rng)
        if statement.startswith("At ") and rng.random() < 0.5:  # the site clause moved to the end
            where, rest = statement[3:].split(", ", 1)
            statement = f"{rest[0].upper()}{rest[1:].rstrip('.')} at {where}."
        hyps.append(({**c, "title": reword(c["title"], rng), "statement": statement}, f))
    rng.shuffle(hyps)
    for folder in ("sources", "observations-and-facts"):
        shutil.copytree(EXAMPLE / folder, root / folder)
    shutil.copy(EXAMPLE / "initial_prompt.md", root / "initial_prompt.md")
    import yaml

    families = {}
    for k, (c, f) in enumerate(hyps, start=1):
        title = re.sub(r"[^\w ,'-]", "", c["title"])[:110].strip()
        meta = {
            "type": "hypothesis",
            "id": f"H-{k}",
            **{key: c[key] for key in ("statement", "question", "source", "locator")},
        }
        (root / "hypotheses").mkdir(exist_ok=True)
        (root / "hypotheses" / f"H-{k} - {title}.md").write_text(
            "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n", encoding="utf-8"
        )
        families[f"H-{k}"] = f
    return families


def true_pairs(families: dict[str, tuple]) -> set[frozenset]:
    by_family: dict[tuple, list[str]] = {}
    for h, f in families.items():
        by_family.setdefault(f, []).append(h)
    return {frozenset(p) for ms in by_family.values() for p in combinations(ms, 2)}


def proximity(root: Path):
    """What the proximity assets hand 4a: the embeddings and the adjudicated duplicate pairs (offline)."""
    corpus = load_corpus(root)
    emb = embed(corpus.ids, corpus.texts, "tfidf")
    pairs = duplicate_pairs(similarity_graph(emb.ids, emb.rows, 0.3), 0.8)
    verdicts = adjudicate(
        pairs, {h.id: h for h in corpus.hypotheses}, {}, LLMClient(LLMConfig(forced_offline=True), root, "p")
    )
    return emb, verdicts


# -- recall --------------------------------------------------------------------------------------------------------


def recall(truth: set[frozenset], merged_pairs: set[frozenset]) -> float:
    """Share of the true duplicate pairs that end in one group given these MERGE pairs (chaining counts)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for p in merged_pairs:
        a, b = sorted(p)
        parent[find(a)] = find(b)
    return sum(find(a) == find(b) for a, b in map(sorted, truth)) / max(1, len(truth))


@dataclass(frozen=True)
class Workload:
    """One built vault of ``n`` hypotheses: its folder, the true duplicate families, and proximity's
    embeddings and verdicts on it."""

    n: int
    root: Path
    families: dict
    emb: object
    verdicts: list


def net_row(name: str, net: Net, work: Workload) -> dict:
    n, root, families, emb, verdicts = work.n, work.root, work.families, work.emb, work.verdicts
    nodes = open_to_4a(open_vault(root))
    cands = candidate_pairs(nodes, verdicts, emb, net)
    truth = true_pairs(families)
    shown = {frozenset((c.a, c.b)) for c in cands}
    return {
        "table": "net",
        "hypotheses": n,
        "net": name,
        "candidates": len(cands),
        "asked_directly": round(len(shown & truth) / max(1, len(truth)), 3),
        "recall": round(recall(truth, shown & truth), 3),
        "true_pairs": len(truth),
    }


NETS = {
    "k=1": Net(k=1),
    "k=3 (before)": Net(k=3),
    "k=5": Net(k=5),
    "k=8": Net(k=8),
    "k=12": Net(k=12),
    "k=3 + hint 3": Net(k=3, hint_k=3),
    "k=3 + mutual 10": Net(k=3, mutual=10),
    "k=3 + transitive 4": Net(k=3, transitive=4),
    "k=5 + hint 3 + mutual 10": Net(k=5, hint_k=3, mutual=10),
    "k=5 + transitive 4 (NET)": NET,
}


# -- cost ------------------------------------------------------------------------------------------------------------


def stub_model(families: dict[str, tuple]):
    """A correct, deterministic model for every step-4 question."""

    def respond(body: dict):
        system = next(m["content"] for m in body["messages"] if m["role"] == "system")
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if system.startswith(MERGE_SYSTEM):
            return llm_stub.answer(
                llm_stub.merge_answer(
                    body,
                    lambda a, b: (
                        {"decision": "MERGE", "rationale": "One family: the same claim reworded."}
                        if families[a] == families[b]
                        else {}
                    ),
                )
            )
        numbered = [
            (int(n), json.loads(c))
            for n, c in re.findall(r'<hypothesis number="(\d+)">\n(.*?)\n</hypothesis>', prompt, re.S)
        ]
        if system.startswith(TOPIC_SYSTEM):
            return llm_stub.answer(
                {"items": [{"hypothesis": n, "off_topic": False, "drop_reason": None} for n, _ in numbered]}
            )
        assert system.startswith(CARVE_SYSTEM), system[:60]
        by_question: dict[str, list[int]] = {}
        for n, c in numbered:
            by_question.setdefault(c.get("question") or "", []).append(n)
        return llm_stub.answer(
            {
                "clusters": [
                    {
                        "name": "Answers to one shared sub-question",
                        "members": ns,
                        "exclusivity": "each member names a different answer to the sub-question; at most one holds",
                        "independence": "its sub-question factorizes from the other clusters' sub-questions",
                        "residual_title": "Some answer not listed here",
                        "residual_note": "Covers any answer none of the members gives.",
                        "residual_statement": "the answer is something not listed here, e.g. a cause no paper proposed",
                        "carving_justification": "Grouped by the sub-question the members answer.",
                    }
                    for ns in by_question.values()
                ]
            }
        )

    return respond


def cost_row(name: str, net: Net, batch: int, work: Workload, stub) -> dict:
    """``work``'s vault (``work.root``: a fresh copy) structured by the stub model ``stub``."""
    n, root, families, emb, verdicts = work.n, work.root, work.families, work.emb, work.verdicts
    stub.reset()
    state = root / OURS
    config = llm_config()
    a, b = LLMClient(config, state, "4a"), LLMClient(config, state, "4b")
    t0 = time.perf_counter()
    report = run_dispositions(open_vault(root), verdicts, emb, ModelPolicy(a), net=net, batch_size=batch)
    run_clusters(open_vault(root), ModelPolicy(b))
    wall = time.perf_counter() - t0
    kinds = [r.system[:20] for r in stub.requests]
    merged = {frozenset((s, x)) for s, xs in report.merged.items() for x in xs}
    return {
        "table": "cost",
        "hypotheses": n,
        "approach": name,
        "candidates": report.candidates,
        "merge_calls": kinds.count(MERGE_SYSTEM[:20]),
        "topic_calls": kinds.count(TOPIC_SYSTEM[:20]),
        "carve_calls": kinds.count(CARVE_SYSTEM[:20]),
        "calls": len(kinds),
        "prompt_tokens": a.usage.prompt_tokens + b.usage.prompt_tokens,
        "completion_tokens": a.usage.completion_tokens + b.usage.completion_tokens,
        "recall": round(recall(true_pairs(families), merged), 3),
        "groups_chained": report.groups_chained,
        "groups_direct": report.groups_direct,
        "wall_s": round(wall, 2),
    }


APPROACHES = {
    "one pair per call, k=3 (before)": (Net(k=3), 1),
    f"{PAIR_BATCH} pairs per call, k=3": (Net(k=3), PAIR_BATCH),
    "one pair per call, NET": (NET, 1),
    "4 pairs per call, NET": (NET, 4),
    f"{PAIR_BATCH} pairs per call, NET (default)": (NET, PAIR_BATCH),
    "16 pairs per call, NET": (NET, 16),
}


# -- time (offline) --------------------------------------------------------------------------------------------------


def time_one(n: int, tmp: Path) -> dict:
    """Step 4 on a fresh vault of ``n``: first run, then a no-change re-run, seconds per step."""
    from hypograph.llm.policy import OfflinePolicy
    from hypograph.structure.baseline import read_baseline
    from hypograph.structure.checks import all_checks
    from hypograph.structure.structure_map import write_map

    root = tmp / f"time-{n}"
    build(root, n)
    t0 = time.perf_counter()
    emb, verdicts = proximity(root)
    row = {"table": "time", "hypotheses": n, "proximity_s": round(time.perf_counter() - t0, 2)}
    for run in ("first", "rerun"):
        steps = {}
        t = time.perf_counter()
        a = run_dispositions(root, verdicts, emb, OfflinePolicy())
        steps["4a"], t = time.perf_counter() - t, time.perf_counter()
        b = run_clusters(root, OfflinePolicy())
        steps["4b"], t = time.perf_counter() - t, time.perf_counter()
        write_map(root)
        steps["map"], t = time.perf_counter() - t, time.perf_counter()
        failed = [k for k, v in all_checks(open_vault(root), read_baseline(root)).items() if v]
        steps["checks"] = time.perf_counter() - t
        row.update({f"{run}_{k}_s": round(v, 2) for k, v in steps.items()})
        row[f"{run}_structure_s"] = round(steps["4a"] + steps["4b"] + steps["map"], 2)
        row[f"{run}_total_s"] = round(sum(steps.values()), 2)
        if run == "first":
            row.update(
                {"merged": sum(map(len, a.merged.values())), "clusters": len(b.created), "failed_checks": failed}
            )
        else:
            row["rerun_changed"] = a.files_changed + len(b.minted)
    return row


def time_table(sizes: list[int], as_json: bool) -> None:
    rows = []
    for n in sizes:  # each size in a fresh process: no cache or heap of a smaller run carried over
        proc = subprocess.run(
            [sys.executable, __file__, "--time-one", str(n)], capture_output=True, text=True, check=True
        )
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        if not as_json:
            print(f"... {n} hypotheses: first run {rows[-1]['first_total_s']} s", file=sys.stderr)
    if as_json:
        for r in rows:
            print(json.dumps(r))
        return
    keys = [
        "hypotheses",
        "proximity_s",
        "first_4a_s",
        "first_4b_s",
        "first_map_s",
        "first_checks_s",
        "first_total_s",
        "rerun_4a_s",
        "rerun_4b_s",
        "rerun_map_s",
        "rerun_checks_s",
        "rerun_total_s",
        "merged",
        "clusters",
    ]
    print("\n| " + " | ".join(keys) + " |\n|" + "---:|" * len(keys))
    for r in rows:
        print("| " + " | ".join(f"{r[k]:,}" if isinstance(r[k], int) else str(r[k]) for k in keys) + " |")
    small = next((r for r in rows if r["hypotheses"] == 500), None)
    for r in rows:
        if small and r is not small:
            print(
                f"\ntime({r['hypotheses']}) / time(500), first run with checks: "
                f"{r['first_total_s'] / small['first_total_s']:.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--time", action="store_true", help="offline wall time of step 4, first run and re-run")
    parser.add_argument("--time-one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.time_one:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(time_one(args.time_one, Path(tmp))))
        return
    if args.time:
        time_table([int(s) for s in (args.sizes or "500,5000,20000").split(",")], args.json)
        return
    rows = model_rows([int(s) for s in (args.sizes or "32,100,500").split(",")], quiet=args.json)
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    print_tables(rows)


def model_rows(sizes: list[int], quiet: bool) -> list[dict]:
    """The net and cost rows of each size, step 4 asking the stub model (the environment pointed at it)."""
    llm_stub._tokens = lambda text: max(1, math.ceil(len(text) / 4))  # characters / 4, not words
    stub = llm_stub.LLMStub()
    os.environ.update(
        {
            "HYPOGRAPH_LLM_BASE_URL": stub.url,
            "HYPOGRAPH_LLM_MODEL": "stub-model",
            "HYPOGRAPH_LLM_API_KEY": "sk-bench",
            "HYPOGRAPH_LLM_CONCURRENCY": "4",
            "NO_PROXY": "127.0.0.1",
        }
    )
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "HYPOGRAPH_LLM"):
        os.environ.pop(k, None)
    rows: list[dict] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in sizes:
                rows += size_rows(n, Path(tmp), stub, quiet)
    finally:
        stub.close()
    return rows


def size_rows(n: int, tmp: Path, stub, quiet: bool) -> list[dict]:
    """One vault of ``n`` hypotheses: a net row per net, then a cost row per approach (each on a copy)."""
    base = tmp / f"vault-{n}"
    families = build(base, n)
    emb, verdicts = proximity(base)
    work = Workload(n, base, families, emb, verdicts)
    rows = [net_row(name, net, work) for name, net in NETS.items()]
    stub.always(stub_model(families))
    for k, (name, (net, batch)) in enumerate(APPROACHES.items()):
        root = Path(shutil.copytree(base, tmp / f"run-{n}-{k}"))
        rows.append(cost_row(name, net, batch, replace(work, root=root), stub))
        if not quiet:
            print(f"... {n} hypotheses, {name}: {rows[-1]['calls']} calls", file=sys.stderr)
    return rows


def print_tables(rows: list[dict]) -> None:
    for table in ("net", "cost"):
        chosen = [r for r in rows if r["table"] == table]
        keys = [k for k in chosen[0] if k != "table"]
        print(f"\n{table}\n\n| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
        for r in chosen:
            print("| " + " | ".join(f"{r[k]:,}" if isinstance(r[k], int) else str(r[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
