"""The blocking checks of a published case batch (``hypograph.case.checks``), rule by rule.

Starts from the example case's published batch (every check passes), breaks one thing and asserts
the whole list of violations the check returns: what is named (a hypothesis id, ``registry`` or an
artifact) and the line a person reads. The pure checks run on the documents in memory; the
``checked_together`` and ``run_checks`` tests read a copy of the example package. No model, no
builder: fast enough for the mutation run.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import REPO

from hypograph.case import CasePackage
from hypograph.case.batch import summary
from hypograph.case.checks import (
    ANY,
    CHECKS,
    SCALAR,
    budget_equal,
    checked_together,
    h1_grounded,
    no_duplicates,
    references_resolve,
    registry_consistent,
    run_checks,
    shape_violations,
)
from hypograph.errors import HypographError

EXAMPLE_CASE = REPO / "examples" / "case"
H = "analysis/hypotheses/0001"
HYP_SHA = hashlib.sha256((EXAMPLE_CASE / H / "hypotheses.json").read_bytes()).hexdigest()
BUDGET = {"initial": 100, "unit": "investigation_units"}


def doc(name: str) -> dict:
    return json.loads((EXAMPLE_CASE / H / name).read_text(encoding="utf-8"))


@pytest.fixture
def batch():
    """(hypotheses.json, registry.json, policy.json, context.json) of the example, fresh per test."""
    return doc("hypotheses.json"), doc("registry.json"), doc("policy.json"), doc("context.json")


@pytest.fixture
def case(tmp_path) -> Path:
    return Path(shutil.copytree(EXAMPLE_CASE, tmp_path / "case"))


def test_the_example_batch_passes_every_check(batch, case):
    hyp_doc, registry, policy, context = batch
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == []
    assert budget_equal(hyp_doc, registry, policy) == []
    assert references_resolve(hyp_doc, context) == []
    assert h1_grounded(hyp_doc, context) == []
    assert no_duplicates(hyp_doc) == []
    assert run_checks(CasePackage(case)) == {name: [] for name in CHECKS}
    assert list(run_checks(CasePackage(case), 1)) == list(CHECKS)


# -- registry_consistent: counts ------------------------------------------------------------------


def test_created_count_follows_the_creations(batch):
    hyp_doc, registry, _, _ = batch
    registry["created_count"] = 2
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [("registry", "created_count 2 != 3 creations")]
    del registry["created_count"]
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [("registry", "created_count None != 3 creations")]


@pytest.mark.parametrize("next_id", ["H3", "H5", "4", None])
def test_next_id_follows_the_creations(batch, next_id):
    hyp_doc, registry, _, _ = batch
    registry["next_id"] = next_id
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [("registry", f"next_id {next_id} != H4")]


@pytest.mark.parametrize("remaining", [1, 3, 5, None, "2"])
def test_remaining_slots_follow_the_creations(batch, remaining):
    hyp_doc, registry, _, _ = batch
    registry["remaining_slots"] = remaining
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [
        ("registry", f"remaining_slots {remaining} != max_hypotheses 5 - 3")
    ]


def test_remaining_slots_are_never_negative_nor_missing(batch):
    hyp_doc, registry, _, _ = batch
    registry.update(max_hypotheses=2, remaining_slots=-1)  # arithmetic right, yet over the cap
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [
        ("registry", "remaining_slots -1 != max_hypotheses 2 - 3")
    ]
    del registry["remaining_slots"]
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [
        ("registry", "remaining_slots None != max_hypotheses 2 - 3")
    ]
    registry.update(max_hypotheses=3, remaining_slots=0)  # a full batch is fine
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == []


def test_a_registry_without_max_hypotheses_is_inconsistent(batch):
    hyp_doc, registry, _, _ = batch
    del registry["max_hypotheses"]
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [
        ("registry", "remaining_slots 2 != max_hypotheses None - 3")
    ]
    registry["remaining_slots"] = -3
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [
        ("registry", "remaining_slots -3 != max_hypotheses None - 3")
    ]


@pytest.mark.parametrize("cap", [None, "5", 5.0, True])
def test_a_cap_that_is_no_whole_number_is_reported_not_a_crash(batch, cap):
    """``max_hypotheses: null`` was a TypeError that stopped every check of the batch."""
    hyp_doc, registry, _, _ = batch
    registry.update(max_hypotheses=cap, remaining_slots=int(cap) - 3 if isinstance(cap, (bool, float)) else 2)
    remaining = registry["remaining_slots"]
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [
        ("registry", f"remaining_slots {remaining} != max_hypotheses {cap} - 3")
    ]


def test_a_registry_without_creations_says_so(batch):
    hyp_doc, registry, _, _ = batch
    registry.update(creations=[], created_count=0, next_id="H1", remaining_slots=5)
    assert registry_consistent({"hypotheses": []}, registry, HYP_SHA) == [("registry", "no creation history")]
    del registry["creations"]
    assert registry_consistent({}, registry, HYP_SHA) == [("registry", "no creation history")]
    del registry["max_hypotheses"]
    assert registry_consistent({}, registry, HYP_SHA) == [
        ("registry", "no creation history"),
        ("registry", "remaining_slots 5 != max_hypotheses None - 0"),
    ]


# -- registry_consistent: one creation per hypothesis, pointing at it --------------------------------


def test_a_hypothesis_created_twice(batch):
    hyp_doc, registry, _, _ = batch
    registry["creations"][2] = copy.deepcopy(registry["creations"][1])
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [
        ("H2", "more than one creation"),
        ("registry", "creations ['H1', 'H2', 'H2'] do not match the hypotheses ['H1', 'H2', 'H3']"),
        ("H2", "origin pointer '/hypotheses/1' does not resolve to H2"),
    ]


def test_creations_without_ids_are_reported_with_the_duplicates_not_a_crash(batch):
    hyp_doc, registry, _, _ = batch
    for c in registry["creations"][1:]:
        del c["id"]
    registry["creations"].append(copy.deepcopy(registry["creations"][0]))
    registry.update(created_count=4, next_id="H5", remaining_slots=1)
    found = registry_consistent(hyp_doc, registry, HYP_SHA)
    assert found[:3] == [
        ("H1", "more than one creation"),
        ("None", "more than one creation"),
        ("registry", "creations ['H1', None, None, 'H1'] do not match the hypotheses ['H1', 'H2', 'H3']"),
    ]


def test_creations_in_another_order_than_the_hypotheses(batch):
    hyp_doc, registry, _, _ = batch
    c = registry["creations"]
    c[1], c[2] = c[2], c[1]
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [
        ("registry", "creations ['H1', 'H3', 'H2'] do not match the hypotheses ['H1', 'H2', 'H3']"),
        ("H3", "origin pointer '/hypotheses/2' does not resolve to H3"),
        ("H2", "origin pointer '/hypotheses/1' does not resolve to H2"),
    ]


def test_a_creation_without_a_hypothesis(batch):
    hyp_doc, registry, _, _ = batch
    extra = copy.deepcopy(registry["creations"][2])
    extra["id"], extra["origin"]["pointer"] = "H4", "/hypotheses/3"
    registry["creations"].append(extra)
    registry.update(created_count=4, next_id="H5", remaining_slots=1)
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [
        ("registry", "creations ['H1', 'H2', 'H3', 'H4'] do not match the hypotheses ['H1', 'H2', 'H3']"),
        ("H4", "origin pointer '/hypotheses/3' does not resolve to H4"),
    ]


def test_each_creation_names_the_hash_of_hypotheses_json(batch):
    hyp_doc, registry, _, _ = batch
    registry["creations"][1]["origin"]["sha256"] = "0" * 64
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [("H2", "origin hash is not that of hypotheses.json")]
    assert registry_consistent(hyp_doc, doc("registry.json"), "0" * 64) == [
        (f"H{n}", "origin hash is not that of hypotheses.json") for n in (1, 2, 3)
    ]


@pytest.mark.parametrize("pointer", ["/hypotheses/2", "/hypotheses/01", "hypotheses/1", None])
def test_each_creation_points_at_its_own_record(batch, pointer):
    hyp_doc, registry, _, _ = batch
    registry["creations"][1]["origin"]["pointer"] = pointer
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [
        ("H2", f"origin pointer {pointer!r} does not resolve to H2")
    ]


def test_a_creation_without_an_origin(batch):
    hyp_doc, registry, _, _ = batch
    del registry["creations"][0]["origin"]
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [
        ("H1", "origin hash is not that of hypotheses.json"),
        ("H1", "origin pointer None does not resolve to H1"),
    ]


# -- registry_consistent: the controller's labels -----------------------------------------------------


@pytest.mark.parametrize("field, value", [("id", "H7"), ("position", 3), ("position", "2"), ("id", None)])
def test_ids_and_positions_are_the_controller_s(batch, field, value):
    hyp_doc, registry, _, _ = batch
    hyp_doc["hypotheses"][1][field] = value
    registry["creations"][1]["id"] = hyp_doc["hypotheses"][1]["id"]
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [
        (str(hyp_doc["hypotheses"][1]["id"]), "id/position not controller-labelled H2")
    ]


@pytest.mark.parametrize(
    "k, field, value",
    [
        (1, "status", "tested"),
        (1, "confidence", "high"),
        (1, "role", "tester_primary"),
        (0, "role", "alternative"),
        (2, "status", None),
    ],
)
def test_status_confidence_and_role_are_the_controller_s(batch, k, field, value):
    hyp_doc, registry, _, _ = batch
    hyp_doc["hypotheses"][k][field] = value
    assert registry_consistent(hyp_doc, registry, HYP_SHA) == [
        (f"H{k + 1}", "status/confidence/role not as the controller sets them")
    ]


# -- budget_equal ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "allocation",
    [{"initial": 150, "unit": "investigation_units"}, {"initial": 100, "unit": "h"}, {"initial": 100}, None],
)
def test_every_hypothesis_holds_the_initial_budget(batch, allocation):
    hyp_doc, registry, policy, _ = batch
    hyp_doc["hypotheses"][2]["budget_allocation"] = allocation
    assert budget_equal(hyp_doc, registry, policy) == [("H3", f"budget_allocation {allocation} != {BUDGET}")]


def test_the_budget_is_the_policy_s(batch):
    hyp_doc, registry, policy, _ = batch
    policy["initial_budget"] = 80
    want = {"initial": 80, "unit": "investigation_units"}
    assert budget_equal(hyp_doc, registry, policy) == (
        [(f"H{n}", f"budget_allocation {BUDGET} != {want}") for n in (1, 2, 3)]
        + [(f"H{n}", f"registry allocation {BUDGET} != {want}") for n in (1, 2, 3)]
    )


@pytest.mark.parametrize("accounting", ["started", None])
def test_no_budget_is_spent_yet(batch, accounting):
    hyp_doc, registry, policy, _ = batch
    hyp_doc["hypotheses"][1]["budget_accounting"] = accounting
    assert budget_equal(hyp_doc, registry, policy) == [("H2", "budget_accounting is not 'not_started'")]


def test_every_creation_holds_the_initial_budget(batch):
    hyp_doc, registry, policy, _ = batch
    registry["creations"][0]["budget_allocation"]["initial"] = 99
    assert budget_equal(hyp_doc, registry, policy) == [
        ("H1", f"registry allocation {{'initial': 99, 'unit': 'investigation_units'}} != {BUDGET}")
    ]


def test_an_empty_batch_has_no_budget_to_check(batch):
    _, _, policy, _ = batch
    assert budget_equal({}, {}, policy) == []


# -- references, grounding, duplicates: the candidate fields of the accepted records ------------------


def test_references_resolve_in_the_saved_context(batch):
    hyp_doc, _, _, context = batch
    hyp_doc["hypotheses"][1]["source_ids"] = ["LOG", "GONE"]
    hyp_doc["hypotheses"][2]["interpretation_ids"] = ["I9"]
    assert references_resolve(hyp_doc, context) == [
        ("H2", "source_ids: 'GONE' is not a source of this case's catalogue"),
        ("H3", "interpretation_ids: 'I9' is not an accepted statement (I1…I5)"),
    ]


def test_a_violation_names_the_hypothesis_by_its_id_not_its_place(batch):
    hyp_doc, _, _, context = batch
    hyp_doc["hypotheses"][2].update(id="H7", source_ids=["GONE"], title=hyp_doc["hypotheses"][0]["title"])
    assert references_resolve(hyp_doc, context) == [
        ("H7", "source_ids: 'GONE' is not a source of this case's catalogue")
    ]
    assert no_duplicates(hyp_doc) == [("H7", "title: duplicates the title of H1 (after normalisation)")]


def test_h1_is_grounded_in_observations_and_the_anchor(batch):
    hyp_doc, _, _, context = batch
    hyp_doc["hypotheses"][0].update(source_ids=["AGE", "MILL"], interpretation_ids=["I1"])
    assert h1_grounded(hyp_doc, context) == [
        ("H1", "source_ids: the first hypothesis must cite a human observation, report or comment"),
        ("H1", "interpretation_ids: the first hypothesis must cite I4 (first known divergence)"),
        ("H1", "source_ids: grounded only in assumptions, external expectations or unread implementation references"),
    ]


def test_no_two_titles_or_mechanisms_alike(batch):
    hyp_doc, _, _, _ = batch
    h = hyp_doc["hypotheses"]
    h[2].update(title=f"  {h[0]['title'].upper()} ", mechanism=h[1]["mechanism"])
    assert no_duplicates(hyp_doc) == [
        ("H3", "title: duplicates the title of H1 (after normalisation)"),
        ("H3", "mechanism: duplicates the mechanism of H2 (after normalisation)"),
    ]


def test_a_document_without_hypotheses_has_nothing_to_resolve_or_compare(batch):
    _, _, _, context = batch
    assert references_resolve({}, context) == [] and h1_grounded({}, context) == [] and no_duplicates({}) == []


def test_fields_outside_the_candidate_are_not_compared(batch):
    hyp_doc, _, _, _ = batch
    for h in hyp_doc["hypotheses"]:
        h.update(status="new", budget_accounting="x")
    assert no_duplicates(hyp_doc) == []


# -- checked_together: the manifest, the rendering, the bindings ----------------------------------------


def parts(case: Path, revision: int = 1):
    pkg = CasePackage(case)
    return pkg, pkg.manifest(), revision, pkg.read_json(f"{H}/hypotheses.json"), pkg.read_json(f"{H}/context.json")


NAMES = ["hypotheses", "hypothesis_registry", "hypotheses_summary", "hypothesis_policy", "hypothesis_context"]
FILES = {
    "hypotheses": "hypotheses.json",
    "hypothesis_registry": "registry.json",
    "hypotheses_summary": "hypotheses.md",
    "hypothesis_policy": "policy.json",
    "hypothesis_context": "context.json",
}


def test_the_example_is_checked_together(case):
    assert checked_together(*parts(case)) == []


@pytest.mark.parametrize("name", NAMES)
def test_the_manifest_points_at_each_file_of_the_batch(case, name):
    pkg, manifest, revision, hyp_doc, context = parts(case)
    del manifest["artifacts"][name]
    assert checked_together(pkg, manifest, revision, hyp_doc, context) == [
        (name, f"manifest pointer is None, not {H}/{FILES[name]}")
    ]
    manifest = pkg.manifest()
    manifest["artifacts"][name]["path"] = "analysis/hypotheses/0002/x.json"
    ptr = manifest["artifacts"][name]
    assert checked_together(pkg, manifest, revision, hyp_doc, context) == [
        (name, f"manifest pointer is {ptr!r}, not {H}/{FILES[name]}")
    ]
    manifest = pkg.manifest()
    manifest["artifacts"][name]["sha256"] = "0" * 64
    assert checked_together(pkg, manifest, revision, hyp_doc, context) == [
        (name, f"{H}/{FILES[name]} does not match the manifest's sha256")
    ]


def test_an_earlier_revision_is_not_held_to_the_current_pointers(case):
    pkg, manifest, revision, hyp_doc, context = parts(case)
    manifest["analysis_revision"] = 2
    manifest["artifacts"] = {}
    assert checked_together(pkg, manifest, revision, hyp_doc, context) == []


def test_the_summary_is_the_rendering_of_the_hypotheses(case):
    pkg, manifest, revision, hyp_doc, context = parts(case)
    md = case / H / "hypotheses.md"
    assert md.read_text(encoding="utf-8") == summary(hyp_doc, context)
    hyp_doc["hypotheses"][0]["title"] = "Retitled"
    assert checked_together(pkg, manifest, revision, hyp_doc, context) == [
        ("hypotheses_summary", "hypotheses.md is not the rendering of hypotheses.json")
    ]
    md.unlink()
    manifest["artifacts"].pop("hypotheses_summary")
    assert checked_together(*parts(case))[-1:] == [
        ("hypotheses_summary", "hypotheses.md is not the rendering of hypotheses.json")
    ]


def test_a_summary_that_is_no_utf8_text_is_reported_not_a_crash(case):
    """Was a UnicodeDecodeError that stopped the checks."""
    pkg, manifest, revision, hyp_doc, context = parts(case)
    md = case / H / "hypotheses.md"
    md.write_bytes(md.read_bytes() + b"\xff\xfe not UTF-8\n")
    assert checked_together(pkg, manifest, revision, hyp_doc, context)[-1] == (
        "hypotheses_summary",
        "hypotheses.md is not the rendering of hypotheses.json",
    )


@pytest.mark.parametrize("key", ["policy", "context", "round"])
def test_the_hypotheses_are_bound_to_their_policy_context_and_round(case, key):
    pkg, manifest, revision, hyp_doc, context = parts(case)
    path = hyp_doc["bindings"][key]["path"]
    hyp_doc["bindings"][key]["sha256"] = "0" * 64
    assert checked_together(pkg, manifest, revision, hyp_doc, context)[-1] == (
        "hypotheses",
        f"bindings.{key}: {path} missing or changed",
    )
    del hyp_doc["bindings"][key]
    assert checked_together(pkg, manifest, revision, hyp_doc, context)[-1] == (
        "hypotheses",
        f"bindings.{key}: None missing or changed",
    )
    hyp_doc["bindings"][key] = {"path": path, "sha256": None}  # no hash recorded: not bound
    assert checked_together(pkg, manifest, revision, hyp_doc, context)[-1] == (
        "hypotheses",
        f"bindings.{key}: {path} missing or changed",
    )


@pytest.mark.parametrize(
    "binding",
    [
        {"sha256": "0" * 64},
        {"path": H, "sha256": "0" * 64},
        {"path": ["x"], "sha256": "0" * 64},
        {"path": f"{H}/nowhere.json"},
    ],
)
def test_a_binding_that_names_no_file_is_reported_not_a_crash(case, binding):
    """A binding without a path read the package folder itself (IsADirectoryError) and stopped the checks."""
    pkg, manifest, revision, hyp_doc, context = parts(case)
    hyp_doc["bindings"]["round"] = binding
    assert checked_together(pkg, manifest, revision, hyp_doc, context) == [
        ("hypotheses", f"bindings.round: {binding.get('path')} missing or changed")
    ]


def test_a_bound_file_changed_on_disk(case):
    pkg, manifest, revision, hyp_doc, context = parts(case)
    round_file = case / hyp_doc["bindings"]["round"]["path"]
    round_file.write_text(round_file.read_text(encoding="utf-8") + " ", encoding="utf-8")
    assert checked_together(pkg, manifest, revision, hyp_doc, context) == [
        ("hypotheses", f"bindings.round: {H}/rounds/1.json missing or changed")
    ]
    round_file.unlink()
    assert checked_together(pkg, manifest, revision, hyp_doc, context) == [
        ("hypotheses", f"bindings.round: {H}/rounds/1.json missing or changed")
    ]
    del hyp_doc["bindings"]
    assert checked_together(pkg, manifest, revision, hyp_doc, context) == [
        ("hypotheses", f"bindings.{key}: None missing or changed") for key in ("policy", "context", "round")
    ]


# -- run_checks: every check on the files of one revision ------------------------------------------------


def test_run_checks_reads_the_batch_of_the_current_revision(case):
    (case / H / "registry.json").write_text(
        (case / H / "registry.json").read_text(encoding="utf-8").replace('"next_id": "H4"', '"next_id": "H9"'),
        encoding="utf-8",
    )
    found = run_checks(CasePackage(case))
    assert found["registry_consistent"] == [("registry", "next_id H9 != H4")]
    assert found["checked_together"] == [
        ("hypothesis_registry", f"{H}/registry.json does not match the manifest's sha256")
    ]
    assert [k for k, v in found.items() if v] == ["registry_consistent", "checked_together"]


def test_run_checks_uses_the_saved_policy_context_and_hash(case):
    for name, change in [
        ("policy.json", ('"initial_budget": 100', '"initial_budget": 90')),
        ("context.json", ('"id": "NEIGHBOUR"', '"id": "NEIGHBOUR2"')),
    ]:
        (case / H / name).write_text((case / H / name).read_text(encoding="utf-8").replace(*change), encoding="utf-8")
    hyp = case / H / "hypotheses.json"
    hyp.write_text(hyp.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    found = run_checks(CasePackage(case), 1)
    assert found["budget_equal"][0] == (
        "H1",
        f"budget_allocation {BUDGET} != {{'initial': 90, 'unit': 'investigation_units'}}",
    )
    assert found["references_resolve"] == [("H2", "source_ids: 'NEIGHBOUR' is not a source of this case's catalogue")]
    assert found["registry_consistent"] == [(f"H{n}", "origin hash is not that of hypotheses.json") for n in (1, 2, 3)]
    assert found["h1_grounded"] == [] and found["no_duplicates"] == []


def test_run_checks_of_an_earlier_revision_reads_that_revision(case):
    """The manifest moved on to revision 2; checking revision 1 reads revision 1's files."""
    manifest = json.loads((case / "manifest.json").read_text(encoding="utf-8"))
    manifest["analysis_revision"] = 2
    (case / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert run_checks(CasePackage(case), 1) == {name: [] for name in CHECKS}
    with pytest.raises(HypographError, match="0002/hypotheses.json: missing"):
        run_checks(CasePackage(case))


# -- shapes: a file of another shape is a violation naming the file and the JSON pointer ------------------

SHAPE = {"id": SCALAR, "n": int, "on": bool, "tags": [str], "inner": {"x": bool, "y?": float}, "any": ANY, "opt?": str}


def test_a_document_of_the_shape_has_no_shape_violation():
    good = {"id": "H1", "n": 3, "on": True, "tags": ["a", "b"], "inner": {"x": False}, "any": {"free": [1]}}
    assert shape_violations(good, SHAPE, "f.json") == []  # optional keys may be absent, ANY takes anything
    assert shape_violations({**good, "id": None, "opt": "o", "inner": {"x": True, "y": 0.5}}, SHAPE, "f.json") == []


def test_each_difference_from_the_shape_is_one_line_naming_its_pointer_in_order():
    bad = {"id": True, "n": False, "on": 1, "tags": ["a", 7], "inner": {"y": "no"}, "opt": None}
    assert shape_violations(bad, SHAPE, "f.json") == [
        ("f.json", "/any: missing"),
        ("f.json", "/id: expected a string, number or null, got a boolean"),  # a boolean is no id
        ("f.json", "/inner/x: missing"),
        ("f.json", "/inner/y: expected a number, got a string"),
        ("f.json", "/n: expected an integer, got a boolean"),
        ("f.json", "/on: expected a boolean, got an integer"),
        ("f.json", "/opt: expected a string, got null"),
        ("f.json", "/tags/1: expected a string, got an integer"),
    ]


def test_a_document_of_another_type_is_one_violation_at_its_root():
    assert shape_violations([], SHAPE, "f.json") == [("f.json", "/: expected an object, got an array")]
    assert shape_violations({"a": {}}, {"a": [int]}, "g.json") == [("g.json", "/a: expected an array, got an object")]
    assert shape_violations([["x"]], [SCALAR], "h.json") == [
        ("h.json", "/0: expected a string, number or null, got an array")
    ]
    assert shape_violations(("t",), str, "i.json") == [("i.json", "/: expected a string, got a value")]  # not JSON


def test_a_free_value_stops_nothing_after_it():
    """A value the shape leaves free (ANY) is skipped, and the keys after it are still checked."""
    doc = {"id": "H1", "n": "3", "on": True, "tags": [], "inner": {"x": True}, "any": 1}
    assert shape_violations(doc, SHAPE, "f.json") == [("f.json", "/n: expected an integer, got a string")]


def test_a_binding_path_that_is_no_string_is_a_broken_binding(case):
    pkg, manifest, revision, hyp_doc, context = parts(case)
    hyp_doc["bindings"]["policy"] = {"path": 7, "sha256": "0" * 64}
    assert ("hypotheses", "bindings.policy: 7 missing or changed") in checked_together(
        pkg, manifest, revision, hyp_doc, context
    )


def test_a_published_file_of_another_shape_fails_every_check_naming_file_and_pointer(case):
    hyp_doc = doc("hypotheses.json")
    hyp_doc["hypotheses"] = 7
    (case / H / "hypotheses.json").write_text(json.dumps(hyp_doc), encoding="utf-8")
    found = run_checks(CasePackage(case))
    assert found == {
        name: [(f"{H}/hypotheses.json", "/hypotheses: expected an array, got an integer")] for name in CHECKS
    }


def test_a_missing_published_file_is_one_error_naming_it(case):
    (case / H / "registry.json").unlink()
    with pytest.raises(HypographError, match=r"registry\.json: missing \(hypothesis_registry\)"):
        run_checks(CasePackage(case))
