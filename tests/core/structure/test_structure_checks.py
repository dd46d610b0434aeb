"""The structuring spec's six binary checks (``hypograph check`` runs them and check 7) on the real
vaults and on copies of them broken, one rule at a time, to violate exactly the check under test.

Both real vaults were structured by hand (covid1: a merge survivor H-1 <- H-2, a dropped survivor
H-3 <- H-4, one cluster HC-1 with residual H-6; eggs1: three clusters HC-1..HC-3, residuals H-11..H-13).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_helper import hypograph
from cli_helper import hypograph_main as cli_main
from conftest import EXAMPLE_VAULT, SHARED_VAULTS, copy_tree, snapshot

from hypograph.atomic import write_json
from hypograph.structure.baseline import BASELINE, read_baseline
from hypograph.structure.checks import all_checks
from hypograph.vault.vault import open_vault

DELETE = object()


# -- helpers ------------------------------------------------------------------------------------


def real_vault(tmp_path: Path, name: str) -> Path:
    src = SHARED_VAULTS / name
    if not (src / "hypotheses").is_dir():
        pytest.skip(f"{src} is not available")
    return copy_tree(src, tmp_path / name)


class Editor:
    """Edits one vault copy in place, node by node (the vault is read once)."""

    def __init__(self, root: Path):
        self.root = root
        self.nodes = open_vault(root).nodes

    def meta(self, node_id: str) -> dict:
        return self.nodes[node_id].meta

    def link(self, node_id: str) -> str:
        return self.nodes[node_id].link

    def links(self, *ids: str) -> list[str]:
        return [self.nodes[i].link for i in ids]

    def edit(self, node_id: str, body: str | None = None, **fields) -> None:
        """Set (or, with DELETE, remove) frontmatter fields of one node, and optionally its body."""
        node = self.nodes[node_id]
        for key, value in fields.items():
            if value is DELETE:
                node.meta.pop(key, None)
            else:
                node.meta[key] = value
        if body is not None:
            node.body = body
        (self.root / node.path).write_text(node.text(), encoding="utf-8")

    def move(self, node_id: str, folder: str) -> None:
        node = self.nodes[node_id]
        (self.root / folder).mkdir(parents=True, exist_ok=True)
        (self.root / node.path).rename(self.root / folder / node.path.name)
        node.path = Path(folder) / node.path.name

    def delete(self, node_id: str) -> None:
        (self.root / self.nodes.pop(node_id).path).unlink()

    def step3_record(self, node_id: str, **overrides) -> dict:
        """What step 3 handed over for ``node_id``: its current statement, source and locator, overridden."""
        meta = self.meta(node_id)
        return {"statement": meta["statement"], "source": meta["source"], "locator": meta["locator"], **overrides}

    def write_baseline(self, **records: dict) -> None:
        write_json(self.root / BASELINE, {"hypotheses": records})


def violations(root: Path) -> dict[int, list[tuple[str, str]]]:
    return all_checks(open_vault(root), read_baseline(root))


def check_report(output: str) -> dict[int, list[str]]:
    """``hypograph check`` output -> {check number: the violation lines under it}."""
    report: dict[int, list[str]] = {}
    current = None
    for line in output.splitlines():
        if line.startswith("check "):
            current = int(line.split()[1].rstrip(":"))
            report[current] = []
        elif current is not None and line.startswith("  "):
            report[current].append(line.strip())
    return report


def hypograph_check(root: Path) -> subprocess.CompletedProcess:
    """``hypograph check ROOT`` as a user runs it (its exit code and streams are what is tested)."""
    return hypograph("check", root, timeout=120)


# -- the real vaults pass unchanged ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["covid1", "eggs1"])
def test_real_vault_passes_all_seven_checks(tmp_path, name):
    root = real_vault(tmp_path, name)
    before = snapshot(root)
    proc = hypograph_check(root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert check_report(proc.stdout) == {n: [] for n in range(1, 8)}
    assert [line.split("  ")[0] for line in proc.stdout.splitlines() if line.startswith("check")] == [
        f"check {n}: pass" for n in range(1, 8)
    ]
    assert snapshot(root) == before  # checking writes nothing


# -- one broken copy per rule -----------------------------------------------------------------------
# Each breaker edits a copy (through an Editor) so that the named check fails on the named node with the named reason.


def merged_into_dropped_node(v):
    v.edit("H-2", merged_into=v.link("H-3"))


def merged_node_left_in_hypotheses(v):
    v.move("H-2", "hypotheses")


def dropped_without_reason(v):
    v.edit("H-4", drop_reason=DELETE)


def dropped_with_blank_reason(v):
    v.edit("H-4", drop_reason="  ")


def step3_file_gone(v):
    v.write_baseline(**{"H-4": v.step3_record("H-4")})
    v.delete("H-4")


def no_state(v):
    v.edit("H-5", state=DELETE)


def two_states(v):
    v.edit("H-5", state=["active", "merged"])


def cluster_with_one_member(v):
    v.edit("HC-1", hypotheses=v.links("H-6"))


def members_out_of_order(v):
    v.edit("HC-1", hypotheses=v.links("H-5", "H-1", "H-8", "H-11"))


def member_listed_twice(v):
    v.edit("HC-1", hypotheses=v.links("H-1", "H-1", "H-6"))


def member_not_active(v):
    v.edit("HC-1", hypotheses=v.links("H-1", "H-2", "H-5", "H-6"))


def depends_on_key_missing(v):
    v.edit("HC-2", depends_on=DELETE)


def exhaustive_key_missing(v):
    v.edit("HC-2", exhaustive_by_construction=DELETE)


def exclusivity_empty(v):
    v.edit("HC-1", exclusivity="")


def independence_missing(v):
    v.edit("HC-1", independence=DELETE)


def cluster_outside_its_folder(v):
    v.move("HC-3", "hypotheses")


def two_residuals(v):
    v.edit("H-8", residual=True)


def residual_not_last(v):
    v.edit("HC-1", hypotheses=v.links("H-1", "H-5", "H-11", "H-8"))


def no_residual(v):
    v.edit("HC-1", hypotheses=v.links("H-1", "H-5"))


def exhaustive_without_justification(v):
    v.edit(
        "HC-1",
        hypotheses=v.links("H-1", "H-5"),
        exhaustive_by_construction=True,
        body="\n" + "\n".join("!" + link for link in v.links("H-1", "H-5")) + "\n",
    )


EXHAUSTIVENESS = (
    "Exhaustive: a first human infection needs a route, natural or research-related. If the "
    "analysis missed a route (say a lab other than the WIV), that failure would favour {member}."
)


def exhaustive_naming_no_member(v):
    """The justification names H-55, which merely contains the member id H-5."""
    h1, h5 = v.links("H-1", "H-5")
    v.edit(
        "HC-1",
        hypotheses=[h1, h5],
        exhaustive_by_construction=True,
        body=f"\n!{h1}\n\n!{h5}\n\n{EXHAUSTIVENESS.format(member='H-55')}\n",
    )


def exhaustive_with_a_residual(v):
    v.edit("HC-1", exhaustive_by_construction=True)


def active_in_no_cluster(v):
    v.edit("HC-2", hypotheses=v.links("H-2", "H-3", "H-4", "H-10", "H-12"))


def wrong_backlink(v):
    v.edit("H-5", cluster="[[HC-2]]")


def missing_backlink(v):
    v.edit("H-5", cluster=DELETE)


def in_two_clusters(v):
    v.edit("HC-3", hypotheses=v.links("H-5", "H-6", "H-7", "H-13"))


def additional_sources_not_absorbed(v):
    v.edit("H-1", additional_sources=[v.meta("H-3")["source"]])


def additional_sources_missing(v):
    v.edit("H-1", additional_sources=DELETE)


def additional_sources_repeat_own(v):
    meta = v.meta("H-1")
    v.edit("H-1", additional_sources=meta["additional_sources"] + [meta["source"]])


def locator_entry_missing(v):
    v.edit("H-1", locator=["S-2: Discussion"])


def locator_still_a_string(v):
    v.edit("H-1", locator="Discussion")


def survivor_without_merged_from(v):
    v.edit("H-1", merged_from=DELETE)


def source_rewritten(v):
    v.write_baseline(**{"H-1": v.step3_record("H-1", statement="SARS-CoV-2 spilled over at the Huanan market.")})
    v.edit("H-1", source=v.meta("H-3")["source"], locator=["S-11: Discussion", "S-4: Discussion"])


def note_without_widening(v):
    v.write_baseline(**{"H-1": v.step3_record("H-1", locator="Discussion")})


def widened_without_note(v):
    v.write_baseline(**{"H-1": v.step3_record("H-1", statement="SARS-CoV-2 spilled over at the Huanan market.")})
    v.edit("H-1", generalization_note=DELETE)


def sourceless_not_constructed(v):
    v.edit("H-5", source=None)


def probability_in_exclusivity(v):
    v.edit("HC-1", exclusivity="At most one route was the first; the market route holds 0.35 of the mass")


def probability_ending_a_sentence(v):
    v.edit("HC-1", exclusivity="At most one route was the first; the market route holds with 0.35.")


def prior_in_exclusivity(v):
    v.edit("HC-1", exclusivity="One first infection, one route (prior: 0.2 for the lab).")


def percentage_in_note(v):
    v.edit("H-1", generalization_note="Widened to the wildlife trade; 80% of the wording kept.")


def int_field(v):
    v.edit("HC-1", relevance=2)


def float_field(v):
    v.edit("HC-1", independence=0.9)


def weight_in_depends_on(v):
    v.edit("HC-2", depends_on=["HC-1: weight = 3, strong coupling"])


CASES = [
    # check 1: states, one hop, drop reasons, folders, nothing deleted
    ("covid1", merged_into_dropped_node, 1, "H-2", "not active"),
    ("covid1", merged_node_left_in_hypotheses, 1, "H-2", "hypotheses/merged"),
    ("covid1", dropped_without_reason, 1, "H-4", "drop_reason"),
    ("covid1", dropped_with_blank_reason, 1, "H-4", "drop_reason"),
    ("covid1", step3_file_gone, 1, "H-4", "no file"),
    ("eggs1", no_state, 1, "H-5", "state"),
    ("eggs1", two_states, 1, "H-5", "state"),
    # check 2: cluster nodes well formed
    ("covid1", cluster_with_one_member, 2, "HC-1", "at least 2"),
    ("eggs1", members_out_of_order, 2, "HC-1", "order"),
    ("covid1", member_listed_twice, 2, "HC-1", "twice"),
    ("covid1", member_not_active, 2, "HC-1", "not active"),
    ("eggs1", depends_on_key_missing, 2, "HC-2", "depends_on"),
    ("eggs1", exhaustive_key_missing, 2, "HC-2", "exhaustive_by_construction"),
    ("covid1", exclusivity_empty, 2, "HC-1", "exclusivity"),
    ("covid1", independence_missing, 2, "HC-1", "independence"),
    ("eggs1", cluster_outside_its_folder, 2, "HC-3", "hypothesis-clusters"),
    # check 3: exactly one residual, last -- or a justified exhaustive cluster
    ("eggs1", two_residuals, 3, "HC-1", "2 residual"),
    ("eggs1", residual_not_last, 3, "HC-1", "not listed last"),
    ("covid1", no_residual, 3, "HC-1", "0 residual"),
    ("covid1", exhaustive_without_justification, 3, "HC-1", "justification"),
    ("covid1", exhaustive_with_a_residual, 3, "HC-1", "residual"),
    # check 4: every active H in exactly one cluster, backlink matching
    ("eggs1", active_in_no_cluster, 4, "H-9", "no cluster"),
    ("eggs1", wrong_backlink, 4, "H-5", "backlink"),
    ("eggs1", missing_backlink, 4, "H-5", "backlink"),
    ("eggs1", in_two_clusters, 4, "H-5", "2 clusters"),
    # check 5: survivors' bookkeeping
    ("covid1", additional_sources_not_absorbed, 5, "H-1", "additional_sources"),
    ("covid1", additional_sources_missing, 5, "H-1", "additional_sources"),
    ("covid1", additional_sources_repeat_own, 5, "H-1", "own source"),
    ("covid1", locator_entry_missing, 5, "H-1", "locator"),
    ("covid1", locator_still_a_string, 5, "H-1", "locator"),
    ("covid1", survivor_without_merged_from, 5, "H-1", "merged_from"),
    ("covid1", source_rewritten, 5, "H-1", "rewritten"),
    ("covid1", note_without_widening, 5, "H-1", "without a widened statement"),
    ("covid1", widened_without_note, 5, "H-1", "without a generalization_note"),
    ("covid1", sourceless_not_constructed, 5, "H-5", "step-4-constructed"),
    # check 6: no numbers in step-4 fields
    ("covid1", probability_in_exclusivity, 6, "HC-1", "0.35"),
    ("covid1", prior_in_exclusivity, 6, "HC-1", "prior"),
    ("covid1", percentage_in_note, 6, "H-1", "80%"),
    ("covid1", int_field, 6, "HC-1", "relevance = 2"),
    ("covid1", float_field, 6, "HC-1", "independence = 0.9"),
    ("eggs1", weight_in_depends_on, 6, "HC-2", "weight"),
]
CASES += [
    ("covid1", probability_ending_a_sentence, 6, "HC-1", "0.35"),
    ("covid1", exhaustive_naming_no_member, 3, "HC-1", "justification"),
]


def keep_recorded_between_survivor_and_absorbed(v):
    """A person recorded H-1 and H-2 as distinct after the seed pipeline merged H-2 into H-1."""
    (v.root / "proximity").mkdir(exist_ok=True)
    (v.root / "proximity" / "review.json").write_text(
        json.dumps([{"pair": ["H-1", "H-2"], "verdict": "KEEP", "rationale": "Different routes.", "reviewer": "ana"}])
    )


def keep_on_the_ledger_between_survivor_and_absorbed(v):
    """4a's ledger holds a model's KEEP of a pair a survivor holds."""
    from hypograph.structure.dispositions.ledger import Ledger, PairDecision, write_ledger

    write_ledger(
        v.root,
        Ledger(
            pairs={
                "H-1|H-2": PairDecision(
                    pair=("H-1", "H-2"), decision="KEEP", rationale="A model kept them apart.", decided_by="model:m"
                )
            }
        ),
    )


CASES += [
    ("covid1", keep_recorded_between_survivor_and_absorbed, 7, "H-1", "H-1 and H-2 are both under survivor H-1"),
    ("covid1", keep_on_the_ledger_between_survivor_and_absorbed, 7, "H-1", "(decided by model:m)"),
]


def case_param(case, name=None):
    return pytest.param(case, id=name or f"check{case[2]}-{case[1].__name__}")


@pytest.mark.parametrize("case", [case_param(case) for case in CASES])
def test_broken_vault_fails_that_check(tmp_path, capsys, case):
    vault, breaker, check, node, reason = case
    root = real_vault(tmp_path, vault)
    breaker(Editor(root))
    assert cli_main(["check", str(root)]) == 1
    report = check_report(capsys.readouterr().out)
    assert any(line.startswith(f"{node}: ") and reason in line for line in report[check]), report


@pytest.mark.parametrize(
    "case", [case_param(next(c for c in CASES if c[2] == n), name=f"check{n}") for n in range(1, 8)]
)
def test_hypograph_check_cli_exits_1_naming_the_node(tmp_path, case):
    vault, breaker, check, node, _reason = case
    root = real_vault(tmp_path, vault)
    breaker(Editor(root))
    proc = hypograph_check(root)
    assert proc.returncode == 1
    assert f"check {check}: FAIL" in proc.stdout
    assert any(line.startswith(f"{node}: ") for line in check_report(proc.stdout)[check]), proc.stdout


def test_exhaustive_cluster_with_justification_passes_check_3(tmp_path):
    root = real_vault(tmp_path, "covid1")
    v = Editor(root)
    h1, h5 = v.links("H-1", "H-5")
    v.edit(
        "HC-1",
        hypotheses=[h1, h5],
        exhaustive_by_construction=True,
        body=f"\n!{h1}\n\n!{h5}\n\n{EXHAUSTIVENESS.format(member='H-5')}\n",
    )
    assert violations(root)[3] == []


def test_check_6_reads_link_aliases_but_not_linked_titles():
    from hypograph.structure.checks import _numbers

    assert _numbers("[[O-3 - Rainfall fell 35% in a decade]]", "cluster") == []
    assert _numbers("[[O-3 - Rainfall|a 35% chance]]", "cluster")


@pytest.mark.parametrize("layout", ["empty", "parent", "run-dir"])
def test_check_refuses_what_is_not_a_vault(tmp_path, layout):
    """An empty folder, a vault's parent folder or a prox run directory: one line, exit 1, nothing scanned."""
    if layout == "parent":
        copy_tree(EXAMPLE_VAULT, tmp_path / "vault")
    elif layout == "run-dir":
        (tmp_path / "hypotheses").mkdir()
        (tmp_path / "hypotheses" / "H-1.json").write_text('{"id": "H-1", "title": "t"}')
    proc = hypograph_check(tmp_path)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"hypograph check: {tmp_path}: not a vault "
        + ("(hypotheses/ holds a prox run directory's H-*.json)" if layout == "run-dir" else "(no hypotheses/ folder)")
    ]
