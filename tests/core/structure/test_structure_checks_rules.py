"""Each rule of the structuring spec's six checks, one at a time, on a small vault built in memory.

The vault is a well-formed step-4 result (every check passes); each test breaks exactly one rule
and asserts the whole list of violations that check returns: which node, and the one line a
person reads (``hypograph check`` prints it as ``ID: reason``). In process and without files, so
the mutation run (``benchmarks/mutation.py``) can use these first.

The vault: S-1..S-3 sources; H-1 active survivor (source S-1) of H-2 (merged, source S-2); H-3
active (source S-3); H-4 dropped with a reason; H-5 the residual, without a source; HC-1 holds
H-1, H-3 and H-5 (residual last).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hypograph.errors import HypographError
from hypograph.structure import checks
from hypograph.structure.checks import (
    _numbers,
    all_checks,
    check_1_states,
    check_2_clusters,
    check_3_residuals,
    check_4_membership,
    check_5_survivors,
    check_6_no_numbers,
    run_check,
)
from hypograph.vault.node_view import STEP4_FIELDS
from hypograph.vault.nodes import Node
from hypograph.vault.vault import Vault

FOLDERS = {"active": "hypotheses", "merged": "hypotheses/merged", "dropped": "hypotheses/dropped"}


def link(node_id: str) -> str:
    return f"[[{node_id} - {TITLES[node_id]}]]"


TITLES = {
    "S-1": "Okafor 2019",
    "S-2": "Lee 2020",
    "S-3": "Ruiz 2021",
    "H-1": "Mites spread virus",
    "H-2": "Mites carry virus",
    "H-3": "Resistant mites",
    "H-4": "Off topic",
    "H-5": "Something else",
    "H-6": "Mites move virus",
    "H-10": "Tenth",
    "HC-1": "Colony losses",
    "HC-2": "Other losses",
}


def node(folder: str, node_id: str, body: str = "", **meta) -> Node:
    return Node(path=Path(folder) / f"{node_id} - {TITLES[node_id]}.md", meta={"id": node_id, **meta}, body=body)


def hyp(node_id: str, state: str = "active", **meta) -> Node:
    return node(FOLDERS.get(state, "hypotheses"), node_id, type="hypothesis", state=state, **meta)


def good_vault() -> Vault:
    nodes = [
        node("sources", "S-1", type="source"),
        node("sources", "S-2", type="source"),
        node("sources", "S-3", type="source"),
        hyp(
            "H-1",
            statement="Mites spread the virus.",
            source=link("S-1"),
            locator=["S-1: p. 4", "S-2: fig. 2"],
            merged_from=[link("H-2")],
            additional_sources=[link("S-2")],
            cluster=link("HC-1"),
        ),
        hyp(
            "H-2",
            "merged",
            statement="Mites carry the virus.",
            source=link("S-2"),
            locator="fig. 2",
            merged_into=link("H-1"),
        ),
        hyp(
            "H-3",
            statement="Resistant mites keep loads high.",
            source=link("S-3"),
            locator="p. 9",
            cluster=link("HC-1"),
        ),
        hyp("H-4", "dropped", statement="Off topic.", source=link("S-3"), locator="p. 1", drop_reason="off topic"),
        hyp("H-5", statement="Something else causes the losses.", residual=True, source=None, cluster=link("HC-1")),
        node(
            "hypothesis-clusters",
            "HC-1",
            type="hypothesis-cluster",
            hypotheses=[link("H-1"), link("H-3"), link("H-5")],
            exclusivity="One cause per colony.",
            independence="Sampled apart.",
            depends_on=[],
            exhaustive_by_construction=False,
        ),
    ]
    return Vault(Path("vault"), {n.id: n for n in nodes})


BASELINE = {
    "H-1": {"statement": "Mites spread the virus.", "source": link("S-1"), "locator": "p. 4"},
    "H-2": {"statement": "Mites carry the virus.", "source": link("S-2"), "locator": "fig. 2"},
    "H-3": {"statement": "Resistant mites keep loads high.", "source": link("S-3"), "locator": "p. 9"},
    "H-4": {"statement": "Off topic.", "source": link("S-3"), "locator": "p. 1"},
    "H-5": {"statement": "Something else causes the losses.", "source": None, "locator": None},
}


def add(v: Vault, n: Node) -> Vault:
    v.nodes[n.id] = n
    return v


def move(v: Vault, node_id: str, folder: str) -> None:
    v.nodes[node_id].path = Path(folder) / v.nodes[node_id].path.name


def meta(v: Vault, node_id: str) -> dict:
    return v.nodes[node_id].meta


def test_the_good_vault_passes_every_check_with_and_without_a_baseline():
    assert all_checks(good_vault(), BASELINE) == {n: [] for n in range(1, 8)}
    assert all_checks(good_vault(), None) == {n: [] for n in range(1, 8)}


@pytest.mark.parametrize("number", range(1, 7))
def test_run_check_runs_the_check_of_that_number(number):
    v = good_vault()
    meta(v, "H-2")["state"] = "gone"  # check 1
    meta(v, "HC-1")["independence"] = ""  # check 2
    meta(v, "H-5")["residual"] = False  # check 3 (and 5: sourceless)
    meta(v, "H-3")["cluster"] = link("HC-2")  # check 4
    meta(v, "H-1")["additional_sources"] = []  # check 5
    meta(v, "H-1")["statement"] = "Mites spread or carry the virus."  # check 5, against the baseline
    meta(v, "HC-1")["exclusivity"] = "p = 0.2"  # check 6
    del v.nodes["H-4"]  # check 1, against the baseline
    expected = {
        1: [
            ("H-2", "state is 'gone', not one of active / merged / dropped"),
            ("H-4", "step-3 hypothesis has no file any more"),
        ],
        2: [("HC-1", "independence is empty")],
        3: [("HC-1", "0 residual members; exactly 1 required (not exhaustive)")],
        4: [("H-3", "cluster backlink '[[HC-2 - Other losses]]' does not name HC-1")],
        5: [
            ("H-1", "additional_sources [] != absorbed sources ['S-2']"),
            ("H-1", "locator should be one 'S-N: where' entry per source ['S-1']"),
            ("H-1", "statement widened without a generalization_note"),
            ("H-5", "no source, not a residual, and not origin: step-4-constructed with a reason"),
        ],
        6: [("HC-1", "exclusivity contains '0.2': step-4 fields hold no numbers")],
        7: [],
    }  # no KEEP on record (check 7's own cases are below)
    assert run_check(number, v, BASELINE) == expected[number]
    assert all_checks(v, BASELINE) == expected


# -- check 1: one state, one hop, drop reasons, folders, nothing deleted ----------------------------


@pytest.mark.parametrize("state", [None, "Active", "merged ", ["active"]])
def test_check_1_a_state_outside_the_three_is_named_and_nothing_else_is_asked_of_that_node(state):
    v = good_vault()
    meta(v, "H-4")["state"] = state  # in hypotheses/dropped/: the folder rule is not asked as well
    assert check_1_states(v, None) == [("H-4", f"state is {state!r}, not one of active / merged / dropped")]


def test_check_1_goes_on_after_a_node_with_a_bad_state():
    v = good_vault()
    meta(v, "H-3")["state"] = None
    meta(v, "H-4")["drop_reason"] = None
    assert check_1_states(v, None) == [
        ("H-3", "state is None, not one of active / merged / dropped"),
        ("H-4", "dropped without a drop_reason"),
    ]


@pytest.mark.parametrize(
    "node_id, folder, state",
    [("H-3", "hypotheses/merged", "active"), ("H-2", "hypotheses", "merged"), ("H-4", "hypotheses/merged", "dropped")],
)
def test_check_1_the_file_must_be_in_its_state_s_folder(node_id, folder, state):
    v = good_vault()
    move(v, node_id, folder)
    assert check_1_states(v, None) == [(node_id, f"state {state} but the file is in {folder}/, not {FOLDERS[state]}/")]


@pytest.mark.parametrize("target", [None, "", "H-1", "[[H-99 - Nowhere]]", link("S-1")])
def test_check_1_merged_into_must_resolve_to_a_hypothesis(target):
    v = good_vault()
    meta(v, "H-2")["merged_into"] = target
    assert check_1_states(v, None) == [("H-2", f"merged_into {target!r} does not resolve to a hypothesis")]


def test_check_1_merged_into_resolves_by_id_whatever_the_title():
    v = good_vault()
    meta(v, "H-2")["merged_into"] = "[[H-1]]"
    assert check_1_states(v, None) == []


@pytest.mark.parametrize("target, state", [("H-4", "dropped"), ("H-6", "merged")])
def test_check_1_merged_into_must_name_an_active_hypothesis_one_hop(target, state):
    v = add(good_vault(), hyp("H-6", "merged", merged_into=link("H-1"), source=link("S-2")))
    meta(v, "H-2")["merged_into"] = link(target)
    assert check_1_states(v, None) == [("H-2", f"merged_into {target}, which is {state!r}, not active (one hop)")]


@pytest.mark.parametrize("reason", [None, "", "   ", []])
def test_check_1_a_drop_needs_a_reason(reason):
    v = good_vault()
    meta(v, "H-4")["drop_reason"] = reason
    assert check_1_states(v, None) == [("H-4", "dropped without a drop_reason")]


def test_check_1_a_missing_drop_reason_is_a_violation_too():
    v = good_vault()
    del meta(v, "H-4")["drop_reason"]
    assert check_1_states(v, None) == [("H-4", "dropped without a drop_reason")]


def test_check_1_every_step3_hypothesis_still_has_a_file_in_id_order():
    v = good_vault()
    del v.nodes["H-4"]
    del v.nodes["H-3"]
    assert check_1_states(v, BASELINE) == [
        ("H-3", "step-3 hypothesis has no file any more"),
        ("H-4", "step-3 hypothesis has no file any more"),
    ]
    assert check_1_states(v, None) == []


# -- check 2: cluster nodes well formed ------------------------------------------------------------


def test_check_2_a_cluster_outside_its_folder():
    v = good_vault()
    move(v, "HC-1", "hypotheses")
    assert check_2_clusters(v) == [("HC-1", "not in hypothesis-clusters/ but in hypotheses/")]


@pytest.mark.parametrize(
    "name, ok",
    [
        ("HC-1 - Colony losses.md", True),
        ("HC-1.md", True),
        ("Colony losses HC-1.md", False),
        ("HC-10 - Colony losses.md", False),
        ("HC-1 Colony losses.md", False),
    ],
)
def test_check_2_the_file_name_begins_with_the_id(name, ok):
    v = good_vault()
    v.nodes["HC-1"].path = Path("hypothesis-clusters") / name
    assert check_2_clusters(v) == ([] if ok else [("HC-1", "filename does not begin with its id")])


@pytest.mark.parametrize(
    "members, distinct", [("[[H-1]] [[H-3]]", 1), ([link("H-1"), "H-3", link("H-5")], 2), (None, 0)]
)
def test_check_2_hypotheses_must_be_a_list_of_links(members, distinct):
    """A single string is read as one link (the first), a plain id is no link."""
    v = good_vault()
    meta(v, "HC-1")["hypotheses"] = members
    assert check_2_clusters(v) == [("HC-1", "hypotheses is not a list of [[H-N]] links")] + (
        [("HC-1", f"{distinct} distinct member(s); at least 2 required")] if distinct < 2 else []
    )


def test_check_2_a_member_listed_twice():
    v = good_vault()
    meta(v, "HC-1")["hypotheses"] = [link("H-1"), link("H-3"), link("H-3"), link("H-5")]
    assert check_2_clusters(v) == [("HC-1", "a member is listed twice")]


@pytest.mark.parametrize("members, distinct", [([], 0), ([link("H-1")], 1), ([link("H-1"), link("H-1")], 1)])
def test_check_2_at_least_two_distinct_members(members, distinct):
    v = good_vault()
    meta(v, "HC-1")["hypotheses"] = members
    twice = [("HC-1", "a member is listed twice")] if len(members) == 2 else []
    assert check_2_clusters(v) == twice + [("HC-1", f"{distinct} distinct member(s); at least 2 required")]


def test_check_2_two_distinct_members_are_enough():
    v = good_vault()
    meta(v, "HC-1")["hypotheses"] = [link("H-1"), link("H-5")]
    assert check_2_clusters(v) == []


def test_check_2_every_member_must_be_a_hypothesis_node():
    v = good_vault()
    meta(v, "HC-1")["hypotheses"] = [link("H-1"), "[[H-99 - Nowhere]]", link("S-3"), link("H-5")]
    assert check_2_clusters(v) == [
        ("HC-1", "member H-99 is not a hypothesis node"),
        ("HC-1", "member S-3 is not a hypothesis node"),
    ]


def test_check_2_a_cluster_of_missing_nodes_is_not_also_out_of_order():
    v = good_vault()
    meta(v, "HC-1")["hypotheses"] = ["[[H-99 - Nowhere]]", "[[H-98 - Nowhere]]"]
    assert check_2_clusters(v) == [
        ("HC-1", "member H-99 is not a hypothesis node"),
        ("HC-1", "member H-98 is not a hypothesis node"),
    ]


@pytest.mark.parametrize("member, state", [("H-2", "merged"), ("H-4", "dropped")])
def test_check_2_every_member_must_be_active(member, state):
    v = good_vault()
    meta(v, "HC-1")["hypotheses"] = [link("H-1"), link(member), link("H-5")]
    assert check_2_clusters(v) == [("HC-1", f"member {member} is {state!r}, not active")]


@pytest.mark.parametrize(
    "order", [["H-3", "H-1", "H-5"], ["H-1", "H-5", "H-3"], ["H-5", "H-1", "H-3"], ["H-10", "H-3", "H-5"]]
)
def test_check_2_members_ascend_by_id_with_the_residual_last(order):
    v = add(good_vault(), hyp("H-10", source=link("S-3"), locator="p. 2", cluster=link("HC-1")))
    meta(v, "HC-1")["hypotheses"] = [link(i) for i in order]
    assert check_2_clusters(v) == [("HC-1", "members not in ascending-id order with the residual last")]


def test_check_2_ids_ascend_in_natural_order():
    """H-3 before H-10 (by number, not as text), and a cluster without a residual is in order too."""
    v = add(good_vault(), hyp("H-10", source=link("S-3"), locator="p. 2", cluster=link("HC-1")))
    meta(v, "HC-1")["hypotheses"] = [link("H-3"), link("H-10"), link("H-5")]
    assert check_2_clusters(v) == []
    meta(v, "HC-1")["hypotheses"] = [link("H-3"), link("H-10")]
    assert check_2_clusters(v) == []


def test_check_2_only_residual_true_counts_as_the_residual():
    v = good_vault()
    meta(v, "H-5")["residual"] = "yes"  # not the residual: H-5 is just a named member, in order
    meta(v, "H-3")["residual"] = False
    assert check_2_clusters(v) == []
    meta(v, "HC-1")["hypotheses"] = [link("H-1"), link("H-5"), link("H-3")]
    assert check_2_clusters(v) == [("HC-1", "members not in ascending-id order with the residual last")]


@pytest.mark.parametrize("key", ["exclusivity", "independence"])
@pytest.mark.parametrize("value", [None, "", " \n", []])
def test_check_2_exclusivity_and_independence_are_not_empty(key, value):
    v = good_vault()
    meta(v, "HC-1")[key] = value
    assert check_2_clusters(v) == [("HC-1", f"{key} is empty")]
    del meta(v, "HC-1")[key]
    assert check_2_clusters(v) == [("HC-1", f"{key} is empty")]


@pytest.mark.parametrize("key", ["depends_on", "exhaustive_by_construction"])
def test_check_2_the_keys_must_be_present_even_if_empty(key):
    v = good_vault()
    meta(v, "HC-1")[key] = None
    assert check_2_clusters(v) == []
    del meta(v, "HC-1")[key]
    assert check_2_clusters(v) == [("HC-1", f"key {key} missing")]


# -- check 3: exactly one residual listed last, or a justified exhaustive cluster ------------------


def exhaustive(v: Vault, body: str, members=("H-1", "H-3")) -> None:
    meta(v, "HC-1").update(hypotheses=[link(m) for m in members], exhaustive_by_construction=True)
    v.nodes["HC-1"].body = body


def test_check_3_an_exhaustive_cluster_justified_in_its_body_passes():
    v = good_vault()
    exhaustive(v, "\n![[H-1 - Mites spread virus]]\n\nA failed count would favour H-3 wrongly.\n")
    assert check_3_residuals(v) == []


@pytest.mark.parametrize(
    "body",
    [
        "",
        "\n  \n",
        "\n![[H-1 - Mites spread virus]]\n![[H-3 - Resistant mites]]\n",
        "A miscount would favour one of them.",
        "A miscount would favour H-10.",
        "A miscount would favour H-3x.",
    ],
)
def test_check_3_an_exhaustive_cluster_must_name_in_prose_the_member_a_failure_favours(body):
    v = good_vault()
    exhaustive(v, body)
    assert check_3_residuals(v) == [
        ("HC-1", "exhaustive_by_construction without a body justification naming the member a failure would favour")
    ]


def test_check_3_the_member_named_may_end_a_line_of_the_justification():
    v = good_vault()
    exhaustive(v, "\n![[H-1 - Mites spread virus]]\n\nA failed count would favour H-3\nover the others.\n")
    assert check_3_residuals(v) == []


def test_check_3_an_exhaustive_cluster_names_a_member_that_exists():
    v = good_vault()
    exhaustive(v, "A miscount would favour H-99.")
    meta(v, "HC-1")["hypotheses"] = [link("H-1"), "[[H-99 - Nowhere]]"]
    assert check_3_residuals(v) == [
        ("HC-1", "exhaustive_by_construction without a body justification naming the member a failure would favour")
    ]
    v.nodes["HC-1"].body = "A miscount would favour H-1."
    assert check_3_residuals(v) == []


def test_check_3_an_exhaustive_cluster_has_no_residual():
    v = good_vault()
    exhaustive(v, "A miscount would favour H-1.", members=("H-1", "H-3", "H-5"))
    assert check_3_residuals(v) == [("HC-1", "exhaustive_by_construction but has a residual member")]


@pytest.mark.parametrize("flag", [False, None, "true", 1])
def test_check_3_only_true_makes_a_cluster_exhaustive(flag):
    v = good_vault()
    exhaustive(v, "A miscount would favour H-1.")
    meta(v, "HC-1")["exhaustive_by_construction"] = flag
    assert check_3_residuals(v) == [("HC-1", "0 residual members; exactly 1 required (not exhaustive)")]


def test_check_3_two_residuals():
    v = add(good_vault(), hyp("H-6", residual=True, cluster=link("HC-1")))
    meta(v, "HC-1")["hypotheses"] = [link("H-1"), link("H-5"), link("H-6")]
    assert check_3_residuals(v) == [("HC-1", "2 residual members; exactly 1 required (not exhaustive)")]


def test_check_3_the_residual_is_listed_last():
    v = good_vault()
    meta(v, "HC-1")["hypotheses"] = [link("H-1"), link("H-5"), link("H-3")]
    assert check_3_residuals(v) == [("HC-1", "residual H-5 is not listed last")]


def test_check_3_a_missing_member_is_left_to_check_2():
    v = good_vault()
    meta(v, "HC-1")["hypotheses"] = [link("H-1"), "[[H-99 - Nowhere]]", link("H-5")]
    assert check_3_residuals(v) == []


# -- check 4: every active hypothesis in exactly one cluster, its backlink naming it -----------------


def second_cluster(v: Vault, *members: str) -> Vault:
    return add(
        v,
        node(
            "hypothesis-clusters",
            "HC-2",
            type="hypothesis-cluster",
            hypotheses=[link(m) for m in members],
            exclusivity="x",
            independence="y",
            depends_on=[],
            exhaustive_by_construction=False,
        ),
    )


def test_check_4_a_hypothesis_in_two_clusters():
    v = second_cluster(good_vault(), "H-3", "H-5")
    assert check_4_membership(v) == [("H-3", "in 2 clusters: HC-1, HC-2"), ("H-5", "in 2 clusters: HC-1, HC-2")]


def test_check_4_listed_twice_in_one_cluster_is_one_cluster():
    v = good_vault()
    meta(v, "HC-1")["hypotheses"] = [link("H-1"), link("H-3"), link("H-3"), link("H-5")]
    assert check_4_membership(v) == []


def test_check_4_an_active_hypothesis_in_no_cluster():
    v = good_vault()
    meta(v, "HC-1")["hypotheses"] = [link("H-1"), link("H-5")]
    assert check_4_membership(v) == [("H-3", "active but in no cluster")]


@pytest.mark.parametrize("backlink", [None, link("HC-2"), "HC-1"])
def test_check_4_the_cluster_backlink_names_the_cluster(backlink):
    v = good_vault()
    meta(v, "H-3")["cluster"] = backlink
    assert check_4_membership(v) == [("H-3", f"cluster backlink {backlink!r} does not name HC-1")]


def test_check_4_the_backlink_of_a_hypothesis_in_two_clusters_names_one_of_them():
    v = second_cluster(good_vault(), "H-3", "H-1")
    meta(v, "H-3")["cluster"] = link("HC-2")
    assert check_4_membership(v) == [("H-1", "in 2 clusters: HC-1, HC-2"), ("H-3", "in 2 clusters: HC-1, HC-2")]


def test_check_4_asks_nothing_of_merged_or_dropped_hypotheses():
    v = good_vault()
    meta(v, "H-2")["cluster"] = link("HC-2")
    meta(v, "H-4")["cluster"] = None
    assert check_4_membership(v) == []


# -- check 5: survivors keep their provenance ------------------------------------------------------


def test_check_5_a_survivor_needs_merged_from():
    v = good_vault()
    del meta(v, "H-1")["merged_from"]
    assert check_5_survivors(v, BASELINE) == [
        ("H-1", "survivor without merged_from"),
        ("H-1", "merged_from lacks H-2"),
        ("H-1", "additional_sources ['S-2'] != absorbed sources []"),
    ]


def test_check_5_merged_from_lists_every_node_merged_into_the_survivor():
    v = add(good_vault(), hyp("H-6", "merged", merged_into=link("H-1"), source=link("S-1"), locator="p. 4"))
    assert check_5_survivors(v, BASELINE) == [("H-1", "merged_from lacks H-6")]
    meta(v, "H-1")["merged_from"] = [link("H-2")]
    v2 = add(good_vault(), hyp("H-6", "merged", merged_into="[[H-1]]", source=link("S-1"), locator="p. 4"))
    add(v2, hyp("H-10", "merged", merged_into=link("H-1"), source=link("S-1"), locator="p. 4"))
    assert check_5_survivors(v2, BASELINE) == [("H-1", "merged_from lacks H-10, H-6")]


def test_check_5_goes_on_past_hypotheses_that_are_no_survivors():
    v = add(good_vault(), hyp("H-6", "merged", merged_into=link("H-3"), source=link("S-3"), locator="p. 9"))
    assert check_5_survivors(v, BASELINE) == [
        ("H-3", "survivor without merged_from"),
        ("H-3", "merged_from lacks H-6"),
        ("H-3", "locator should be one 'S-N: where' entry per source ['S-3']"),
    ]


def test_check_5_reads_a_single_link_where_a_list_is_usual():
    v = good_vault()
    meta(v, "H-1").update(merged_from=link("H-2"), additional_sources=link("S-2"))
    assert check_5_survivors(v, BASELINE) == []


def test_check_5_a_merged_node_without_merged_into_names_no_survivor():
    v = add(good_vault(), hyp("H-6", "merged", merged_into=None, source=link("S-1")))
    assert check_5_survivors(v, BASELINE) == []


def test_check_5_an_inactive_node_listing_merged_from_is_no_survivor():
    v = good_vault()
    meta(v, "H-4")["merged_from"] = [link("H-2")]
    assert check_5_survivors(v, BASELINE) == []


def test_check_5_a_survivor_is_recognised_by_merged_from_alone():
    """A node listing merged_from though nothing is merged into it is still held to the rules."""
    v = good_vault()
    meta(v, "H-2")["merged_into"] = None
    meta(v, "H-1")["locator"] = ["S-1: p. 4"]
    assert check_5_survivors(v, BASELINE) == [
        ("H-1", "locator should be one 'S-N: where' entry per source ['S-1', 'S-2']")
    ]


@pytest.mark.parametrize("source", [[link("S-1")], "S-1", None, "", "[[Okafor]]"])
def test_check_5_a_survivor_s_source_is_one_link(source):
    v = good_vault()
    meta(v, "H-1")["source"] = source
    got = check_5_survivors(v, None)
    assert got[0] == ("H-1", "source is not a single [[S-N]] link")
    assert ("H-1", "source was rewritten") not in got


def test_check_5_a_survivor_whose_source_is_no_link_is_reported_not_a_crash():
    """Was a TypeError (sorting None with the source ids) that stopped ``hypograph check``."""
    v = good_vault()
    meta(v, "H-1")["source"] = "S-1"
    assert check_5_survivors(v, BASELINE) == [
        ("H-1", "source is not a single [[S-N]] link"),
        ("H-1", "locator should be one 'S-N: where' entry per source ['S-2']"),
    ]


def test_check_4_reports_hypotheses_in_id_order_whatever_the_listing():
    v = add(good_vault(), hyp("H-10", source=link("S-3"), locator="p. 2", cluster=link("HC-1")))
    meta(v, "HC-1")["hypotheses"] = [link("H-1"), link("H-3"), link("H-10"), link("H-5")]
    second_cluster(v, "H-10", "H-5", "H-3")
    assert check_4_membership(v) == [
        ("H-3", "in 2 clusters: HC-1, HC-2"),
        ("H-5", "in 2 clusters: HC-1, HC-2"),
        ("H-10", "in 2 clusters: HC-1, HC-2"),
    ]


def test_check_5_a_survivor_keeps_its_step3_source():
    v = good_vault()
    meta(v, "H-1")["source"] = "[[S-1]]"  # the same source, linked without its title
    assert check_5_survivors(v, BASELINE) == []
    meta(v, "H-1").update(source=link("S-3"), additional_sources=[link("S-2")], locator=["S-3: p. 4", "S-2: fig. 2"])
    assert check_5_survivors(v, BASELINE) == [("H-1", "source was rewritten")]
    assert check_5_survivors(v, None) == []
    assert check_5_survivors(v, {"H-3": BASELINE["H-3"]}) == []


@pytest.mark.parametrize(
    "extra, shown",
    [([], "[]"), ([link("S-3")], "['S-3']"), ([link("S-2"), link("S-3")], "['S-2', 'S-3']"), (None, "[]")],
)
def test_check_5_additional_sources_are_exactly_the_absorbed_sources(extra, shown):
    v = good_vault()
    meta(v, "H-1")["additional_sources"] = extra
    got = check_5_survivors(v, BASELINE)
    assert got[0] == ("H-1", f"additional_sources {shown} != absorbed sources ['S-2']")


def test_check_5_additional_sources_never_repeat_the_own_source():
    v = good_vault()
    meta(v, "H-1")["additional_sources"] = [link("S-1"), link("S-2")]
    assert check_5_survivors(v, BASELINE) == [
        ("H-1", "additional_sources ['S-1', 'S-2'] != absorbed sources ['S-2']"),
        ("H-1", "additional_sources repeats the node's own source"),
    ]


def test_check_5_an_absorbed_node_citing_the_survivor_s_source_adds_no_additional_source():
    v = add(good_vault(), hyp("H-6", "merged", merged_into=link("H-1"), source=link("S-1"), locator="p. 7"))
    meta(v, "H-1")["merged_from"] = [link("H-2"), link("H-6")]
    assert check_5_survivors(v, BASELINE) == []
    meta(v, "H-2")["source"] = None  # an absorbed node without a source adds none either
    meta(v, "H-1").update(additional_sources=[], locator=["S-1: p. 4"])
    assert check_5_survivors(v, BASELINE) == []


def test_check_5_merged_from_naming_a_missing_node_adds_no_source():
    v = good_vault()
    meta(v, "H-1")["merged_from"] = [link("H-2"), "[[H-99 - Nowhere]]"]
    assert check_5_survivors(v, BASELINE) == []


@pytest.mark.parametrize(
    "locator",
    [
        "p. 4",
        ["S-1: p. 4"],
        ["S-1: p. 4", "S-2: fig. 2", "S-2: fig. 3"],
        ["S-1 p. 4", "S-2: fig. 2"],
        ["S-1: p. 4", "S-3: fig. 2"],
        None,
    ],
)
def test_check_5_one_locator_entry_per_source(locator):
    v = good_vault()
    meta(v, "H-1")["locator"] = locator
    assert check_5_survivors(v, BASELINE) == [
        ("H-1", "locator should be one 'S-N: where' entry per source ['S-1', 'S-2']")
    ]


def test_check_5_locator_entries_may_come_in_any_order_and_hold_colons():
    v = good_vault()
    meta(v, "H-1")["locator"] = [" S-2 : fig. 2: left", "S-1:p. 4"]
    assert check_5_survivors(v, BASELINE) == []


def test_check_5_a_widened_statement_carries_a_generalization_note():
    v = good_vault()
    meta(v, "H-1")["statement"] = "Mites spread or carry the virus."
    assert check_5_survivors(v, BASELINE) == [("H-1", "statement widened without a generalization_note")]
    meta(v, "H-1")["generalization_note"] = "Covers carrying too."
    assert check_5_survivors(v, BASELINE) == []
    assert check_5_survivors(v, {"H-3": BASELINE["H-3"]}) == []  # no step-3 record: nothing to compare


@pytest.mark.parametrize("note, flagged", [("Covers carrying too.", True), ("  ", False), (None, False)])
def test_check_5_a_generalization_note_needs_a_widened_statement(note, flagged):
    v = good_vault()
    meta(v, "H-1")["generalization_note"] = note
    assert check_5_survivors(v, BASELINE) == (
        [("H-1", "generalization_note present without a widened statement")] if flagged else []
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"residual": False},
        {"residual": "true"},
        {"residual": False, "source": ""},
        {"residual": False, "origin": "step-4-constructed"},
        {"residual": False, "origin": "constructed"},
    ],
)
def test_check_5_an_active_hypothesis_without_a_source_is_the_residual_or_constructed_with_a_reason(fields):
    v = good_vault()
    meta(v, "H-5").update(fields)
    v.nodes["H-5"].body = "\n  \n" if "origin" in fields else "Because the losses need another explanation."
    assert check_5_survivors(v, BASELINE) == [
        ("H-5", "no source, not a residual, and not origin: step-4-constructed with a reason")
    ]


def test_check_5_a_constructed_hypothesis_with_a_reason_needs_no_source():
    v = good_vault()
    meta(v, "H-5").update(residual=False, origin="step-4-constructed")
    v.nodes["H-5"].body = "Built in step 4: the cluster lacked a rival explanation."
    assert check_5_survivors(v, BASELINE) == []


def test_check_5_asks_no_source_of_merged_or_dropped_hypotheses():
    v = good_vault()
    meta(v, "H-4")["source"] = None
    meta(v, "H-2")["source"] = None
    meta(v, "H-1").update(additional_sources=[], locator=["S-1: p. 4"])
    assert check_5_survivors(v, BASELINE) == []


# -- check 6: no numbers in step-4 fields ----------------------------------------------------------


@pytest.mark.parametrize("key", STEP4_FIELDS)
def test_check_6_every_disposition_field_of_a_hypothesis_holds_no_number(key):
    v = good_vault()
    meta(v, "H-3")[key] = 3
    assert check_6_no_numbers(v) == [("H-3", f"{key} = 3: step-4 fields hold no numbers")]


def test_check_6_a_hypothesis_s_own_fields_may_hold_numbers():
    v = good_vault()
    meta(v, "H-3").update(statement="Loads above 3% kill 0.5 of colonies.", locator="p. 0.5", year=2021)
    assert check_6_no_numbers(v) == []


@pytest.mark.parametrize("key", ["exclusivity", "independence", "depends_on", "relevance"])
def test_check_6_every_field_of_a_cluster_holds_no_number(key):
    v = good_vault()
    meta(v, "HC-1")[key] = 0.9
    assert check_6_no_numbers(v) == [("HC-1", f"{key} = 0.9: step-4 fields hold no numbers")]


@pytest.mark.parametrize(
    "text, found",
    [
        ("Probability 0.35 that one holds.", "0.35"),
        ("About .2 of colonies.", ".2"),
        ("Certain: 1.0.", "1.0"),
        ("Holds in 35% of cases.", "35%"),
        ("Holds in 35 percent of cases.", "35 percent"),
        ("Holds in 35.5 % of cases.", "35.5 %"),
        ("Weight: 3, strong", "Weight: 3"),
        ("prior=high", "prior=h"),
        ("Likelihood : low", "Likelihood : l"),
        ("RANK=1", "RANK=1"),
        ("odds: even", "odds: e"),
        ("probability:x", "probability:x"),
    ],
)
def test_check_6_finds_probabilities_percentages_and_weights_in_text(text, found):
    assert _numbers(text, "exclusivity") == [f"exclusivity contains {found!r}"]


@pytest.mark.parametrize(
    "text",
    [
        "Sampled in 2 apiaries, 3 years apart.",
        "See H-3 and O-12.",
        "Version 2.0.1",
        "A ranking of causes",
        "weighted by hand",
        "[[O-3 - Rainfall fell 35% in 0.5 years]]",
        "Colonies 1.05 apart",
        "x.5 and v1.0",
    ],
)
def test_check_6_counts_ids_and_linked_titles_are_not_numbers(text):
    assert _numbers(text, "exclusivity") == []


def test_check_6_a_link_alias_is_read():
    assert _numbers("[[O-3 - Rainfall|a 35% chance]]", "cluster") == ["cluster contains '35%'"]


def test_check_6_a_number_written_against_a_link_is_found():
    """The link's target is blanked out, not glued to the text around it."""
    assert _numbers("a chance of 0.4[[O-3 - Rainfall]]", "cluster") == ["cluster contains '0.4'"]


def test_check_6_walks_lists_and_mappings_naming_the_place():
    value = {"a": [True, None, "fine", "p = 0.4"], "b": {"c": 2}, "d": 1.5}
    assert _numbers(value, "origin") == ["origin.a[3] contains '0.4'", "origin.b.c = 2", "origin.d = 1.5"]
    meta_ = good_vault()
    meta(meta_, "HC-1")["depends_on"] = ["HC-2: independent", "HC-3: weight = 2"]
    assert check_6_no_numbers(meta_) == [("HC-1", "depends_on[1] contains 'weight = 2': step-4 fields hold no numbers")]


@pytest.mark.parametrize("value", [True, False, None, b"0.5", 3j])
def test_check_6_flags_no_boolean_nor_other_values(value):
    assert _numbers(value, "residual") == []


def test_check_6_reports_every_number_of_every_node_in_order():
    v = good_vault()
    meta(v, "H-1")["generalization_note"] = "Covers 80% of cases."
    meta(v, "H-3")["cluster"] = 1
    meta(v, "HC-1").update(exclusivity=0.5, independence="prior: low")
    assert check_6_no_numbers(v) == [
        ("H-1", "generalization_note contains '80%': step-4 fields hold no numbers"),
        ("H-3", "cluster = 1: step-4 fields hold no numbers"),
        ("HC-1", "exclusivity = 0.5: step-4 fields hold no numbers"),
        ("HC-1", "independence contains 'prior: l': step-4 fields hold no numbers"),
    ]


def test_the_check_names_cover_the_seven_checks():
    assert sorted(checks.CHECK_NAMES) == [1, 2, 3, 4, 5, 6, 7]


def test_check_7_names_every_keep_pair_under_one_survivor_transitively():
    """H-1 absorbed H-2 and H-3; H-3 had absorbed H-4 (its merged_from): all four are under H-1."""

    def h(i, **meta):
        folder = "hypotheses/merged" if meta.get("state") == "merged" else "hypotheses"
        return Node(Path(f"{folder}/H-{i} - T{i}.md"), {"type": "hypothesis", "id": f"H-{i}", **meta}, "")

    link = lambda i: f"[[H-{i} - T{i}]]"  # noqa: E731
    v = Vault(
        Path("vault"),
        {
            n.id: n
            for n in [
                h(1, state="active", merged_from=[link(2), link(3)]),
                h(2, state="merged", merged_into=link(1)),
                h(3, state="merged", merged_into=link(1), merged_from=[link(4)]),
                h(4, state="merged", merged_into=link(1)),
                h(5, state="active"),
            ]
        },
    )
    keeps = {frozenset(("H-2", "H-4")): "model:m", frozenset(("H-1", "H-5")): "human"}
    assert checks.check_7_keep_apart(v, keeps) == [
        ("H-1", "H-2 and H-4 are both under survivor H-1 but recorded KEEP (decided by model:m)")
    ]
    assert checks.check_7_keep_apart(v, {frozenset(("H-1", "H-5")): "human"}) == []


def test_check_5_an_active_node_with_a_stale_merged_into_is_no_absorbed_node():
    """Only a merged node is absorbed: an active one whose merged_into was left behind is not."""
    v = good_vault()
    meta(v, "H-3")["merged_into"] = link("H-1")
    assert check_5_survivors(v, BASELINE) == []


def test_the_checks_report_every_cluster_and_every_survivor_not_only_the_last():
    """Two broken clusters, two broken survivors: each check lists the violations of both."""
    v = good_vault()
    add(v, hyp("H-6", statement="Mites move the virus.", source=link("S-3"), locator="p. 2", cluster=link("HC-2")))
    add(v, hyp("H-10", statement="Tenth.", source=link("S-2"), locator="p. 3", cluster=link("HC-2")))
    add(
        v,
        node(
            "hypothesis-clusters",
            "HC-2",
            type="hypothesis-cluster",
            hypotheses=[link("H-6"), link("H-10")],
            exclusivity="",
            independence="Apart.",
            depends_on=[],
            exhaustive_by_construction=False,
        ),
    )
    meta(v, "HC-1")["independence"] = ""
    assert check_2_clusters(v) == [("HC-1", "independence is empty"), ("HC-2", "exclusivity is empty")]
    assert check_3_residuals(v) == [("HC-2", "0 residual members; exactly 1 required (not exhaustive)")]
    meta(v, "HC-1")["hypotheses"] = [link("H-1"), link("H-3")]
    assert check_3_residuals(v) == [
        ("HC-1", "0 residual members; exactly 1 required (not exhaustive)"),
        ("HC-2", "0 residual members; exactly 1 required (not exhaustive)"),
    ]
    meta(v, "H-6")["merged_from"] = [link("H-4")]
    meta(v, "H-1")["merged_from"] = []
    assert [x for x in check_5_survivors(v, BASELINE) if x[1].startswith(("survivor", "merged_from"))] == [
        ("H-1", "survivor without merged_from"),
        ("H-1", "merged_from lacks H-2"),
    ]
    assert ("H-6", "additional_sources [] != absorbed sources ['S-3']") not in check_5_survivors(v, BASELINE)
    assert any(x[0] == "H-6" for x in check_5_survivors(v, BASELINE))


def _h7(i, **meta) -> Node:
    folder = {"merged": "hypotheses/merged", "dropped": "hypotheses/dropped"}.get(meta.get("state"), "hypotheses")
    return Node(Path(f"{folder}/H-{i} - T{i}.md"), {"type": "hypothesis", "id": f"H-{i}", **meta}, "")


def _l7(i) -> str:
    return f"[[H-{i} - T{i}]]"


def keep_vault(root: Path = Path("vault")) -> Vault:
    """H-1 absorbed H-2 and H-3; H-3 lists H-4 (dropped since) in its merged_from, so H-4 is under
    H-1 only through H-3's own field (as is H-99, which has no file); H-6 absorbed H-10 (its
    merged_into says so, H-6 lists nothing); H-5 is alone."""
    return Vault(
        root,
        {
            n.id: n
            for n in [
                _h7(1, state="active", merged_from=[_l7(2), _l7(3)]),
                _h7(2, state="merged", merged_into=_l7(1)),
                _h7(3, state="merged", merged_into=_l7(1), merged_from=[_l7(4), _l7(99)]),
                _h7(4, state="dropped", drop_reason="gone"),
                _h7(5, state="active"),
                _h7(6, state="active"),
                _h7(10, state="merged", merged_into=_l7(6)),
            ]
        },
    )


KEEPS = {
    frozenset(("H-1", "H-2")): "human",
    frozenset(("H-2", "H-4")): "model:m",
    frozenset(("H-3", "H-4")): "model:m",
    frozenset(("H-6", "H-10")): "human",
    frozenset(("H-1", "H-5")): "human",
}
KEEP_LINES = [
    ("H-1", "H-1 and H-2 are both under survivor H-1 but recorded KEEP (decided by human)"),
    ("H-1", "H-2 and H-4 are both under survivor H-1 but recorded KEEP (decided by model:m)"),
    ("H-1", "H-3 and H-4 are both under survivor H-1 but recorded KEEP (decided by model:m)"),
    ("H-6", "H-6 and H-10 are both under survivor H-6 but recorded KEEP (decided by human)"),
]


def test_check_7_follows_merged_from_and_merged_into_and_reports_every_survivor():
    assert checks.check_7_keep_apart(keep_vault(), KEEPS) == KEEP_LINES
    assert checks.check_7_keep_apart(keep_vault(), {}) == []


def write_keeps(root: Path, ledger, review) -> None:
    (root / ".hypograph").mkdir(parents=True, exist_ok=True)
    (root / "proximity").mkdir(parents=True, exist_ok=True)
    for path, doc in ((root / ".hypograph/dispositions.json", ledger), (root / "proximity/review.json", review)):
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")


LEDGER_DOC = {
    "pairs": {
        "a": {"pair": ["H-1", "H-2"], "decision": "KEEP", "decided_by": "human"},
        "b": {"pair": ["H-2", "H-4"], "decision": "KEEP", "decided_by": "model:m"},
        "c": {"pair": ["H-3", "H-4"], "decision": "KEEP"},
        "d": {"pair": ["H-1", "H-3"], "decision": "MERGE", "decided_by": "model:m"},
        "e": {"pair": ["H-7"], "decision": "KEEP"},
        "f": {"pair": "H-8", "decision": "KEEP"},
        "g": {"pair": ["H-9", 3], "decision": "KEEP"},
        "h": "no entry",
    }
}
REVIEW_DOC = [
    {"pair": ["H-2", "H-1"], "verdict": "KEEP", "rationale": "distinct"},
    {"pair": ["H-6", "H-10"], "verdict": "KEEP", "rationale": "distinct"},
    {"pair": ["H-1", "H-5"], "verdict": "MERGE", "rationale": "the same"},
]


def test_recorded_keeps_reads_the_ledger_then_review_json(tmp_path):
    write_keeps(tmp_path, LEDGER_DOC, REVIEW_DOC)
    assert checks.recorded_keeps(tmp_path, keep_vault(tmp_path).nodes) == {
        frozenset(("H-1", "H-2")): "human",
        frozenset(("H-2", "H-4")): "model:m",
        frozenset(("H-3", "H-4")): "?",
        frozenset(("H-6", "H-10")): "human",
    }
    lines = checks.check_7_keep_apart(keep_vault(tmp_path))  # no keeps given: read from the files
    assert lines == [*KEEP_LINES[:2], (KEEP_LINES[2][0], KEEP_LINES[2][1].replace("model:m", "?")), KEEP_LINES[3]]


def test_a_ledger_keep_is_not_overwritten_by_review_json(tmp_path):
    write_keeps(
        tmp_path,
        {"pairs": {"a": {"pair": ["H-1", "H-2"], "decision": "KEEP", "decided_by": "model:m"}}},
        [{"pair": ["H-1", "H-2"], "verdict": "KEEP", "rationale": "distinct"}],
    )
    assert checks.recorded_keeps(tmp_path, keep_vault(tmp_path).nodes) == {frozenset(("H-1", "H-2")): "model:m"}


@pytest.mark.parametrize(
    ("ledger", "review"),
    [
        ("{not json", []),  # an unreadable ledger; no review
        ([1, 2], []),  # a ledger that is no mapping
        ({"pairs": None}, []),
        (
            {"pairs": {"a": {"pair": ["H-1", "H-2"], "decision": "MERGE"}}},
            [{"pair": ["H-1", "H-2"], "verdict": "MERGE", "rationale": "the same"}],
        ),
    ],
)
def test_a_file_that_holds_no_keep_adds_none(tmp_path, ledger, review):
    write_keeps(tmp_path, ledger, review)
    assert checks.recorded_keeps(tmp_path, keep_vault(tmp_path).nodes) == {}
    assert checks.check_7_keep_apart(keep_vault(tmp_path)) == []


@pytest.mark.parametrize(
    ("review", "message"),
    [
        (5, "expected a JSON list of reviews"),
        ([{"pair": ["H-11", "H-12", "H-13"], "verdict": "KEEP", "rationale": "r"}], "entry 0, field 'pair'"),
        ([{"pair": ["H-1", "H-1"], "verdict": "KEEP", "rationale": "r"}], "entry 0 pairs H-1 with itself"),
        (
            [
                {"pair": ["H-1", "H-5"], "verdict": "KEEP", "rationale": "r"},
                {"pair": ["H-5", "H-1"], "verdict": "MERGE", "rationale": "r"},
            ],
            "entries 0 and 1 decide H-5/H-1 both KEEP and MERGE",
        ),
    ],
)
def test_check_7_refuses_a_review_file_it_cannot_apply_whole(tmp_path, review, message):
    """Check 7 reads review.json through its one reader: what proximity would refuse, it refuses too."""
    write_keeps(tmp_path, {"pairs": {}}, review)
    with pytest.raises(HypographError, match=message):
        checks.check_7_keep_apart(keep_vault(tmp_path))


def test_no_ledger_and_no_review_is_no_keep(tmp_path):
    assert checks.recorded_keeps(tmp_path) == {}
