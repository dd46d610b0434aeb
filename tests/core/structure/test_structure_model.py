"""Step 4 with a model (the local stub server): answers that must not wedge a vault, the batched
candidate pairs and their metadata, the carving schema's residual note, own questions and
placeholders for minted members (issue 12).

* a MERGE whose "widened" statement is the current one: recorded without the note, said so;
* a vault an earlier version wedged (the note written, the bad decision stored): completed;
* pairs asked several to a question, answered by number, a missing number re-asked;
* the group's widening through any of its MERGE pairs; chaining counted;
* the net: neighbours within a question hint, mutual and transitive pairs;
* a carving naming its constructed member in the exhaustiveness argument, a residual note.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from llm_stub import answer, llm_env, llm_server, merge_answer, merge_pairs  # noqa: F401
from test_structure import (
    CARVE_SYSTEM,
    CLUSTER,
    GENERALIZATION,
    SAHUL,
    SOURCES,
    WARM,
    WARM_TITLE,
    build_bee_vault,
    clusters,
    failures,
    hypotheses,
    members,
    run_job,
    sahul_model,
    start_vault,
    structure_4b_with_model,
    system_of,
    tagged,
    write_node,
)

from hypograph.journal import Journal, Step
from hypograph.structure.carving.plan import TOKEN_RE
from hypograph.structure.dispositions import (
    MERGE_SYSTEM,
    PAIR_BATCH,
    Net,
    PairDecision,
    apply_dispositions,
    read_ledger,
    write_ledger,
)
from hypograph.structure.dispositions.candidates import net_pairs
from hypograph.structure.dispositions.ledger import Ledger
from hypograph.vault.vault import open_vault
from hypograph_cli.summaries import asset_metadata

H3_STATEMENT = (
    "Hunting by the first human arrivals killed off the megafauna in a rapid overkill soon after people reached Sahul."
)


@pytest.fixture
def sahul(tmp_path) -> Path:
    return Path(shutil.copytree(SAHUL, tmp_path / "sahul"))


def identical_widening(body: dict) -> dict:
    """MERGE H-3/H-127 with a "widened" statement that is H-3's own, plus a note."""

    def judge(a: str, b: str) -> dict:
        if {a, b} == {"H-3", "H-127"}:
            return {
                "decision": "MERGE",
                "widened_statement": H3_STATEMENT,
                "generalization_note": GENERALIZATION,
                "rationale": "Same core claim: people killed the megafauna directly.",
            }
        return {}

    return merge_answer(body, judge)


def model(merge=identical_widening, carve=None):
    """The micro-example's model with the merge answers (and, if given, the carving) replaced."""
    smart = sahul_model() if carve is None else sahul_model(carve)

    def respond(body: dict):
        if system_of(body).startswith(MERGE_SYSTEM):
            return answer(merge(body))
        return smart(body)

    return respond


def test_an_identical_widening_is_recorded_without_its_note(sahul, llm_server, llm_env):
    llm_env(llm_server)
    llm_server.always(model())
    result = run_job(sahul, offline=False)
    assert result.success
    assert failures(sahul) == {}

    h3 = hypotheses(sahul)["H-3"]
    assert h3.meta["statement"] == H3_STATEMENT and "generalization_note" not in h3.meta
    assert [m for m in h3.meta["merged_from"]] == ["[[H-127 - Hunting of juveniles drove the extinction]]"]
    d = read_ledger(sahul).pairs["H-3|H-127"]
    assert d.decision == "MERGE" and d.widened_statement is None and d.generalization_note is None
    assert "identical to the current statement of H-3" in d.amended and "dropped" in d.amended
    assert d.rationale == "Same core claim: people killed the megafauna directly."  # the model's, as given
    amended = asset_metadata(result, "hypothesis_dispositions")["amended"]
    assert amended == [f"H-3/H-127: {d.amended}"]
    assert clusters(sahul)  # 4b ran


def wedge(root: Path) -> None:
    """Leave ``root`` as an earlier version did after an identical widening: H-127 merged into H-3,
    the note written on H-3 although its statement is unchanged, the bad decision on the ledger."""
    ledger = read_ledger(root)
    ledger.pairs["H-3|H-127"] = PairDecision(
        pair=("H-3", "H-127"),
        decision="MERGE",
        decided_by="model:stub-model",
        rationale="Same core claim.",
        widened_statement=H3_STATEMENT,
        generalization_note=GENERALIZATION,
    )
    write_ledger(root, ledger)
    apply_dispositions(open_vault(root), ledger)
    h3 = hypotheses(root)["H-3"]
    h3.meta["generalization_note"] = GENERALIZATION  # what the earlier version wrote
    Journal(root).apply([Step(to=str(h3.path), text=h3.text())])


def test_a_vault_an_earlier_version_wedged_completes_on_the_next_run(sahul, llm_server, llm_env):
    llm_env(llm_server)
    llm_server.always(sahul_model())
    assert run_job(sahul, offline=True).success  # proximity, the baseline, offline 4a (nothing merged)...
    shutil.rmtree(sahul / "hypothesis-clusters")  # ...as if 4b had never run
    for h in hypotheses(sahul).values():
        if h.meta.get("origin"):
            (sahul / h.path).unlink()
        elif "cluster" in h.meta:
            del h.meta["cluster"]
            Journal(sahul).apply([Step(to=str(h.path), text=h.text())])
    wedge(sahul)
    assert [reason for _, reason in failures(sahul)[5]] == ["generalization_note present without a widened statement"]

    result = run_job(sahul, offline=False)
    assert result.success
    assert failures(sahul) == {}
    assert clusters(sahul)
    assert "generalization_note" not in hypotheses(sahul)["H-3"].meta
    d = read_ledger(sahul).pairs["H-3|H-127"]
    assert d.widened_statement is None and "identical to the step-3 statement of H-3" in d.amended
    amended = asset_metadata(result, "hypothesis_dispositions")["amended"]
    assert any(line.startswith("H-3/H-127: stored decision amended") for line in amended)
    assert "H-3: generalization_note removed: its statement is the step-3 one, not widened" in amended


def test_pairs_are_asked_several_to_a_question_and_validated_by_number(tmp_path, llm_server, llm_env):
    root = build_bee_vault(tmp_path / "vault")
    llm_env(llm_server)
    first = []

    def respond(body: dict):
        if system_of(body).startswith(MERGE_SYSTEM):
            full = merge_answer(body, lambda a, b: {"decision": "MERGE"} if {a, b} == {"H-9", "H-10"} else {})
            if not first:  # the first answer forgets its last pair: invalid, asked again
                first.append(body)
                return answer({"decisions": full["decisions"][:-1]})
            return answer(full)
        return answer(
            {
                "items": [
                    {"hypothesis": int(a["number"]), "off_topic": False, "drop_reason": None}
                    for a, _ in tagged(body, "hypothesis")
                ]
            }
        )

    llm_server.always(respond)
    result = run_job(root, offline=False)
    assert result.success and failures(root) == {}
    asks = [r for r in llm_server.requests if r.system.startswith(MERGE_SYSTEM)]
    meta = asset_metadata(result, "hypothesis_dispositions")
    judged = meta["pairs_judged"]
    assert judged == meta["candidate_pairs"] == 10  # five hypotheses, every pair close enough under the net
    assert len(asks) == math.ceil(judged / PAIR_BATCH) + 1  # one re-ask
    (again,) = [r for r in asks if "expected exactly one decision for each pair" in r.last_user]
    assert merge_pairs(again.body) == merge_pairs(first[0])  # the same question, asked again
    assert sorted(len(merge_pairs(r.body)) for r in asks if r is not again) == sorted(
        [PAIR_BATCH] * (judged // PAIR_BATCH) + [judged % PAIR_BATCH] * bool(judged % PAIR_BATCH)
    )
    assert all(r.prompt.count("<observation ") == 1 for r in asks)  # the observations once per question
    assert meta["merge_groups_asked_directly"] == 1 and meta["merge_groups_closed_by_chaining"] == 0
    assert meta["llm_calls"] >= len(asks) and meta["llm_prompt_tokens"] > 0
    assert hypotheses(root)["H-10"].meta["state"] == "merged"


def three_alike(root: Path) -> Path:
    start_vault(root)
    for k, source in ((1, "S-1"), (2, "S-2"), (3, "S-3")):
        write_node(
            root,
            "hypotheses",
            f"H-{k}",
            WARM_TITLE,
            statement=WARM,
            question="Why?",
            source=f"[[{SOURCES[source]}]]",
            locator="Results",
        )
    return root


def test_the_group_widens_through_any_of_its_merge_pairs(tmp_path):
    """H-1~H-2 merged without widening, H-2~H-3 merged with one: survivor H-1 takes it; H-1~H-3 was
    never judged, so the group was closed by chaining."""
    root = three_alike(tmp_path / "vault")
    from hypograph.structure.baseline import record_baseline

    record_baseline(open_vault(root))
    widened = "Warm autumns, or any mild spell, let Varroa mites keep breeding so the colonies collapse."
    ledger = Ledger(
        pairs={
            "H-1|H-2": PairDecision(
                pair=("H-1", "H-2"), decision="MERGE", decided_by="model:m", rationale="Same core."
            ),
            "H-2|H-3": PairDecision(
                pair=("H-2", "H-3"),
                decision="MERGE",
                decided_by="model:m",
                rationale="Same core.",
                widened_statement=widened,
                generalization_note="widened 'warm autumns' to any mild spell",
            ),
        }
    )
    report = apply_dispositions(open_vault(root), ledger)
    h1 = hypotheses(root)["H-1"].meta
    assert report.merged == {"H-1": ["H-2", "H-3"]}
    assert h1["statement"] == widened and h1["generalization_note"] == "widened 'warm autumns' to any mild spell"
    assert (report.groups_direct, report.groups_chained) == (0, 1)
    assert failures(root).get(5) is None


def test_the_net_adds_hint_mutual_and_transitive_pairs():
    # Unit rows at these angles: 0~1~2 a chain, 3~4 apart from it; 0 and 3 share a question hint.
    angles = [0.0, 0.3, 0.6, 1.5, 1.8]
    m = np.array([[math.cos(a), math.sin(a)] for a in angles], dtype=np.float32)
    hints = ["a", "", "", "a", ""]
    pairs = lambda net: {(i, j) for i, j, _ in net_pairs(m, hints, net)}  # noqa: E731
    assert pairs(Net(k=1)) == {(0, 1), (1, 2), (3, 4)}
    assert (0, 3) in pairs(Net(k=1, hint_k=1)) - pairs(Net(k=1))  # same hint, however far
    assert (0, 2) in pairs(Net(k=1, transitive=2)) - pairs(Net(k=1))  # 0~1 and 1~2: ask 0~2
    assert pairs(Net(k=1, mutual=2)) - pairs(Net(k=1)) == {(0, 2)}  # each among the other's two nearest


# -- the carving schema ----------------------------------------------------------------------------------------

RESIDUAL_NOTE = "Covers a driver nobody here proposed, such as a disease; the residual keeps the space whole."
COMPLEMENT_QUESTION = "Did people play any part in the extinction?"
RESIDUAL_QUESTION = "Did something other than climate drive the extinction?"


def exhaustive_with_complement(body: dict) -> dict:
    """Cluster 1 exhaustive through its constructed complement (named as "constructed 1"); cluster 2
    with a residual note, its own residual question, and prose naming "the residual"."""
    number = {c["title"].split()[0]: int(a["number"]) for a, c in tagged(body, "hypothesis")}
    base = {k: v for k, v in CLUSTER.items() if k not in ("name", "question", "residual_title", "residual_statement")}
    return {
        "clusters": [
            {
                **base,
                "name": "Whether people drove the extinction",
                "members": [number["Direct"], number["Indirect"]],
                "exclusivity": "hypothesis 1, hypothesis 2 and constructed 1 name different roles for people; "
                "at most one holds",
                "exhaustive_by_construction": True,
                "exhaustiveness_argument": "people played a direct, an indirect or no part; "
                "a dating failure would favour constructed 1",
                "constructed": [
                    {
                        "title": "People played no part in the extinction",
                        "statement": "Humans had no causal role in the extinction pulse at all, unlike hypothesis 1.",
                        "reason": "Constructed complement: the no-human answer, which no paper stated",
                        "question": COMPLEMENT_QUESTION,
                    }
                ],
            },
            {
                **base,
                "name": "Whether climate drove the extinction",
                "members": [number["Climate-driven"], number["Hunting"]],
                "residual_title": "Some driver other than these dominated",
                "residual_statement": "the answer is something not listed here, e.g. a disease",
                "residual_note": RESIDUAL_NOTE,
                "residual_question": RESIDUAL_QUESTION,
                "carving_justification": "Climate against hunting of juveniles; the residual keeps the space whole.",
            },
        ],
        "stragglers": [
            {"hypothesis": number["Genyornis"], "drop_reason": "concerns taxonomy only; bears on no cluster"}
        ],
    }


def test_a_constructed_member_named_in_the_exhaustiveness_argument_and_a_residual_note(sahul, llm_server, llm_env):
    llm_env(llm_server)
    llm_server.always(lambda body: answer(exhaustive_with_complement(body)))
    structure_4b_with_model(sahul)
    assert failures(sahul) == {}
    hcs, hyps = clusters(sahul), hypotheses(sahul)
    people, climate = hcs["HC-1"], hcs["HC-2"]
    complement, residual = "H-134", "H-135"  # minted in member order: the complement, then the residual
    assert members(people) == ["H-3", "H-11", complement] and members(climate) == ["H-21", "H-127", residual]

    assert people.meta["exhaustive_by_construction"] is True
    assert f"a dating failure would favour {complement}" in people.body  # check 3 reads this
    assert people.meta["exclusivity"] == (
        f"H-3, H-11 and {complement} name different roles for people; at most one holds"
    )
    c = hyps[complement]
    assert c.meta["question"] == COMPLEMENT_QUESTION and c.meta["statement"].endswith("unlike H-3.")
    assert c.body == "\nConstructed complement: the no-human answer, which no paper stated\n"

    r = hyps[residual]
    assert r.body == f"\nCovers a driver nobody here proposed, such as a disease; {residual} keeps the space whole.\n"
    assert r.meta["question"] == RESIDUAL_QUESTION
    assert f"Climate against hunting of juveniles; {residual} keeps the space whole." in climate.body
    for path in sahul.rglob("*.md"):
        assert not TOKEN_RE.search(path.read_text(encoding="utf-8")), path


def test_a_constructed_member_the_cluster_does_not_have_is_asked_again(sahul, llm_server, llm_env):
    def bad(body: dict) -> dict:
        carved = exhaustive_with_complement(body)
        carved["clusters"][0]["exhaustiveness_argument"] = "a dating failure would favour constructed 2"
        return carved

    llm_env(llm_server)
    llm_server.script(lambda body: answer(bad(body))).always(lambda body: answer(exhaustive_with_complement(body)))
    structure_4b_with_model(sahul)
    carves = [r for r in llm_server.requests if r.system.startswith(CARVE_SYSTEM)]
    assert len(carves) == 2 and "'constructed 2' names no constructed member" in carves[1].last_user
    assert failures(sahul) == {}
