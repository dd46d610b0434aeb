"""Adjudicate near-duplicate pairs MERGE / KEEP / FLAG (the proximity tool's procedure and decision format).

Who decides, first match wins:

1. ``human``: a verdict recorded in ``proximity/review.json``; such a pair never goes to a model;
2. ``auto``: similarity above the auto-merge cutoff (0.92) -> MERGE, keep the earlier id;
3. ``model:<name>``: borderline pairs, batched, the model reading both hypotheses in full;
4. ``policy``: borderline pairs with no model configured, or whose model answer was rejected
   after the allowed re-asks, or whose endpoint gave no usable answer (an outage: the run goes
   on), or whose question cannot fit the endpoint's context even one pair at a time -> FLAG,
   i.e. the human review queue, the reason in the rationale.

The model answers with pair numbers, never ids: it cannot introduce a pair that was not asked
about, and an answer naming an id that does not occur in the question is invalid and re-asked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hypograph.atomic import read_regular
from hypograph.errors import HypographError
from hypograph.hypotheses import Hypothesis
from hypograph.ids import id_sort_key
from hypograph.llm.answers import require_one_each
from hypograph.llm.client import LLMClient, Request, untrusted
from hypograph.llm.policy import Ask, Policy, policy_for
from hypograph.proximity.defaults import AUTO_MERGE_THRESHOLD
from hypograph.proximity.dupes import DuplicatePair

Verdict = Literal["MERGE", "KEEP", "FLAG"]
# Node ids as the seed pipelines mint them; gene names like COX-2 or IL-6 are not ids.
ID_TOKEN_RE = re.compile(r"\b(?:H|HC|S|O|A|D|E|CG)-\d+\b")
BATCH_SIZE = 4
REVIEWS_MAX = 64 << 20  # review.json: a person's verdicts; a larger file is refused unread


class Decision(BaseModel):
    """One adjudicated pair: the seed's five keys plus ``decided_by``."""

    model_config = ConfigDict(frozen=True)

    pair: tuple[str, str]
    similarity: float
    verdict: Verdict
    rationale: str = Field(min_length=1)
    recommended_action: str = Field(min_length=1)
    decided_by: str = Field(pattern=r"^(auto|human|policy|model:.+)$")


class HumanReview(BaseModel):
    """An entry of ``proximity/review.json`` (a JSON list of these)."""

    model_config = ConfigDict(extra="forbid")

    pair: tuple[str, str]
    verdict: Literal["MERGE", "KEEP"]
    rationale: str = Field(min_length=1)
    recommended_action: str | None = None
    reviewer: str | None = None


class PairJudgement(BaseModel):
    """The model's verdict on pair number ``pair`` of the question."""

    pair: int = Field(ge=1)
    verdict: Verdict
    rationale: str = Field(min_length=10, max_length=2000)
    recommended_action: str = Field(min_length=3, max_length=400)


class PairJudgements(BaseModel):
    decisions: list[PairJudgement]


SYSTEM = """You adjudicate near-duplicate research hypotheses for a supervisor.
For each numbered pair, read both hypotheses in full (every field, not just the title) and compare:
- mechanism: the same causal pathway, or different ones?
- predictions: the same testable predictions, or different outcomes?
- experimental approach: the same experiments, or meaningfully different designs?
- evidence base: the same literature and data, or different evidence?
Verdicts: MERGE = duplicates (same mechanism, predictions and experiments; one paraphrases the
other); KEEP = genuinely distinct despite surface similarity; FLAG = unclear, needs human review.
Give each pair a rationale naming the axes that decided it, and a recommended action
("Retire <id> in favor of <id>" for MERGE, "No action — both remain active" for KEEP, a review
question for FLAG). Refer to hypotheses only by the ids shown. Answer for every pair, once."""


@dataclass(frozen=True)
class AdjudicationSettings:
    """Above ``auto_merge`` a pair is MERGEd without a model; ``batch_size`` pairs go to one question."""

    auto_merge: float = AUTO_MERGE_THRESHOLD
    batch_size: int = BATCH_SIZE


def adjudicate(
    pairs: list[DuplicatePair],
    hypotheses: dict[str, Hypothesis],
    reviews: dict[frozenset, HumanReview],
    llm: LLMClient | Policy,
    settings: AdjudicationSettings = AdjudicationSettings(),
    similarity: Callable[[str, str], float] | None = None,
) -> list[Decision]:
    """One decision per pair, in the pairs' order, then a person's decision on any other pair of
    current hypotheses (below the dupe threshold: applied, never silently ignored; its similarity
    from ``similarity(a, b)``). A model that does not answer leaves its pairs FLAGged (``policy``)."""
    for p in pairs:
        missing = [i for i in (p.a, p.b) if i not in hypotheses]
        if missing:
            raise HypographError(
                f"duplicate pair {p.a}/{p.b}: {missing[0]} is not among the current hypotheses "
                "(stale dupes.json: re-run embed, graph and dupes)"
            )
    decided: dict[tuple[str, str], Decision] = {}
    borderline: list[DuplicatePair] = []
    for p in pairs:
        review = reviews.get(frozenset((p.a, p.b)))
        if review is not None:
            decided[(p.a, p.b)] = _human(p, review)
        elif p.similarity > settings.auto_merge:
            decided[(p.a, p.b)] = _auto_merge(p, settings.auto_merge)
        else:
            borderline.append(p)
    size = settings.batch_size
    batches = [borderline[k : k + size] for k in range(0, len(borderline), size)]
    asks = [_ask(batch, hypotheses) for batch in batches]
    for batch, decisions in zip(batches, policy_for(llm).decide("pair verdict", asks), strict=True):
        for p, d in zip(batch, decisions, strict=True):
            decided[(p.a, p.b)] = d
    return [decided[(p.a, p.b)] for p in pairs] + _reviews_of_other_pairs(pairs, hypotheses, reviews, similarity)


def _ask(batch: list[DuplicatePair], hypotheses: dict[str, Hypothesis]) -> Ask:
    """The question for ``batch``, halved when the endpoint's context cannot take it."""

    def split():
        half = (len(batch) + 1) // 2
        return _ask(batch[:half], hypotheses), _ask(batch[half:], hypotheses)

    return Ask(
        _request(batch, hypotheses),
        partial(_decisions, batch),
        partial(_flags, batch),
        split if len(batch) > 1 else None,
    )


def _reviews_of_other_pairs(
    pairs: list[DuplicatePair], hypotheses: dict[str, Hypothesis], reviews: dict[frozenset, HumanReview], similarity
) -> list[Decision]:
    """Decisions for reviewed pairs that are not duplicate pairs. A pair naming a hypothesis that is
    no longer current (merged or dropped since) has been acted on and is left out."""
    listed = {frozenset((p.a, p.b)) for p in pairs}
    out = []
    for key, review in reviews.items():
        a, b = sorted(key, key=id_sort_key)
        if key in listed or a not in hypotheses or b not in hypotheses:
            continue
        sim = min(1.0, max(0.0, round(float(similarity(a, b)), 6))) if similarity else 0.0
        out.append(_human(DuplicatePair(a=a, b=b, similarity=sim), review))
    return sorted(out, key=lambda d: (-d.similarity, id_sort_key(d.pair[0]), id_sort_key(d.pair[1])))


def unapplied_reviews(reviews: dict[frozenset, HumanReview], hypotheses: dict[str, Hypothesis]) -> list[str]:
    """One line per review naming an id that is not a current hypothesis (merged or dropped since;
    an id no hypothesis has is refused by ``read_reviews``): such a review decides nothing now, and
    the person is told so. A MERGE already carried out (the retired member is in the other's
    ``merged_from``: step 4 applied it) is no such review."""
    out = []
    for key, review in reviews.items():
        missing = sorted((i for i in key if i not in hypotheses), key=id_sort_key)
        if missing and not (review.verdict == "MERGE" and _merged(key, hypotheses)):
            pair = "/".join(sorted(key, key=id_sort_key))
            out.append(
                f"proximity/review.json: {review.verdict} {pair} decides nothing now: {', '.join(missing)} "
                "is not a current hypothesis (merged or dropped already)"
            )
    return out


def _merged(pair: frozenset, hypotheses: dict[str, Hypothesis]) -> bool:
    """True when one of ``pair`` is current and lists the other in its ``merged_from``."""
    from hypograph.vault.nodes import link_target

    for survivor, retired in (tuple(pair), tuple(pair)[::-1]):
        h = hypotheses.get(survivor)
        links = h.extra.get("merged_from") if h is not None else None
        if isinstance(links, list) and retired in {link_target(link) for link in links}:
            return True
    return False


def _human(p: DuplicatePair, r: HumanReview) -> Decision:
    action = r.recommended_action or (
        f"Retire {p.b} in favor of {p.a}" if r.verdict == "MERGE" else "No action — both remain active"
    )
    return Decision(
        pair=(p.a, p.b),
        similarity=p.similarity,
        verdict=r.verdict,
        rationale=r.rationale,
        recommended_action=action,
        decided_by="human",
    )


def _auto_merge(p: DuplicatePair, cutoff: float) -> Decision:
    return Decision(
        pair=(p.a, p.b),
        similarity=p.similarity,
        verdict="MERGE",
        rationale=f"Auto-merge candidate: similarity {p.similarity:g} exceeds auto-merge threshold ({cutoff:g}).",
        recommended_action=f"Retire one hypothesis — recommend keeping {p.a} (earlier ID)",
        decided_by="auto",
    )


def _flag(p: DuplicatePair, rationale: str) -> Decision:
    return Decision(
        pair=(p.a, p.b),
        similarity=p.similarity,
        verdict="FLAG",
        rationale=rationale,
        recommended_action="Supervisor should review this pair and record a verdict in proximity/review.json",
        decided_by="policy",
    )


def _hypothesis_fields(h: Hypothesis) -> dict:
    return {k: v for k, v in h.document().items() if k != "path" and v not in ("", None, {})}


def _request(batch: list[DuplicatePair], hypotheses: dict[str, Hypothesis]) -> Request[PairJudgements]:
    blocks, allowed = [], []
    for n, p in enumerate(batch, start=1):
        ha, hb = hypotheses[p.a], hypotheses[p.b]
        blocks.append(
            f"Pair {n} (cosine similarity {p.similarity}):\n"
            + untrusted("hypothesis", {"id": p.a}, _hypothesis_fields(ha))
            + "\n"
            + untrusted("hypothesis", {"id": p.b}, _hypothesis_fields(hb))
        )
        fields_text = json.dumps(_hypothesis_fields(ha)) + json.dumps(_hypothesis_fields(hb))
        allowed.append({p.a, p.b} | set(ID_TOKEN_RE.findall(fields_text)))
    user = f"Adjudicate these {len(batch)} pair(s).\n\n" + "\n\n".join(blocks)

    def check(answer: PairJudgements) -> None:
        require_one_each((d.pair for d in answer.decisions), len(batch), "decision for each pair", "got pairs")
        for d in answer.decisions:
            unknown = set(ID_TOKEN_RE.findall(d.rationale + " " + d.recommended_action)) - allowed[d.pair - 1]
            if unknown:
                raise ValueError(f"pair {d.pair} names id(s) not in that pair: {', '.join(sorted(unknown))}")

    name = "pairs-" + "_".join(f"{p.a}-{p.b}" for p in batch)
    return Request(name=name, system=SYSTEM, user=user, schema=PairJudgements, check=check, items=len(batch))


def _decisions(batch: list[DuplicatePair], answer: PairJudgements, decider: str) -> list[Decision]:
    by_number = {d.pair: d for d in answer.decisions}
    return [
        Decision(
            pair=(p.a, p.b),
            similarity=p.similarity,
            verdict=by_number[n].verdict,
            rationale=by_number[n].rationale,
            recommended_action=by_number[n].recommended_action,
            decided_by=decider,
        )
        for n, p in enumerate(batch, start=1)
    ]


def _flags(batch: list[DuplicatePair], note: str | None) -> list[Decision]:
    """The offline decision: a borderline pair is left to a person."""
    return [
        _flag(
            p,
            f"Needs human review: {note}."
            if note
            else f"Needs human review: no model configured (similarity {p.similarity} is in the borderline band).",
        )
        for p in batch
    ]


# -- files ------------------------------------------------------------------------------------------


def read_reviews(root: Path, current: Collection[str] = ()) -> dict[frozenset, HumanReview]:
    """Human verdicts from ``<root>/proximity/review.json`` (absent file: none), by pair: the one
    reader of that file (proximity's adjudication, and so step 4a, and check 7). Read bounded, each
    entry checked, then all of them together (``review_problems``): a file with any problem is
    refused whole, in one HypographError line naming it and every entry at fault, so nothing a
    person decided is applied in part. ``current``: the ids of the input's current hypotheses (the
    input's files are scanned for the others only when an entry names one not among them)."""
    path = Path(root) / "proximity" / "review.json"
    if not path.exists():
        return {}
    try:
        raw = json.loads(read_regular(path, REVIEWS_MAX, follow=True).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise HypographError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(raw, list):
        raise HypographError(f"{path}: expected a JSON list of reviews")
    entries = []
    for k, item in enumerate(raw):
        try:
            entries.append(HumanReview.model_validate(item))
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(map(str, err["loc"])) or "entry"
            raise HypographError(f"{path}: entry {k}, field '{field}': {err['msg']}") from None
    named = {i for r in entries for i in r.pair}
    known = set(current) if named <= set(current) else {*current, *input_ids(Path(root))}
    problems = review_problems(entries, known)
    if problems:
        raise HypographError(
            f"{path}: refused whole, nothing in it applied: {'; '.join(problems)}; correct the file and run again"
        )
    return {frozenset(r.pair): r for r in entries}


def review_problems(entries: list[HumanReview], known: Collection[str]) -> list[str]:
    """Why a person's decisions (the entries of ``review.json``, in order) cannot be applied
    together, one phrase per fault naming the entries (0-based): an entry pairing an id with itself,
    an entry naming an id that no hypothesis of the input has (``known``: current, merged or
    dropped), two entries deciding one pair differently. [] when they can."""
    out = []
    first: dict[frozenset, int] = {}
    for k, r in enumerate(entries):
        a, b = r.pair
        if a == b:
            out.append(f"entry {k} pairs {a} with itself")
            continue
        unknown = [i for i in (a, b) if i not in known]
        if unknown:
            out.append(f"entry {k} ({a}/{b}) names {', '.join(unknown)}, which no hypothesis of the input has")
            continue
        j = first.setdefault(frozenset(r.pair), k)
        if j != k and entries[j].verdict != r.verdict:
            out.append(f"entries {j} and {k} decide {a}/{b} both {entries[j].verdict} and {r.verdict}")
    return out


def input_ids(root: Path) -> set[str]:
    """The ids of every hypothesis file of the input at ``root``, current, merged or dropped: a
    run directory's ``hypotheses/<id>.json``, a vault's ``hypotheses/**/<id> - <title>.md``."""
    from hypograph.paths import HYPOTHESIS_FOLDERS, input_kind
    from hypograph.vault.vault import node_files

    if input_kind(root, HYPOTHESIS_FOLDERS) == "run-dir":
        return {p.stem for p in (root / "hypotheses").glob("*.json")}
    return {rel.stem.split(" - ", 1)[0] for rel in node_files(root) if rel.parts[0] == "hypotheses"}


def verdicts_document(decisions: list[Decision]) -> list[dict]:
    return [{**d.model_dump(mode="json"), "pair": list(d.pair)} for d in decisions]


def review_queue(decisions: list[Decision]) -> list[Decision]:
    """The FLAG decisions: what a person should look at next."""
    return [d for d in decisions if d.verdict == "FLAG"]


def verdict_violations(pairs: list[DuplicatePair], decisions: list[dict]) -> list[tuple[str, str]]:
    """Every pair has exactly one valid decision and no decision is for an unknown pair."""
    out: list[tuple[str, str]] = []
    expected = {frozenset((p.a, p.b)) for p in pairs}
    seen: dict[frozenset, int] = {}
    for k, raw in enumerate(decisions):
        try:
            d = Decision.model_validate(raw)
        except ValidationError as e:
            out.append((f"decision {k}", f"invalid: {e.errors()[0]['msg']}"))
            continue
        key = frozenset(d.pair)
        name = "/".join(d.pair)
        if key not in expected and d.decided_by != "human":  # a person may decide any pair
            out.append((name, "decision for a pair that is not a duplicate pair"))
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 2:
            out.append((name, "more than one decision"))
    out += [("/".join(sorted(k, key=id_sort_key)), "no decision") for k in expected - set(seen)]
    return out
