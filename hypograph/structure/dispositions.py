"""Step 4a: merge near-duplicate hypotheses and drop the off-topic, with the seed's bookkeeping.

Decisions (``.hypograph/dispositions.json``, a ledger: a pair or a topic judged once is never
asked again, so a re-run on unchanged input costs no call and changes nothing):

* a pair is a candidate when proximity lists it as a duplicate or when either is among the
  other's nearest neighbours (semantic when the sbert extra is installed): real duplicates are
  paraphrases across papers and rarely reach the 0.80 lexical cutoff;
* with a model: each candidate pair is judged with both nodes and every in-scope observation in
  view, by the seed's discriminability test (MERGE only when no observation would come out
  differently); each active hypothesis is judged on- or off-topic against ``initial_prompt.md``;
* offline (deterministic, conservative): merge only pairs proximity auto-merged (or a person
  marked MERGE in ``proximity/review.json``) when no observation mentions a word that one has and
  the other lacks; drop nothing. A person's KEEP always wins.
* hypotheses already in a cluster are frozen members (steps 7-8 index them): never re-judged.

Merge mechanics (survivor = lowest id; absorbed -> ``state: merged``, ``merged_into`` one hop,
moved to ``hypotheses/merged/``; survivor gains ``merged_from``, ``additional_sources``, a
per-source ``locator`` list and, if widened, a new statement plus ``generalization_note``) are
applied through the vault journal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from hypograph.atomic import write_json
from hypograph.errors import HypographError
from hypograph.hypotheses import detect_kind, strip_wikilinks
from hypograph.ids import id_sort_key
from hypograph.journal import Journal, Step
from hypograph.llm.client import LLMClient, Rejected, Request, untrusted
from hypograph.proximity.embed import embed
from hypograph.proximity.graph import nearest_neighbours
from hypograph.structure.baseline import record_baseline
from hypograph.structure.checks import NUMBERISH
from hypograph.vault.mint import structuring_lock
from hypograph.vault.nodes import Node, link_target
from hypograph.vault.validate import validate_before_structuring
from hypograph.vault.vault import Vault, open_vault

LEDGER = Path(".hypograph") / "dispositions.json"
NEIGHBOURS = 3
QUESTION_CHARS = 6000


class PairDecision(BaseModel):
    pair: tuple[str, str]
    decision: Literal["MERGE", "KEEP"]
    rationale: str
    decided_by: str
    widened_statement: str | None = None
    generalization_note: str | None = None


class TopicDecision(BaseModel):
    id: str
    drop: bool
    drop_reason: str | None = None
    decided_by: str


class Ledger(BaseModel):
    pairs: dict[str, PairDecision] = Field(default_factory=dict)
    topics: dict[str, TopicDecision] = Field(default_factory=dict)


@dataclass
class Candidate:
    a: str
    b: str
    similarity: float
    auto_merge: bool = False  # proximity said MERGE without a model (similarity above the cutoff)
    human: str | None = None  # MERGE / KEEP recorded by a person


@dataclass
class DispositionReport:
    merged: dict[str, list[str]] = field(default_factory=dict)  # survivor -> absorbed
    dropped: dict[str, str] = field(default_factory=dict)  # id -> reason
    active: list[str] = field(default_factory=list)
    files_changed: int = 0
    decisions: int = 0


def pair_key(a: str, b: str) -> str:
    a, b = sorted((a, b), key=id_sort_key)
    return f"{a}|{b}"


def read_ledger(root: Path) -> Ledger:
    path = Path(root) / LEDGER
    return Ledger.model_validate_json(path.read_text(encoding="utf-8")) if path.exists() else Ledger()


def write_ledger(root: Path, ledger: Ledger) -> None:
    write_json(Path(root) / LEDGER, json.loads(ledger.model_dump_json()))


def active_hypotheses(vault: Vault) -> list[Node]:
    """Hypotheses in ``hypotheses/`` that are active or not yet dispositioned."""
    return [h for h in vault.of_type("hypothesis")
            if h.path.parent == Path("hypotheses") and h.meta.get("state") in (None, "active")]


def open_to_4a(vault: Vault) -> list[Node]:
    """Active hypotheses 4a may still merge or drop: from a paper, and in no cluster yet."""
    clustered = {link_target(l) for hc in vault.of_type("hypothesis-cluster") for l in hc.meta.get("hypotheses") or []}
    return [h for h in active_hypotheses(vault)
            if not h.meta.get("origin") and h.id not in clustered and not h.meta.get("cluster")]


def observations(vault: Vault) -> list[Node]:
    """In-scope observations: those directly in ``observations-and-facts/``."""
    return [o for o in vault.of_type("observation") if o.path.parent == Path("observations-and-facts")]


# -- candidates -------------------------------------------------------------------------------------

def candidate_pairs(hypotheses: list[Node], verdicts: list, k: int = NEIGHBOURS, semantic: bool = False) -> list[Candidate]:
    """Proximity's duplicate pairs among ``hypotheses`` plus each one's ``k`` nearest neighbours."""
    ids = [h.id for h in hypotheses]
    by_id = {h.id: h for h in hypotheses}
    out: dict[str, Candidate] = {}
    for v in verdicts:
        a, b = v.pair
        if a in ids and b in ids:
            out[pair_key(a, b)] = Candidate(*sorted((a, b), key=id_sort_key), v.similarity,
                                            auto_merge=v.decided_by == "auto" and v.verdict == "MERGE",
                                            human=v.verdict if v.decided_by == "human" else None)
    if len(ids) >= 2 and k:
        texts = [_text(by_id[i]) for i in ids]
        backend = "sbert" if semantic and _has_sbert() else "tfidf"
        emb = embed(ids, texts, backend)
        for i, j, s in nearest_neighbours(emb.matrix, k):
            key = pair_key(ids[i], ids[j])
            if key not in out:
                out[key] = Candidate(*sorted((ids[i], ids[j]), key=id_sort_key), round(s, 4))
    return sorted(out.values(), key=lambda c: (-c.similarity, id_sort_key(c.a), id_sort_key(c.b)))


def _has_sbert() -> bool:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


def _text(node: Node) -> str:
    return strip_wikilinks(f"{node.title} {node.meta.get('statement') or ''}").strip()


# -- decisions --------------------------------------------------------------------------------------

def separating_observations(a: Node, b: Node, obs: list[Node]) -> list[str]:
    """Offline stand-in for the discriminability test: observations that mention a content word one
    hypothesis has and the other lacks (English stop words aside). Errs towards 'separated'."""
    from sklearn.feature_extraction.text import CountVectorizer  # heavy: only when judging offline

    words = CountVectorizer(stop_words="english").build_analyzer()
    terms_a, terms_b = set(words(_text(a))), set(words(_text(b)))
    distinguishing = terms_a ^ terms_b
    return [o.id for o in obs if distinguishing & set(words(str(o.meta.get("statement") or o.title)))]


class MergeJudgement(BaseModel):
    decision: Literal["MERGE", "KEEP"]
    discriminating_observations: list[int] = Field(description="numbers of observations that would come out differently")
    widened_statement: str | None = Field(default=None, description="survivor statement widened to cover both, or null")
    generalization_note: str | None = Field(default=None, description="one line: what was widened, which distinction given up")
    rationale: str = Field(min_length=10, max_length=1500)


class TopicItem(BaseModel):
    hypothesis: int = Field(ge=1)
    off_topic: bool
    drop_reason: str | None = None


class TopicJudgements(BaseModel):
    items: list[TopicItem]


MERGE_SYSTEM = """You deduplicate hypotheses for a structured analysis (step 4a).
Two hypotheses are ONE member only when their cores are the same AND no observation listed would
come out differently under the two. If any observation would discriminate them, answer KEEP and
list its number. When genuinely unsure, answer KEEP: over-merging destroys resolution later steps
need. On MERGE you may widen the first hypothesis's statement to cover both (then give a one-line
generalization_note saying what was widened and which distinction was given up); otherwise leave
both null. Never write numbers, probabilities, weights or ranks into the statement or note."""

TOPIC_SYSTEM = """You check hypotheses against an analysis's main question (step 4a).
Mark a hypothesis off_topic only if it bears on nothing in the main question; "bears only weakly"
is NOT off-topic. Be conservative. For each off-topic one give a one-line drop_reason saying why it
discriminates nothing relevant to the main question; otherwise drop_reason is null."""


def _merge_request(c: Candidate, nodes: dict[str, Node], obs: list[Node], question: str) -> Request[MergeJudgement]:
    fields = ("statement", "question", "source", "locator", "quote")
    user = (
        "Main question of the analysis:\n" + untrusted("main-question", {}, {"text": question[:QUESTION_CHARS]})
        + "\n\nObservations in scope:\n"
        + "\n".join(untrusted("observation", {"number": str(n)}, {"statement": o.meta.get("statement") or o.title})
                    for n, o in enumerate(obs, start=1))
        + "\n\nFirst hypothesis (survivor if merged):\n"
        + untrusted("hypothesis", {"id": c.a}, {"title": nodes[c.a].title, **{k: nodes[c.a].meta.get(k) for k in fields}})
        + "\n\nSecond hypothesis:\n"
        + untrusted("hypothesis", {"id": c.b}, {"title": nodes[c.b].title, **{k: nodes[c.b].meta.get(k) for k in fields}})
    )

    def check(j: MergeJudgement) -> None:
        bad = [n for n in j.discriminating_observations if not 1 <= n <= len(obs)]
        if bad:
            raise ValueError(f"observation numbers {bad} are not among 1..{len(obs)}")
        if j.decision == "MERGE" and j.discriminating_observations:
            raise ValueError("MERGE while naming discriminating observations: discriminable pairs are KEEP")
        if (j.widened_statement is None) != (j.generalization_note is None):
            raise ValueError("widened_statement and generalization_note come together or not at all")
        for text in (j.widened_statement, j.generalization_note):
            if text is not None and ("\n" in text.strip() or NUMBERISH.search(text)):
                raise ValueError("statement and note are one line each and hold no numbers or weights")

    return Request(name=f"pair-{c.a}-{c.b}", system=MERGE_SYSTEM, user=user, schema=MergeJudgement, check=check)


def _topic_request(batch: list[Node], question: str) -> Request[TopicJudgements]:
    user = (
        "Main question of the analysis:\n" + untrusted("main-question", {}, {"text": question[:QUESTION_CHARS]})
        + "\n\nHypotheses:\n"
        + "\n".join(untrusted("hypothesis", {"number": str(n)}, {"title": h.title, "statement": h.meta.get("statement")})
                    for n, h in enumerate(batch, start=1))
    )

    def check(j: TopicJudgements) -> None:
        numbers = sorted(i.hypothesis for i in j.items)
        if numbers != list(range(1, len(batch) + 1)):
            raise ValueError(f"expected one item per hypothesis 1..{len(batch)}, got {numbers}")
        for i in j.items:
            if i.off_topic != bool(i.drop_reason and i.drop_reason.strip()) or (i.drop_reason and "\n" in i.drop_reason.strip()):
                raise ValueError(f"hypothesis {i.hypothesis}: a one-line drop_reason exactly when off_topic")
            if i.drop_reason and NUMBERISH.search(i.drop_reason):
                raise ValueError(f"hypothesis {i.hypothesis}: the drop_reason holds no numbers or weights")

    return Request(name="topics-" + "_".join(h.id for h in batch), system=TOPIC_SYSTEM, user=user,
                   schema=TopicJudgements, check=check)


def decide(vault: Vault, candidates: list[Candidate], ledger: Ledger, llm: LLMClient) -> Ledger:
    """Fill the ledger with a decision for every new candidate pair and active hypothesis."""
    nodes = {h.id: h for h in open_to_4a(vault)}
    obs = observations(vault)
    question = vault.main_question()
    todo: list[Candidate] = []
    for c in candidates:
        key = pair_key(c.a, c.b)
        if c.human:  # a person's verdict always stands, even over an earlier one
            ledger.pairs[key] = PairDecision(pair=(c.a, c.b), decision=c.human, decided_by="human",
                                             rationale="Recorded in proximity/review.json.")
        elif key not in ledger.pairs or (not llm.offline and ledger.pairs[key].decided_by == "policy"):
            todo.append(c)  # new, or decided by the offline policy and now a model can judge it
    if llm.offline:
        for c in todo:
            separated = separating_observations(nodes[c.a], nodes[c.b], obs)
            merge = c.auto_merge and not separated
            reason = ("Offline policy: auto-merge pair (lexical near-identity) and no observation separates them."
                      if merge else "Offline policy: kept separate — " + (
                          f"observations {', '.join(separated)} may discriminate them." if c.auto_merge
                          else "only auto-merge pairs are merged without a model."))
            ledger.pairs[pair_key(c.a, c.b)] = PairDecision(pair=(c.a, c.b), decision="MERGE" if merge else "KEEP",
                                                            rationale=reason, decided_by="policy")
        return ledger
    answers = llm.ask_many([_merge_request(c, nodes, obs, question) for c in todo])
    for c, j in zip(todo, answers):
        if isinstance(j, Rejected):
            d = PairDecision(pair=(c.a, c.b), decision="KEEP", decided_by="policy",
                             rationale=f"Kept separate: the model's answer was rejected ({j.reason}).")
        else:
            d = PairDecision(pair=(c.a, c.b), decision=j.decision, decided_by=llm.decider, rationale=j.rationale,
                             widened_statement=j.widened_statement, generalization_note=j.generalization_note)
        ledger.pairs[pair_key(c.a, c.b)] = d
    unjudged = [h for h in nodes.values() if h.id not in ledger.topics and not h.meta.get("origin")]
    batches = [unjudged[k:k + 10] for k in range(0, len(unjudged), 10)]
    for batch, j in zip(batches, llm.ask_many([_topic_request(b, question) for b in batches])):
        items = {} if isinstance(j, Rejected) else {i.hypothesis: i for i in j.items}
        for n, h in enumerate(batch, start=1):
            item = items.get(n)
            ledger.topics[h.id] = TopicDecision(id=h.id, drop=bool(item and item.off_topic),
                                                drop_reason=item.drop_reason if item else None,
                                                decided_by=llm.decider if item else "policy")
    return ledger


# -- plan and apply -------------------------------------------------------------------------------

def drop(vault: Vault, h: Node, reason: str) -> list[tuple[Node, Path]]:
    """Mark ``h`` dropped, and with it the nodes merged into it (merged_into must name an active H;
    the merge stays on record as ``former_merged_into``, as the seed pipeline does). Returns each
    changed node with its destination in ``hypotheses/dropped/``."""
    out = []
    for node, why in [(h, reason)] + [
            (x, f"Follows its merge survivor {h.id}, dropped: {reason}") for x in vault.of_type("hypothesis")
            if x.meta.get("state") == "merged" and link_target(x.meta.get("merged_into")) == h.id]:
        node.meta["state"] = "dropped"
        node.meta["drop_reason"] = why
        if "merged_into" in node.meta:
            node.meta["former_merged_into"] = node.meta.pop("merged_into")
        out.append((node, Path("hypotheses/dropped") / node.path.name))
    return out


def merge_groups(active: list[str], ledger: Ledger) -> dict[str, list[str]]:
    """Survivor (lowest id) -> absorbed ids. MERGE pairs join groups in ledger order, unless a KEEP
    lies between the two groups (no merging by transitivity alone)."""
    group = {i: {i} for i in active}
    keep = {frozenset(d.pair) for d in ledger.pairs.values() if d.decision == "KEEP"}
    for d in ledger.pairs.values():
        a, b = d.pair
        if d.decision != "MERGE" or a not in group or b not in group or group[a] is group[b]:
            continue
        if any(frozenset((x, y)) in keep for x in group[a] for y in group[b]):
            continue
        merged = group[a] | group[b]
        for x in merged:
            group[x] = merged
    out: dict[str, list[str]] = {}
    for members in {id(g): g for g in group.values()}.values():
        if len(members) > 1:
            ordered = sorted(members, key=id_sort_key)
            out[ordered[0]] = ordered[1:]
    return out


def _source_id(node: Node) -> str | None:
    return link_target(node.meta.get("source"))


def _locator_entries(node: Node) -> list[str]:
    loc = node.meta.get("locator")
    if isinstance(loc, list):
        return [str(x) for x in loc]
    sid = _source_id(node)
    return [f"{sid}: {loc}" if loc not in (None, "") else f"{sid}: unspecified"] if sid else []


def _absorb(survivor: Node, absorbed: list[Node], widening: PairDecision | None) -> None:
    meta = survivor.meta
    own = _source_id(survivor)
    merged_from = list(meta.get("merged_from") or [])
    extra = list(meta.get("additional_sources") or [])
    entries = _locator_entries(survivor)
    for x in absorbed:
        if x.link not in merged_from and link_target(x.link) not in {link_target(m) for m in merged_from}:
            merged_from.append(x.link)
        sid = _source_id(x)
        if sid and sid != own and sid not in {link_target(e) for e in extra}:
            extra.append(x.meta["source"])
        for entry in _locator_entries(x):
            prefix, _, where = (part.strip() for part in entry.partition(":"))
            same = [k for k, e in enumerate(entries) if e.partition(":")[0].strip() == prefix]
            if not same:
                entries.append(entry)
                continue
            have = entries[same[0]].partition(":")[2].strip()
            # Same source cited by both: add only the places the survivor's entry does not list yet.
            new = [w.strip() for w in where.split(";") if w.strip() and w.strip() not in [h.strip() for h in have.split(";")]]
            if new:
                entries[same[0]] = f"{prefix}: " + "; ".join([have] * bool(have) + new)
    meta["state"] = "active"
    meta["merged_from"] = merged_from
    if extra:
        meta["additional_sources"] = extra
    meta["locator"] = entries
    if widening and widening.widened_statement:
        meta["statement"] = widening.widened_statement
        meta["generalization_note"] = widening.generalization_note


def apply_dispositions(vault: Vault, ledger: Ledger) -> DispositionReport:
    """Plan every file change from the ledger and apply it through the journal."""
    active = active_hypotheses(vault)
    ids = [h.id for h in open_to_4a(vault)]
    report = DispositionReport(decisions=len(ledger.pairs) + len(ledger.topics))
    drops = {t.id: t.drop_reason for t in ledger.topics.values() if t.drop and t.id in ids}
    groups = merge_groups([i for i in ids if i not in drops], ledger)
    steps: list[Step] = []
    touched: dict[str, tuple[Node, Path]] = {}
    for survivor_id, absorbed_ids in groups.items():
        survivor, absorbed = vault.nodes[survivor_id], [vault.nodes[x] for x in absorbed_ids]
        # Nodes merged earlier into one being absorbed now follow it to the new survivor (one hop).
        for x in list(absorbed):
            absorbed += [m for m in vault.of_type("hypothesis")
                         if m.meta.get("state") == "merged" and link_target(m.meta.get("merged_into")) == x.id]
        widening = next((d for d in ledger.pairs.values() if d.decision == "MERGE" and d.widened_statement
                         and survivor_id in d.pair and set(d.pair) <= {survivor_id, *absorbed_ids}), None)
        _absorb(survivor, absorbed, widening)
        touched[survivor.id] = (survivor, survivor.path)
        for x in absorbed:
            x.meta["state"] = "merged"
            x.meta["merged_into"] = survivor.link
            touched[x.id] = (x, Path("hypotheses/merged") / x.path.name)
        report.merged[survivor_id] = [x.id for x in absorbed]
    for h_id, reason in drops.items():
        for node, dest in drop(vault, vault.nodes[h_id], reason):
            touched[node.id] = (node, dest)
            report.dropped[node.id] = node.meta["drop_reason"]
    for h in active:
        if h.id not in touched and h.meta.get("state") != "active":
            h.meta["state"] = "active"
            touched[h.id] = (h, h.path)
    # Survivors first, then moves: a merged node never points at a survivor not yet written.
    for node, dest in touched.values():
        if node.changed or dest != node.path:
            steps.append(Step(to=str(dest), text=node.text(), src=str(node.path)))
    report.files_changed = Journal(vault.root).apply(steps)
    report.active = [h.id for h in active if h.id not in drops and not any(h.id in a for a in groups.values())]
    return report


def run_dispositions(vault: Vault, verdicts: list, llm: LLMClient, k: int = NEIGHBOURS) -> DispositionReport:
    """4a end to end: candidates, decisions (ledger), then the vault changes."""
    if detect_kind(vault.root) != "vault":
        raise HypographError(f"{vault.root}: step 4 structures a vault (hypotheses/*.md), not a run directory")
    with structuring_lock(vault.root):
        vault = open_vault(vault.root)  # as it is now that this run holds the lock
        validate_before_structuring(vault)  # refuse what 4a cannot fix before its first write
        record_baseline(vault)
        ledger = read_ledger(vault.root)
        candidates = candidate_pairs(open_to_4a(vault), verdicts, k=0 if llm.offline else k, semantic=True)
        ledger = decide(vault, candidates, ledger, llm)
        write_ledger(vault.root, ledger)
        return apply_dispositions(vault, ledger)
