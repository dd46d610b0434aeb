"""4a's merge and drop bookkeeping (``hypograph.structure.dispositions.merge``), rule by rule, on
nodes built in memory and, for ``apply_dispositions``, on a vault of a few files in tmp_path.

What a person relies on: the survivor is the lowest id; a KEEP is never overridden by chaining;
absorbed nodes point one hop at the survivor and move to ``hypotheses/merged/``; the survivor
lists every absorbed node, every other source once, one locator entry per source with every place
cited; a widening is taken only when it widens; drops carry their reason and take the nodes merged
into them along; the report says what happened. In process and fast, for the mutation run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_vault_node

from hypograph.atomic import write_json
from hypograph.structure.baseline import BASELINE
from hypograph.structure.checks import all_checks
from hypograph.structure.dispositions.ledger import Ledger, PairDecision, TopicDecision, pair_key
from hypograph.structure.dispositions.merge import (
    _locator_entries,
    absorb,
    apply_dispositions,
    chained,
    drop,
    earlier_members,
    group_widening,
    merge_groups,
)
from hypograph.vault.nodes import Node
from hypograph.vault.vault import Vault, open_vault


def hyp(node_id: str, state: str = "active", folder: str | None = None, **meta) -> Node:
    folder = folder or {"merged": "hypotheses/merged", "dropped": "hypotheses/dropped"}.get(state, "hypotheses")
    return Node(
        path=Path(folder) / f"{node_id} - T{node_id}.md",
        meta={"type": "hypothesis", "id": node_id, "state": state, **meta},
        body="",
    )


def vault_of(*nodes: Node) -> Vault:
    return Vault(Path("vault"), {n.id: n for n in nodes})


def src(n: int) -> str:
    return f"[[S-{n} - Paper {n}]]"


def decision(a: str, b: str, verdict: str = "MERGE", widened: str | None = None, note: str | None = None):
    return PairDecision(
        pair=(a, b),
        decision=verdict,
        rationale="r",
        decided_by="test",
        widened_statement=widened,
        generalization_note=note,
    )


def ledger(*pairs: PairDecision, topics: tuple[TopicDecision, ...] = ()) -> Ledger:
    return Ledger(pairs={pair_key(*d.pair): d for d in pairs}, topics={t.id: t for t in topics})


# -- drop ---------------------------------------------------------------------------------------


def test_drop_marks_the_node_and_moves_it_to_dropped():
    h = hyp("H-3", source=src(1))
    v = vault_of(h, hyp("H-1"))
    assert drop(v, h, "off topic") == [(h, Path("hypotheses/dropped/H-3 - TH-3.md"))]
    assert h.meta == {
        "type": "hypothesis",
        "id": "H-3",
        "state": "dropped",
        "source": src(1),
        "drop_reason": "off topic",
    }


def test_drop_takes_the_nodes_merged_into_it_along_keeping_the_merge_on_record():
    h = hyp("H-3")
    into_h = [hyp("H-10", "merged", merged_into="[[H-3 - TH-3]]"), hyp("H-4", "merged", merged_into="[[H-3]]")]
    elsewhere = hyp("H-5", "merged", merged_into="[[H-1 - TH-1]]")
    not_merged = hyp("H-6", "active", merged_into="[[H-3]]")  # a stray field: not merged, not touched
    v = vault_of(hyp("H-1"), h, *into_h, elsewhere, not_merged)
    changed = drop(v, h, "off topic")
    assert [(n.id, str(dest)) for n, dest in changed] == [
        ("H-3", "hypotheses/dropped/H-3 - TH-3.md"),
        ("H-4", "hypotheses/dropped/H-4 - TH-4.md"),
        ("H-10", "hypotheses/dropped/H-10 - TH-10.md"),
    ]
    assert into_h[1].meta == {
        "type": "hypothesis",
        "id": "H-4",
        "state": "dropped",
        "drop_reason": "Follows its merge survivor H-3, dropped: off topic",
        "former_merged_into": "[[H-3]]",
    }
    assert into_h[0].meta["former_merged_into"] == "[[H-3 - TH-3]]"
    assert "merged_into" not in into_h[0].meta
    assert "former_merged_into" not in h.meta
    assert elsewhere.meta == {"type": "hypothesis", "id": "H-5", "state": "merged", "merged_into": "[[H-1 - TH-1]]"}
    assert not_merged.meta["state"] == "active" and "drop_reason" not in not_merged.meta


# -- merge_groups: survivor lowest id, KEEP never crossed ------------------------------------------


def test_a_merge_pair_makes_a_group_with_the_lowest_id_surviving_in_natural_order():
    assert merge_groups(["H-2", "H-10", "H-3"], ledger(decision("H-2", "H-10"))) == {"H-2": ["H-10"]}
    assert merge_groups(["H-10", "H-9"], ledger(decision("H-10", "H-9"))) == {"H-9": ["H-10"]}


def test_merge_pairs_chain_into_one_group():
    groups = merge_groups(
        ["H-1", "H-2", "H-3", "H-4", "H-5"],
        ledger(decision("H-3", "H-4"), decision("H-1", "H-2"), decision("H-2", "H-3"), decision("H-1", "H-4")),
    )
    assert groups == {"H-1": ["H-2", "H-3", "H-4"]}


def test_groups_stay_apart_and_a_single_node_is_no_group():
    groups = merge_groups(
        ["H-1", "H-2", "H-3", "H-4", "H-5"],
        ledger(decision("H-1", "H-2"), decision("H-4", "H-3"), decision("H-1", "H-5", "KEEP")),
    )
    assert groups == {"H-1": ["H-2"], "H-3": ["H-4"]}


def test_a_keep_between_two_groups_stops_chaining():
    """H-1/H-3 judged KEEP: MERGE H-1/H-2 then H-2/H-3 must not put H-3 with H-1 by transitivity."""
    decisions = [decision("H-1", "H-2"), decision("H-1", "H-3", "KEEP"), decision("H-2", "H-3")]
    assert merge_groups(["H-1", "H-2", "H-3"], ledger(*decisions)) == {"H-1": ["H-2"]}
    # ledger order decides which MERGE comes first
    decisions = [decision("H-2", "H-3"), decision("H-1", "H-3", "KEEP"), decision("H-1", "H-2")]
    assert merge_groups(["H-1", "H-2", "H-3"], ledger(*decisions)) == {"H-2": ["H-3"]}


def test_a_keep_or_a_blocked_merge_earlier_in_the_ledger_does_not_stop_the_merges_after_it():
    assert merge_groups(["H-1", "H-2", "H-3"], ledger(decision("H-1", "H-3", "KEEP"), decision("H-1", "H-2"))) == {
        "H-1": ["H-2"]
    }
    decisions = [decision("H-1", "H-2"), decision("H-1", "H-3", "KEEP"), decision("H-2", "H-3"), decision("H-4", "H-5")]
    assert merge_groups(["H-1", "H-2", "H-3", "H-4", "H-5"], ledger(*decisions)) == {"H-1": ["H-2"], "H-4": ["H-5"]}


def test_a_keep_between_members_of_the_same_group_is_not_consulted_twice():
    decisions = [decision("H-1", "H-2"), decision("H-2", "H-3"), decision("H-1", "H-3")]
    assert merge_groups(["H-1", "H-2", "H-3"], ledger(*decisions)) == {"H-1": ["H-2", "H-3"]}


def test_pairs_outside_the_active_ids_are_ignored():
    decisions = [decision("H-2", "H-9"), decision("H-8", "H-3"), decision("H-1", "H-2"), decision("H-2", "H-1")]
    assert merge_groups(["H-1", "H-2", "H-3"], ledger(*decisions)) == {"H-1": ["H-2"]}
    assert merge_groups(["H-1", "H-2"], ledger(decision("H-1", "H-2", "KEEP"))) == {}


# -- chained --------------------------------------------------------------------------------------


def test_a_group_is_chained_when_one_of_its_pairs_was_never_judged_merge():
    merges = ledger(decision("H-1", "H-2"), decision("H-2", "H-3"))
    assert chained("H-1", ["H-2", "H-3"], merges) is True
    merges.pairs[pair_key("H-1", "H-3")] = decision("H-1", "H-3")
    assert chained("H-1", ["H-2", "H-3"], merges) is False
    assert chained("H-1", ["H-2"], ledger(decision("H-1", "H-2"))) is False
    assert chained("H-1", ["H-2"], ledger(decision("H-1", "H-2", "KEEP"))) is True


# -- locator entries ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "meta, entries",
    [
        ({"source": src(1), "locator": "Table 2"}, ["S-1: Table 2"]),
        ({"source": src(1), "locator": None}, ["S-1: unspecified"]),
        ({"source": src(1), "locator": ""}, ["S-1: unspecified"]),
        ({"source": src(1)}, ["S-1: unspecified"]),
        ({"source": src(1), "locator": ["S-1: p. 2", 3]}, ["S-1: p. 2", "3"]),
        ({"source": None, "locator": "p. 2"}, []),
    ],
)
def test_locator_entries_name_the_source(meta, entries):
    assert _locator_entries(hyp("H-1", **meta)) == entries


# -- absorb: the survivor's bookkeeping --------------------------------------------------------------


def test_the_survivor_lists_each_absorbed_node_each_other_source_and_each_locator():
    survivor = hyp("H-1", source=src(1), locator="p. 4", statement="s1")
    a = hyp("H-2", source=src(2), locator="Fig. 2")
    b = hyp("H-3", source=src(3), locator=None)
    absorb(survivor, [a, b], None)
    assert survivor.meta == {
        "type": "hypothesis",
        "id": "H-1",
        "state": "active",
        "source": src(1),
        "locator": ["S-1: p. 4", "S-2: Fig. 2", "S-3: unspecified"],
        "statement": "s1",
        "merged_from": ["[[H-2 - TH-2]]", "[[H-3 - TH-3]]"],
        "additional_sources": [src(2), src(3)],
    }


def test_absorbing_a_node_of_the_survivor_s_source_adds_its_places_to_that_entry():
    survivor = hyp("H-1", source=src(1), locator="p. 4; p. 5")
    absorb(
        survivor, [hyp("H-2", source=src(1), locator="p. 5 ; Table 1"), hyp("H-3", source=src(1), locator="p. 4")], None
    )
    assert survivor.meta["locator"] == ["S-1: p. 4; p. 5; Table 1"]
    assert "additional_sources" not in survivor.meta
    assert survivor.meta["merged_from"] == ["[[H-2 - TH-2]]", "[[H-3 - TH-3]]"]


def test_a_place_holding_a_colon_joins_the_entry_of_its_source():
    """The source is what comes before the first colon: "Table 1: row 2" is one place in S-1."""
    survivor = hyp("H-1", source=src(1), locator="p. 4")
    absorb(survivor, [hyp("H-2", source=src(1), locator="Table 1: row 2")], None)
    assert survivor.meta["locator"] == ["S-1: p. 4; Table 1: row 2"]
    survivor = hyp("H-1", source=src(1), locator="Table 1: row 2")
    absorb(survivor, [hyp("H-2", source=src(1), locator="p. 4")], None)
    assert survivor.meta["locator"] == ["S-1: Table 1: row 2; p. 4"]


def test_absorbing_a_former_survivor_brings_every_one_of_its_entries():
    survivor = hyp("H-1", source=src(1), locator="p. 4")
    former = hyp("H-2", source=src(2), locator=["S-2: Fig. 2", "S-3: p. 7", "S-1: p. 5"])
    absorb(survivor, [former], None)
    assert survivor.meta["locator"] == ["S-1: p. 4; p. 5", "S-2: Fig. 2", "S-3: p. 7"]


def test_a_place_added_to_an_unspecified_entry():
    survivor = hyp("H-1", source=src(1), locator=["S-1:", "S-2: x"])
    absorb(survivor, [hyp("H-2", source=src(1), locator="Table 1")], None)
    assert survivor.meta["locator"] == ["S-1: Table 1", "S-2: x"]


def test_absorbing_again_repeats_nothing():
    """A survivor that already lists a node (by any spelling of its link) and its source gains
    nothing from absorbing it again."""
    survivor = hyp(
        "H-1",
        source=src(1),
        locator=["S-1: p. 4", "S-2: Fig. 2"],
        merged_from=["[[H-2]]"],
        additional_sources=["[[S-2]]"],
    )
    absorb(survivor, [hyp("H-2", "merged", source=src(2), locator="Fig. 2")], None)
    assert survivor.meta["merged_from"] == ["[[H-2]]"]
    assert survivor.meta["additional_sources"] == ["[[S-2]]"]
    assert survivor.meta["locator"] == ["S-1: p. 4", "S-2: Fig. 2"]


def test_two_absorbed_nodes_of_one_other_source_add_it_once_with_both_places():
    survivor = hyp("H-1", source=src(1), locator="p. 4")
    absorb(survivor, [hyp("H-2", source=src(2), locator="Fig. 2"), hyp("H-3", source=src(2), locator="Fig. 3")], None)
    assert survivor.meta["additional_sources"] == [src(2)]
    assert survivor.meta["locator"] == ["S-1: p. 4", "S-2: Fig. 2; Fig. 3"]


def test_an_absorbed_node_without_a_source_adds_no_source():
    survivor = hyp("H-1", source=src(1), locator="p. 4")
    absorb(survivor, [hyp("H-2", source=None, locator="p. 9")], None)
    assert "additional_sources" not in survivor.meta
    assert survivor.meta["locator"] == ["S-1: p. 4"]


def test_a_widening_replaces_the_statement_and_adds_the_note():
    survivor = hyp("H-1", source=src(1), statement="narrow")
    absorb(survivor, [hyp("H-2", source=src(1))], decision("H-1", "H-2", widened="wide", note="covers both"))
    assert (survivor.meta["statement"], survivor.meta["generalization_note"]) == ("wide", "covers both")
    survivor = hyp("H-1", source=src(1), statement="narrow")
    absorb(survivor, [hyp("H-2", source=src(1))], decision("H-1", "H-2", widened=None, note="stray"))
    assert survivor.meta["statement"] == "narrow" and "generalization_note" not in survivor.meta


def test_a_survivor_without_a_state_becomes_active():
    survivor = hyp("H-1", source=src(1))
    del survivor.meta["state"]
    absorb(survivor, [hyp("H-2", source=src(1))], None)
    assert survivor.meta["state"] == "active"


# -- group_widening -----------------------------------------------------------------------------------


def test_the_group_takes_the_widening_of_a_pair_holding_the_survivor():
    survivor = hyp("H-1", statement="one")
    d12 = decision("H-1", "H-2", widened="wide 12", note="n")
    d23 = decision("H-2", "H-3", widened="wide 23", note="n")
    assert group_widening(survivor, ["H-2", "H-3"], ledger(d23, d12), None) is d12
    assert group_widening(survivor, ["H-2", "H-3"], ledger(d23, decision("H-1", "H-2")), None) is d23
    assert group_widening(survivor, ["H-2", "H-3"], ledger(decision("H-1", "H-2")), None) is None


def test_a_widening_outside_the_group_or_from_a_keep_is_not_taken():
    survivor = hyp("H-1", statement="one")
    assert group_widening(survivor, ["H-2"], ledger(decision("H-1", "H-3", widened="w")), None) is None
    assert group_widening(survivor, ["H-2"], ledger(decision("H-1", "H-2", "KEEP", widened="w")), None) is None


def test_a_widening_that_repeats_the_survivor_s_statement_is_not_taken():
    survivor = hyp("H-1", statement="one  statement")
    repeats = decision("H-1", "H-2", widened="one statement", note="n")
    other = decision("H-2", "H-3", widened="wider", note="n")
    assert group_widening(survivor, ["H-2", "H-3"], ledger(repeats, other), None) is other
    step3 = {"H-1": {"statement": "as step 3 wrote it"}}
    assert (
        group_widening(survivor, ["H-2"], ledger(decision("H-1", "H-2", widened="as step 3 wrote it")), step3) is None
    )


# -- apply_dispositions: the files ----------------------------------------------------------------


def small_vault(root: Path) -> Path:
    """H-1..H-4 and H-10 active step-3 hypotheses; H-5 merged into H-4 earlier; HC-1 holds H-6/H-7."""
    for n, source in [(1, 1), (2, 2), (3, 2), (4, 3), (10, 4)]:
        write_vault_node(
            root, f"H-{n}", f"Title {n}", statement=f"Statement {n}.", source=src(source), locator=f"p. {n}"
        )
    write_vault_node(
        root,
        "H-5",
        "Title 5",
        folder="hypotheses/merged",
        statement="Statement 5.",
        source=src(5),
        locator="p. 5",
        state="merged",
        merged_into="[[H-4 - Title 4]]",
    )
    for n in (6, 7):
        write_vault_node(
            root,
            f"H-{n}",
            f"Title {n}",
            statement=f"Statement {n}.",
            source=src(6),
            locator=f"p. {n}",
            cluster="[[HC-1 - Cluster]]",
        )
    write_vault_node(
        root,
        "HC-1",
        "Cluster",
        folder="hypothesis-clusters",
        type="hypothesis-cluster",
        hypotheses=["[[H-6 - Title 6]]", "[[H-7 - Title 7]]"],
    )
    return root


def relpaths(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.md"))


def test_apply_merges_drops_and_reports(tmp_path):
    root = small_vault(tmp_path / "v")
    decisions = ledger(
        decision("H-1", "H-2"),
        decision("H-2", "H-3"),
        decision("H-4", "H-10", "KEEP"),
        decision("H-6", "H-7"),  # clustered: frozen members, never merged
        topics=(
            TopicDecision(id="H-4", drop=True, drop_reason="off topic", decided_by="test"),
            TopicDecision(id="H-7", drop=True, drop_reason="frozen", decided_by="test"),
            TopicDecision(id="H-10", drop=False, decided_by="test"),
        ),
    )
    report = apply_dispositions(open_vault(root), decisions)
    assert report.merged == {"H-1": ["H-2", "H-3"]}
    assert report.dropped == {"H-4": "off topic", "H-5": "Follows its merge survivor H-4, dropped: off topic"}
    assert report.active == ["H-1", "H-6", "H-7", "H-10"]
    assert (report.decisions, report.groups_direct, report.groups_chained) == (7, 0, 1)
    assert report.files_changed == 5  # H-1 rewritten; H-2, H-3, H-4, H-5 moved
    assert relpaths(root) == [
        "hypotheses/H-1 - Title 1.md",
        "hypotheses/H-10 - Title 10.md",
        "hypotheses/H-6 - Title 6.md",
        "hypotheses/H-7 - Title 7.md",
        "hypotheses/dropped/H-4 - Title 4.md",
        "hypotheses/dropped/H-5 - Title 5.md",
        "hypotheses/merged/H-2 - Title 2.md",
        "hypotheses/merged/H-3 - Title 3.md",
        "hypothesis-clusters/HC-1 - Cluster.md",
    ]
    v = open_vault(root)
    assert v.nodes["H-1"].meta["merged_from"] == ["[[H-2 - Title 2]]", "[[H-3 - Title 3]]"]
    assert v.nodes["H-1"].meta["additional_sources"] == [src(2)]
    assert v.nodes["H-1"].meta["locator"] == ["S-1: p. 1", "S-2: p. 2; p. 3"]
    for absorbed in ("H-2", "H-3"):
        assert (v.nodes[absorbed].meta["state"], v.nodes[absorbed].meta["merged_into"]) == (
            "merged",
            "[[H-1 - Title 1]]",
        )
    assert v.nodes["H-5"].meta["former_merged_into"] == "[[H-4 - Title 4]]"
    assert v.nodes["H-7"].meta["state"] == "active"
    assert all_checks(v, None)[1] == [] and all_checks(v, None)[5] == []


def test_nodes_merged_into_an_absorbed_node_follow_it_to_the_survivor(tmp_path):
    root = small_vault(tmp_path / "v")
    report = apply_dispositions(open_vault(root), ledger(decision("H-3", "H-4")))
    assert report.merged == {"H-3": ["H-4", "H-5"]}
    assert (report.groups_direct, report.groups_chained) == (1, 0)
    v = open_vault(root)
    assert v.nodes["H-5"].meta["merged_into"] == "[[H-3 - Title 3]]"
    assert v.nodes["H-5"].path == Path("hypotheses/merged/H-5 - Title 5.md")
    assert v.nodes["H-3"].meta["merged_from"] == ["[[H-4 - Title 4]]", "[[H-5 - Title 5]]"]
    assert v.nodes["H-3"].meta["additional_sources"] == [src(3), src(5)]
    assert report.active == ["H-1", "H-2", "H-3", "H-6", "H-7", "H-10"]


def test_apply_takes_a_widening_and_leaves_other_nodes_byte_for_byte(tmp_path):
    root = small_vault(tmp_path / "v")
    before = (root / "hypotheses/H-10 - Title 10.md").read_bytes()
    report = apply_dispositions(open_vault(root), ledger(decision("H-1", "H-2", widened="Wide.", note="Both.")))
    v = open_vault(root)
    assert (v.nodes["H-1"].meta["statement"], v.nodes["H-1"].meta["generalization_note"]) == ("Wide.", "Both.")
    assert (root / "hypotheses/H-10 - Title 10.md").read_bytes() == before
    assert report.files_changed == 2


def test_a_hypothesis_without_a_state_is_marked_active(tmp_path):
    root = small_vault(tmp_path / "v")
    path = root / "hypotheses/H-10 - Title 10.md"
    path.write_text(path.read_text().replace("state: active\n", ""))
    report = apply_dispositions(open_vault(root), ledger())
    assert report.files_changed == 1
    assert open_vault(root).nodes["H-10"].meta["state"] == "active"
    assert apply_dispositions(open_vault(root), ledger()).files_changed == 0  # a re-run changes nothing


def test_a_stale_generalization_note_is_removed_and_said(tmp_path):
    root = small_vault(tmp_path / "v")
    path = root / "hypotheses/H-10 - Title 10.md"
    path.write_text(path.read_text().replace("state: active\n", "state: active\ngeneralization_note: Wider.\n"))
    write_json(root / BASELINE, {"hypotheses": {"H-10": {"statement": "Statement 10.", "source": src(4)}}})
    report = apply_dispositions(open_vault(root), ledger())
    assert report.amended == ["H-10: generalization_note removed: its statement is the step-3 one, not widened"]
    assert report.files_changed == 1
    assert "generalization_note" not in open_vault(root).nodes["H-10"].meta


def test_a_widening_repeating_the_step3_statement_is_not_applied(tmp_path):
    root = small_vault(tmp_path / "v")
    write_json(root / BASELINE, {"hypotheses": {"H-1": {"statement": "Step three.", "source": src(1)}}})
    apply_dispositions(open_vault(root), ledger(decision("H-1", "H-2", widened="Step three.", note="n")))
    meta = open_vault(root).nodes["H-1"].meta
    assert meta["statement"] == "Statement 1." and "generalization_note" not in meta


# -- merge groups across runs: a merged node stays in its survivor's group --------------------------


def test_a_keep_naming_a_node_merged_earlier_blocks_the_join_and_is_reported():
    """The issue's vault: H-82 absorbed H-420 in an interrupted run; the re-run finds MERGE H-82/H-183,
    but H-183/H-420 is KEEP: H-183 must stay apart, and the blocked join is said."""
    decisions = [decision("H-82", "H-420"), decision("H-183", "H-420", "KEEP"), decision("H-82", "H-183")]
    blocked: list[str] = []
    assert merge_groups(["H-82", "H-183"], ledger(*decisions), {"H-82": ["H-420"]}, blocked) == {}
    assert blocked == ["MERGE H-82/H-183 not applied: it would put H-183 and H-420, recorded KEEP, under one survivor"]
    # without the earlier member the join goes through (what the re-run did before)
    assert merge_groups(["H-82", "H-183"], ledger(*decisions)) == {"H-82": ["H-183"]}


def test_a_merge_naming_a_node_merged_earlier_joins_its_survivor_without_relisting_it():
    decisions = [decision("H-1", "H-2"), decision("H-2", "H-5")]
    assert merge_groups(["H-1", "H-5"], ledger(*decisions), {"H-1": ["H-2"]}) == {"H-1": ["H-5"]}


def test_applying_the_ledger_twice_changes_nothing_the_second_time():
    """Kill between 4a's decisions and 4b, run 4a again: its groups, closed over the first pass's
    merges, are the first pass's; nothing more is merged (one chain MERGE 1/2, 2/3 with KEEP 1/3)."""
    nodes = [hyp(f"H-{i}", source=src(i), locator="p. 1", statement=f"Claim {i}.") for i in (1, 2, 3)]
    v = vault_of(*nodes)
    led = ledger(decision("H-1", "H-2"), decision("H-1", "H-3", "KEEP"), decision("H-2", "H-3"))
    first = apply_dispositions_in_memory(v, led)
    assert first.merged == {"H-1": ["H-2"]} and first.blocked_by_keep == [
        "MERGE H-2/H-3 not applied: it would put H-1 and H-3, recorded KEEP, under one survivor"
    ]
    second = apply_dispositions_in_memory(v, led)
    assert second.merged == {} and second.blocked_by_keep == [
        "MERGE H-2/H-3 not applied: it would put H-1 and H-3, recorded KEEP, under one survivor"
    ]
    assert v.nodes["H-3"].meta["state"] == "active" and v.nodes["H-2"].meta["state"] == "merged"


def apply_dispositions_in_memory(v: Vault, led: Ledger):
    """``apply_dispositions`` on an in-memory vault: the journal's writes taken into the index only."""
    v.apply = lambda steps: (v.written(steps), len(steps))[1]  # type: ignore[method-assign]
    return apply_dispositions(v, led)


def test_a_blocked_join_names_its_keep_pair_in_id_order():
    """H-2 before H-10 (by number, not as text), however the KEEP was recorded."""
    blocked: list[str] = []
    decisions = ledger(decision("H-10", "H-2", "KEEP"), decision("H-2", "H-4"))
    assert merge_groups(["H-2", "H-4"], decisions, {"H-4": ["H-10"]}, blocked) == {}
    assert blocked == ["MERGE H-2/H-4 not applied: it would put H-2 and H-10, recorded KEEP, under one survivor"]


def test_a_join_blocked_by_several_keeps_names_the_first_pair_by_id():
    earlier = {"H-2": ["H-3", "H-10", "H-12"], "H-4": ["H-5", "H-11"]}
    keeps = [("H-3", "H-4"), ("H-10", "H-11"), ("H-12", "H-11"), ("H-2", "H-5")]
    blocked: list[str] = []
    decisions = [decision(a, b, "KEEP") for a, b in keeps] + [decision("H-2", "H-4")]
    assert merge_groups(["H-2", "H-4"], ledger(*decisions), earlier, blocked) == {}
    assert blocked == ["MERGE H-2/H-4 not applied: it would put H-2 and H-5, recorded KEEP, under one survivor"]


def test_earlier_members_follow_merged_into_and_merged_from_transitively():
    """H-4 is under H-1 by its merged_into only, H-3 by H-2's merged_from only (H-3 was dropped
    since); H-9 has no file and H-2's link back to H-1 is not H-1 under itself."""
    link = lambda i: f"[[{i} - T{i}]]"  # noqa: E731
    v = vault_of(
        hyp("H-1", merged_from=[link("H-2"), link("H-9")]),
        hyp("H-2", "merged", merged_into=link("H-1"), merged_from=[link("H-3"), link("H-1")]),
        hyp("H-3", "dropped", drop_reason="off topic"),
        hyp("H-4", "merged", merged_into=link("H-1")),
        hyp("H-5"),
    )
    assert earlier_members(v, ["H-1", "H-5"]) == {"H-1": ["H-2", "H-4", "H-3"]}
