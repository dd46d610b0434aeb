"""``unmerge`` in-process, on a hand-built vault whose survivor absorbed three nodes (two of them
citing one source): what the survivor gives back, what it keeps, the step-3 shape it returns to,
the cluster the restored node joins, the KEEP on record, and the refusals (found by mutation
testing: the CLI tests run in a subprocess, where no mutant is switched on)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import node_markdown

from hypograph.atomic import write_json
from hypograph.errors import HypographError
from hypograph.structure.baseline import BASELINE
from hypograph.structure.dispositions import read_ledger
from hypograph.structure.unmerge import Unmerged, unmerge, unmerge_node
from hypograph.vault.nodes import link_target
from hypograph.vault.vault import open_vault

S1, S2, S3 = "[[S-1 - Okafor 2019]]", "[[S-2 - Lind 2020]]", "[[S-3 - Ueda 2021]]"
TITLES = {
    "H-1": "Mites spread the virus",
    "H-2": "Mites carry the virus",
    "H-3": "Mites inject the virus",
    "H-4": "Mites pass on the virus",
    "H-5": "Cold kills clusters",
    "H-6": "Neither route listed here",
}


def link(node_id: str) -> str:
    return f"[[{node_id} - {TITLES[node_id]}]]"


def write(root: Path, rel: str, **meta) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(node_markdown(meta, "\nNotes.\n"), encoding="utf-8")


def h(root: Path, node_id: str, folder: str = "hypotheses", **meta) -> None:
    write(root, f"{folder}/{node_id} - {TITLES[node_id]}.md", type="hypothesis", id=node_id, **meta)


@pytest.fixture
def vault(tmp_path) -> Path:
    """H-1 (S-1) absorbed H-2 (S-2), H-3 and H-4 (both S-3), widened; HC-1 lists H-1, H-5 and the
    residual H-6. The baseline holds H-1's step-3 statement and locator."""
    root = tmp_path / "vault"
    h(
        root,
        "H-1",
        statement="Mites and what they carry kill colonies.",
        source=S1,
        additional_sources=[S2, S3],
        locator=["S-1: Results", "S-2: Fig 2: panel b", "S-3: Table 1; Table 2"],
        state="active",
        cluster="[[HC-1 - Why colonies die]]",
        merged_from=[link("H-2"), link("H-3"), link("H-4")],
        generalization_note="Widened to every mite-borne virus.",
    )
    for node_id, source, where in (("H-2", S2, "Fig 2: panel b"), ("H-3", S3, "Table 1"), ("H-4", S3, "Table 2")):
        h(
            root,
            node_id,
            folder="hypotheses/merged",
            statement=f"{TITLES[node_id]}.",
            source=source,
            locator=where,
            state="merged",
            merged_into=link("H-1"),
        )
    h(
        root,
        "H-5",
        statement="Cold kills clusters.",
        source=S2,
        locator="Intro",
        state="active",
        cluster="[[HC-1 - Why colonies die]]",
    )
    h(
        root,
        "H-6",
        statement="Neither.",
        state="active",
        residual=True,
        origin="step-4-constructed",
        cluster="[[HC-1 - Why colonies die]]",
    )
    write(
        root,
        "hypothesis-clusters/HC-1 - Why colonies die.md",
        type="hypothesis-cluster",
        id="HC-1",
        hypotheses=[link("H-1"), link("H-5"), link("H-6")],
        exclusivity="One cause.",
        independence="Separate.",
        depends_on=[],
        exhaustive_by_construction=False,
    )
    write_json(
        root / BASELINE,
        {"hypotheses": {"H-1": {"statement": "Mites kill colonies.", "source": S1, "locator": "Results"}}},
    )
    return root


def meta(root: Path, node_id: str) -> dict:
    return open_vault(root).nodes[node_id].meta


def test_the_restored_node_is_active_in_the_survivors_cluster_at_its_place(vault):
    assert unmerge(vault, "H-2") == ("H-2", "H-1")
    nodes = open_vault(vault).nodes
    h2 = nodes["H-2"]
    assert h2.path == Path("hypotheses/H-2 - Mites carry the virus.md")
    assert h2.meta == {
        "type": "hypothesis",
        "id": "H-2",
        "statement": "Mites carry the virus.",
        "source": S2,
        "locator": "Fig 2: panel b",
        "state": "active",
        "cluster": "[[HC-1 - Why colonies die]]",
    }
    assert [link_target(x) for x in nodes["HC-1"].meta["hypotheses"]] == ["H-1", "H-2", "H-5", "H-6"]
    decision = read_ledger(vault).pairs["H-1|H-2"]
    assert (decision.pair, decision.decision, decision.decided_by) == (("H-1", "H-2"), "KEEP", "human")
    assert decision.rationale == "Unmerged by hand (H-2 from H-1)."


def test_the_survivor_gives_back_the_source_only_it_brought(vault):
    unmerge(vault, "H-2")
    m = meta(vault, "H-1")
    assert m["merged_from"] == [link("H-3"), link("H-4")]
    assert m["additional_sources"] == [S3]
    assert m["locator"] == ["S-1: Results", "S-3: Table 1; Table 2"]
    assert m["statement"] == "Mites and what they carry kill colonies."  # still widened over H-3, H-4
    assert m["generalization_note"] == "Widened to every mite-borne virus."


def test_a_source_another_absorbed_node_still_cites_is_kept(vault):
    unmerge(vault, "H-3")
    m = meta(vault, "H-1")
    assert m["merged_from"] == [link("H-2"), link("H-4")]
    assert m["additional_sources"] == [S2, S3]
    assert m["locator"] == ["S-1: Results", "S-2: Fig 2: panel b", "S-3: Table 1; Table 2"]


def test_the_last_unmerge_returns_the_survivor_to_its_step3_shape(vault):
    for node_id in ("H-2", "H-3", "H-4"):
        unmerge(vault, node_id)
    m = meta(vault, "H-1")
    assert m == {
        "type": "hypothesis",
        "id": "H-1",
        "statement": "Mites kill colonies.",
        "source": S1,
        "locator": "Results",
        "state": "active",
        "cluster": "[[HC-1 - Why colonies die]]",
    }
    assert [link_target(x) for x in meta(vault, "HC-1")["hypotheses"]] == ["H-1", "H-2", "H-3", "H-4", "H-5", "H-6"]


def test_without_a_baseline_or_note_the_survivor_keeps_its_statement(vault):
    (vault / BASELINE).unlink()
    nodes = open_vault(vault).nodes
    survivor = nodes["H-1"]
    survivor.meta.pop("generalization_note")
    survivor.meta["merged_from"] = [link("H-2")]
    survivor.meta["additional_sources"] = [S2]
    survivor.meta["locator"] = ["S-1: Results", "S-2: Fig 2: panel b"]
    (vault / survivor.path).write_text(survivor.text(), encoding="utf-8")
    for node_id in ("H-3", "H-4"):
        (vault / nodes[node_id].path).unlink()
    unmerge(vault, "H-2")
    assert meta(vault, "H-1") == {
        "type": "hypothesis",
        "id": "H-1",
        "statement": "Mites and what they carry kill colonies.",
        "source": S1,
        "locator": ["S-1: Results"],
        "state": "active",
        "cluster": "[[HC-1 - Why colonies die]]",
    }


def test_an_absorbed_node_citing_the_survivors_own_source_takes_nothing_back(vault):
    """H-2 cites S-1 too: the survivor's own source and locator entry stay; additional_sources
    emptied by nothing else is dropped when merged_from still lists others."""
    nodes = open_vault(vault).nodes
    h2, survivor = nodes["H-2"], nodes["H-1"]
    h2.meta["source"] = S1
    (vault / h2.path).write_text(h2.text(), encoding="utf-8")
    survivor.meta["additional_sources"] = [S3]
    survivor.meta["locator"] = ["S-1: Results; Fig 2: panel b", "S-3: Table 1; Table 2"]
    (vault / survivor.path).write_text(survivor.text(), encoding="utf-8")
    unmerge(vault, "H-2")
    m = meta(vault, "H-1")
    assert m["additional_sources"] == [S3] and m["locator"] == ["S-1: Results; Fig 2: panel b", "S-3: Table 1; Table 2"]

    unmerge(vault, "H-3")  # H-4 still cites S-3
    unmerge(vault, "H-4")
    assert "additional_sources" not in meta(vault, "H-1")


def test_emptied_additional_sources_are_removed_while_others_stay_merged(vault):
    nodes = open_vault(vault).nodes
    for node_id in ("H-3", "H-4"):  # both now cite the survivor's own source
        nodes[node_id].meta["source"] = S1
        (vault / nodes[node_id].path).write_text(nodes[node_id].text(), encoding="utf-8")
    survivor = nodes["H-1"]
    survivor.meta["additional_sources"] = [S2]
    survivor.meta["locator"] = ["S-1: Results; Table 1; Table 2", "S-2: Fig 2: panel b"]
    (vault / survivor.path).write_text(survivor.text(), encoding="utf-8")
    unmerge(vault, "H-2")
    m = meta(vault, "H-1")
    assert m["merged_from"] == [link("H-3"), link("H-4")]
    assert "additional_sources" not in m and m["locator"] == ["S-1: Results; Table 1; Table 2"]


def test_a_survivor_in_no_cluster_restores_the_node_without_one(vault):
    nodes = open_vault(vault).nodes
    survivor = nodes["H-1"]
    survivor.meta.pop("cluster")
    (vault / survivor.path).write_text(survivor.text(), encoding="utf-8")
    hc_before = (vault / nodes["HC-1"].path).read_text()
    unmerge(vault, "H-2")
    assert "cluster" not in meta(vault, "H-2") and meta(vault, "H-2")["state"] == "active"
    assert (vault / nodes["HC-1"].path).read_text() == hc_before


@pytest.mark.parametrize(
    "node_id, message",
    [
        ("H-77", "{root}: no hypothesis H-77"),
        ("HC-1", "{root}: no hypothesis HC-1"),
        ("H-5", "hypotheses/H-5 - Cold kills clusters.md: field 'state': H-5 is 'active', not merged"),
    ],
)
def test_what_cannot_be_unmerged_is_refused_in_one_line(vault, node_id, message):
    before = {p: p.read_bytes() for p in vault.rglob("*.md")}
    with pytest.raises(HypographError) as err:
        unmerge(vault, node_id)
    assert str(err.value) == message.format(root=vault)
    assert {p: p.read_bytes() for p in vault.rglob("*.md")} == before


def test_a_merged_node_whose_survivor_is_gone_is_refused(vault):
    (vault / "hypotheses" / f"H-1 - {TITLES['H-1']}.md").unlink()
    with pytest.raises(HypographError) as err:
        unmerge(vault, "H-2")
    assert str(err.value) == (
        f"hypotheses/merged/H-2 - Mites carry the virus.md: field 'merged_into': {link('H-1')!r} resolves to no node"
    )


def test_a_survivor_citing_only_its_own_source_has_no_additional_sources_to_give_back(vault):
    nodes = open_vault(vault).nodes
    for node_id in ("H-2", "H-3", "H-4"):
        nodes[node_id].meta["source"] = S1
        (vault / nodes[node_id].path).write_text(nodes[node_id].text(), encoding="utf-8")
    survivor = nodes["H-1"]
    survivor.meta.pop("additional_sources")
    survivor.meta["locator"] = ["S-1: Results; Fig 2: panel b; Table 1; Table 2"]
    (vault / survivor.path).write_text(survivor.text(), encoding="utf-8")
    unmerge(vault, "H-2")
    m = meta(vault, "H-1")
    assert m["merged_from"] == [link("H-3"), link("H-4")] and "additional_sources" not in m
    assert m["locator"] == ["S-1: Results; Fig 2: panel b; Table 1; Table 2"]


def test_the_summary_names_the_cluster_the_restored_node_joined(vault):
    done = unmerge_node(vault, "H-2")
    assert done == Unmerged("H-2", "H-1", "HC-1")
    assert done.summary() == (
        "H-2 restored to hypotheses/ (active) and placed in HC-1, H-1's cluster; H-1 gave back its source and locator."
    )


def test_the_summary_of_a_node_restored_outside_any_cluster_says_to_structure(vault):
    path = vault / "hypotheses/H-1 - Mites spread the virus.md"
    text = path.read_text(encoding="utf-8")
    path.write_text(re.sub(r"^cluster: .*\n", "", text, count=1, flags=re.M), encoding="utf-8")
    assert "cluster:" not in path.read_text(encoding="utf-8")
    done = unmerge_node(vault, "H-3")
    assert done == Unmerged("H-3", "H-1", None)
    assert done.summary() == (
        "H-3 restored to hypotheses/ (active); H-1 gave back its source and locator. "
        "Run `hypograph structure` to cluster it."
    )


SEED_STYLE = """---
type: hypothesis
id: H-1
statement: Mites kill colonies.
source: "[[S-1 - Okafor 2019]]"
additional_sources:
  - "[[S-2 - Lind 2020]]"
locator:
  - "S-1: Results"
  - "S-2: Fig 2: panel b"
state: active
merged_from:
  - "[[H-2 - Mites carry the virus]]"
  - "[[H-3 - Mites inject the virus]]"
---

Notes.
"""


def test_the_survivor_keeps_the_yaml_style_of_the_fields_it_changes(tmp_path):
    root = tmp_path / "vault"
    (root / "hypotheses").mkdir(parents=True)
    (root / "hypotheses/H-1 - Mites spread the virus.md").write_text(SEED_STYLE, encoding="utf-8")
    h(
        root,
        "H-2",
        folder="hypotheses/merged",
        statement="x.",
        source=S2,
        locator="Fig 2",
        state="merged",
        merged_into=link("H-1"),
    )
    h(
        root,
        "H-3",
        folder="hypotheses/merged",
        statement="y.",
        source=S1,
        locator="Results",
        state="merged",
        merged_into=link("H-1"),
    )
    unmerge(root, "H-2")
    text = (root / "hypotheses/H-1 - Mites spread the virus.md").read_text(encoding="utf-8")
    assert text == SEED_STYLE.replace('additional_sources:\n  - "[[S-2 - Lind 2020]]"\n', "").replace(
        '  - "S-2: Fig 2: panel b"\n', ""
    ).replace('  - "[[H-2 - Mites carry the virus]]"\n', "")
