"""4a's judging: each candidate pair MERGE or KEEP (the seed's discriminability test), each active
hypothesis on- or off-topic, asked of the model or decided offline, into the ledger.

Pairs are asked several to a question (``PAIR_BATCH``): the main question and the observations
are shown once, the pairs numbered; the answer names pairs by number only and is validated by
number (each exactly once), as proximity's adjudication does."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field

from hypograph.llm.answers import require_one_each
from hypograph.llm.client import Request, untrusted
from hypograph.llm.policy import OFFLINE, Ask, Policy
from hypograph.structure.baseline import read_baseline
from hypograph.structure.checks import NUMBERISH
from hypograph.structure.dispositions.amend import amend_widening
from hypograph.structure.dispositions.candidates import Candidate, node_text
from hypograph.structure.dispositions.ledger import Ledger, PairDecision, TopicDecision, pair_key
from hypograph.structure.scope import QUESTION_CHARS, active_hypotheses, observations, open_to_4a
from hypograph.vault.node_view import NodeView
from hypograph.vault.nodes import Node
from hypograph.vault.vault import Vault

TOPIC_BATCH = 10  # hypotheses per topic question
PAIR_BATCH = 8  # candidate pairs per merge question (benchmarks/structure.py)


def separating_observations(a: Node, b: Node, obs: list[Node]) -> list[str]:
    """Offline stand-in for the discriminability test: observations that mention a content word one
    hypothesis has and the other lacks (English stop words aside). Errs towards 'separated'."""
    terms_a, terms_b = _terms(node_text(a)), _terms(node_text(b))
    distinguishing = terms_a ^ terms_b
    return [o.id for o in obs if distinguishing & _terms(str(NodeView(o).statement or o.title))]


_ANALYZER: list = []


@lru_cache(maxsize=65536)
def _terms(text: str) -> frozenset[str]:
    """The content words of ``text`` (scikit-learn's English analyzer, built once; each text analysed once)."""
    if not _ANALYZER:
        from sklearn.feature_extraction.text import CountVectorizer  # heavy: only when judging offline

        _ANALYZER.append(CountVectorizer(stop_words="english").build_analyzer())
    return frozenset(_ANALYZER[0](text))


class PairJudgement(BaseModel):
    pair: int = Field(ge=1, description="the pair's number in the question")
    decision: Literal["MERGE", "KEEP"]
    discriminating_observations: list[int] = Field(
        description="numbers of observations that would come out differently"
    )
    widened_statement: str | None = Field(default=None, description="survivor statement widened to cover both, or null")
    generalization_note: str | None = Field(
        default=None, description="one line: what was widened, which distinction given up"
    )
    rationale: str = Field(min_length=10, max_length=1500)


class PairJudgements(BaseModel):
    decisions: list[PairJudgement]


class TopicItem(BaseModel):
    hypothesis: int = Field(ge=1)
    off_topic: bool
    drop_reason: str | None = None


class TopicJudgements(BaseModel):
    items: list[TopicItem]


MERGE_SYSTEM = """You deduplicate hypotheses for a structured analysis (step 4a).
Judge each numbered pair on its own, once. Two hypotheses are ONE member only when their cores are
the same AND no observation listed would come out differently under the two. If any observation
would discriminate them, answer KEEP and list its number. When genuinely unsure, answer KEEP:
over-merging destroys resolution later steps need. On MERGE you may widen the first hypothesis's
statement to cover both (then give a one-line generalization_note saying what was widened and which
distinction was given up); a statement you would not change is no widening: then leave both null.
Never write numbers, probabilities, weights or ranks into the statement or note."""

TOPIC_SYSTEM = """You check hypotheses against an analysis's main question (step 4a).
Mark a hypothesis off_topic only if it bears on nothing in the main question; "bears only weakly"
is NOT off-topic. Be conservative. For each off-topic one give a one-line drop_reason saying why it
discriminates nothing relevant to the main question; otherwise drop_reason is null."""


def merge_request(
    batch: list[Candidate], nodes: dict[str, Node], obs: list[Node], question: str
) -> Request[PairJudgements]:
    """One question for ``batch``: the main question and the observations once, then the numbered pairs."""
    fields = ("statement", "question", "source", "locator", "quote")

    def shown(n: int, role: str, h_id: str) -> str:
        return untrusted(
            "hypothesis",
            {"pair": str(n), "role": role, "id": h_id},
            {"title": nodes[h_id].title, **NodeView(nodes[h_id]).values(fields)},
        )

    user = (
        "Main question of the analysis:\n"
        + untrusted("main-question", {}, {"text": question[:QUESTION_CHARS]})
        + "\n\nObservations in scope:\n"
        + "\n".join(
            untrusted("observation", {"number": str(n)}, {"statement": NodeView(o).statement or o.title})
            for n, o in enumerate(obs, start=1)
        )
        + f"\n\nJudge these {len(batch)} pair(s); the first hypothesis of a pair survives if they are merged."
        + "".join(
            f"\n\nPair {n}:\n" + shown(n, "first", c.a) + "\n" + shown(n, "second", c.b)
            for n, c in enumerate(batch, start=1)
        )
    )

    def check(answer: PairJudgements) -> None:
        require_one_each((j.pair for j in answer.decisions), len(batch), "decision for each pair", "got pairs")
        for j in answer.decisions:
            bad = [n for n in j.discriminating_observations if not 1 <= n <= len(obs)]
            if bad:
                raise ValueError(f"pair {j.pair}: observation numbers {bad} are not among 1..{len(obs)}")
            if j.decision == "MERGE" and j.discriminating_observations:
                raise ValueError(
                    f"pair {j.pair}: MERGE while naming discriminating observations: discriminable pairs are KEEP"
                )
            if (j.widened_statement is None) != (j.generalization_note is None):
                raise ValueError(
                    f"pair {j.pair}: widened_statement and generalization_note come together or not at all"
                )
            for text in (j.widened_statement, j.generalization_note):
                if text is not None and ("\n" in text.strip() or NUMBERISH.search(text)):
                    raise ValueError(
                        f"pair {j.pair}: statement and note are one line each and hold no numbers or weights"
                    )

    name = "pairs-" + "_".join(f"{c.a}-{c.b}" for c in batch)
    return Request(name=name[:120], system=MERGE_SYSTEM, user=user, schema=PairJudgements, check=check)


def topic_request(batch: list[Node], question: str) -> Request[TopicJudgements]:
    user = (
        "Main question of the analysis:\n"
        + untrusted("main-question", {}, {"text": question[:QUESTION_CHARS]})
        + "\n\nHypotheses:\n"
        + "\n".join(
            untrusted("hypothesis", {"number": str(n)}, {"title": h.title, "statement": NodeView(h).statement})
            for n, h in enumerate(batch, start=1)
        )
    )

    def check(j: TopicJudgements) -> None:
        require_one_each((i.hypothesis for i in j.items), len(batch), "item for each hypothesis")
        for i in j.items:
            if i.off_topic != bool(i.drop_reason and i.drop_reason.strip()) or (
                i.drop_reason and "\n" in i.drop_reason.strip()
            ):
                raise ValueError(f"hypothesis {i.hypothesis}: a one-line drop_reason exactly when off_topic")
            if i.drop_reason and NUMBERISH.search(i.drop_reason):
                raise ValueError(f"hypothesis {i.hypothesis}: the drop_reason holds no numbers or weights")

    return Request(
        name="topics-" + "_".join(h.id for h in batch),
        system=TOPIC_SYSTEM,
        user=user,
        schema=TopicJudgements,
        check=check,
    )


def decide(
    vault: Vault,
    candidates: list[Candidate],
    ledger: Ledger,
    policy: Policy,
    batch_size: int = PAIR_BATCH,
    frozen: set[str] | frozenset[str] = frozenset(),
) -> tuple[Ledger, int, list[str]]:
    """Fill the ledger with a decision for every new candidate pair and active hypothesis (but those
    in ``frozen``: an interrupted structuring's 4a judged them already); each decision checked
    against the vault before it is recorded (``amend``). Returns (the ledger, how many pairs were
    put to the policy, one line per decision amended)."""
    nodes = {h.id: h for h in open_to_4a(vault) if h.id not in frozen}
    obs = observations(vault)
    question = vault.main_question()
    todo = _pairs_to_judge(candidates, ledger, policy)
    batches = [todo[k : k + batch_size] for k in range(0, len(todo), max(1, batch_size))]
    # the offline policy reads no request: none is built (50,000 pairs would cost seconds of JSON)
    asks = [_pairs_ask(b, nodes, obs, question, not policy.offline) for b in batches]
    baseline = read_baseline(vault.root)
    amended = []
    for batch, decisions in zip(batches, policy.decide("merge", asks), strict=True):
        for c, d in zip(batch, decisions, strict=True):
            ledger.pairs[pair_key(c.a, c.b)] = recorded = amend_widening(d, nodes, baseline)
            if recorded is not d:
                amended.append(f"{c.a}/{c.b}: {recorded.amended}")
    _judge_topics(list(nodes.values()), ledger, policy, question)
    amended += keep_one_active(vault, ledger)
    return ledger, len(todo), amended


def keep_one_active(vault: Vault, ledger: Ledger) -> list[str]:
    """The rule that no answer can empty a vault: when the topic decisions would drop every active
    hypothesis, none is dropped (each kept on record, offline); one line saying so. A question none
    of the run's own hypotheses bears on is the model's mistake far more often than the run's, and
    a vault with nothing active is one step 4 can do nothing more with (the seed: drop only the
    genuinely off-topic, be conservative)."""
    active = [h.id for h in active_hypotheses(vault)]
    drops = [i for i in active if i in ledger.topics and ledger.topics[i].drop]
    if not active or len(drops) < len(active):
        return []
    for i in drops:
        ledger.topics[i] = TopicDecision(id=i, drop=False, decided_by=OFFLINE)
    return [
        f"topic: every one of the {len(active)} active hypotheses was judged off-topic; none dropped "
        "(a vault keeps its hypotheses when the answer would leave none active: check the main "
        "question in initial_prompt.md)"
    ]


def _pairs_to_judge(candidates: list[Candidate], ledger: Ledger, policy: Policy) -> list[Candidate]:
    """The candidates to put to ``policy``: new pairs, and pairs the offline policy decided that a
    model can judge now (not those this model declined: asked the same, it answers the same). A
    person's verdict goes on the ledger as it is (even over an earlier one)."""
    todo: list[Candidate] = []
    for c in candidates:
        key = pair_key(c.a, c.b)
        if c.human:
            ledger.pairs[key] = PairDecision(
                pair=(c.a, c.b), decision=c.human, decided_by="human", rationale="Recorded in proximity/review.json."
            )
        elif key not in ledger.pairs or (
            ledger.pairs[key].decided_by == OFFLINE and policy.reconsiders(ledger.pairs[key].declined_by)
        ):
            todo.append(c)
    return todo


def _judge_topics(nodes: list[Node], ledger: Ledger, policy: Policy, question: str) -> None:
    """Put every hypothesis of ``nodes`` from a paper and not judged yet to the topic question."""
    unjudged = [h for h in nodes if h.id not in ledger.topics and not NodeView(h).minted]
    topic_batches = [unjudged[k : k + TOPIC_BATCH] for k in range(0, len(unjudged), TOPIC_BATCH)]
    for decisions in policy.decide("topic", [_topic_ask(b, question, not policy.offline) for b in topic_batches]):
        ledger.topics.update((d.id, d) for d in decisions)


def _pairs_ask(
    batch: list[Candidate], nodes: dict[str, Node], obs: list[Node], question: str, request: bool = True
) -> Ask[PairJudgements, list[PairDecision]]:
    def accept(answer: PairJudgements, decided_by: str) -> list[PairDecision]:
        by_number = {j.pair: j for j in answer.decisions}  # the request's check: exactly one per number
        return [
            PairDecision(
                pair=(c.a, c.b),
                decision=j.decision,
                decided_by=decided_by,
                rationale=j.rationale,
                widened_statement=j.widened_statement,
                generalization_note=j.generalization_note,
            )
            for c, j in ((c, by_number[n]) for n, c in enumerate(batch, start=1))
        ]

    def offline(note: str | None) -> list[PairDecision]:
        return [_offline_pair(c, nodes, obs, note) for c in batch]

    def split():  # a prompt the endpoint's context cannot take is asked as two halves
        half = (len(batch) + 1) // 2
        return _pairs_ask(batch[:half], nodes, obs, question), _pairs_ask(batch[half:], nodes, obs, question)

    request_ = merge_request(batch, nodes, obs, question) if request else None
    return Ask(request_, accept, offline, split if len(batch) > 1 else None)


def _offline_pair(c: Candidate, nodes: dict[str, Node], obs: list[Node], note: str | None) -> PairDecision:
    """Merge only an auto-merge pair no observation separates (conservative: errs towards KEEP)."""
    separated = separating_observations(nodes[c.a], nodes[c.b], obs)
    merge = c.auto_merge and not separated
    head = "Offline policy" if note is None else f"Offline policy, as {note}"
    reason = (
        f"{head}: auto-merge pair (lexical near-identity) and no observation separates them."
        if merge
        else f"{head}: kept separate — "
        + (
            f"observations {', '.join(separated)} may discriminate them."
            if c.auto_merge
            else "only auto-merge pairs are merged without a model."
        )
    )
    return PairDecision(
        pair=(c.a, c.b),
        decision="MERGE" if merge else "KEEP",
        rationale=reason,
        decided_by=OFFLINE,
        declined_by=getattr(note, "declined_by", None),
    )


def _topic_ask(batch: list[Node], question: str, request: bool = True) -> Ask[TopicJudgements, list[TopicDecision]]:
    def accept(j: TopicJudgements, decided_by: str) -> list[TopicDecision]:
        items = {i.hypothesis: i for i in j.items}  # the request's check: exactly one per number
        return [
            TopicDecision(id=h.id, drop=items[n].off_topic, drop_reason=items[n].drop_reason, decided_by=decided_by)
            for n, h in enumerate(batch, start=1)
        ]

    def offline(note: str | None) -> list[TopicDecision]:
        """Drop nothing. With no model asked nothing is recorded, so a model configured later judges
        these; standing in for a rejected answer, each is kept on record."""
        return [] if note is None else [TopicDecision(id=h.id, drop=False, decided_by=OFFLINE) for h in batch]

    def split():  # as for pairs: two halves when the prompt cannot fit
        half = (len(batch) + 1) // 2
        return _topic_ask(batch[:half], question), _topic_ask(batch[half:], question)

    return Ask(topic_request(batch, question) if request else None, accept, offline, split if len(batch) > 1 else None)
