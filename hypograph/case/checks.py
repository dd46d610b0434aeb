"""Blocking checks of a published batch: pure functions returning ``(id, reason)`` violations.

``run_checks(pkg, revision)`` loads the accepted files once and runs every check on them; the
Dagster layer turns each list into a blocking asset check (empty list: passed).
"""

from __future__ import annotations

from hypograph.case import rules
from hypograph.case.batch import CANDIDATE_FIELDS, paths, summary
from hypograph.case.config import UNIT
from hypograph.case.package import CasePackage
from hypograph.errors import HypographError

Violation = rules.Violation


def registry_consistent(hyp_doc: dict, registry: dict, hyp_sha: str) -> list[Violation]:
    """Counts, next id and remaining slots follow from the creations; one creation per id; each
    creation points at its record in hypotheses.json by hash and JSON pointer."""
    hyps = hyp_doc.get("hypotheses", [])
    creations = registry.get("creations", [])
    return _registry_counts(registry, len(creations)) + _creations(creations, hyps, hyp_sha) + _labels(hyps)


def _registry_counts(registry: dict, n: int) -> list[Violation]:
    """The registry's counters against its ``n`` creations."""
    out: list[Violation] = []
    if not n:
        out.append(("registry", "no creation history"))
    if registry.get("created_count") != n:
        out.append(("registry", f"created_count {registry.get('created_count')} != {n} creations"))
    if registry.get("next_id") != f"H{n + 1}":
        out.append(("registry", f"next_id {registry.get('next_id')} != H{n + 1}"))
    cap, remaining = registry.get("max_hypotheses"), registry.get("remaining_slots")
    # a cap that is no whole number (missing, null, "5") is reported, not subtracted from
    if not isinstance(cap, int) or remaining != cap - n or remaining < 0:
        out.append(("registry", f"remaining_slots {remaining} != max_hypotheses {cap} - {n}"))
    return out


def _creations(creations: list[dict], hyps: list[dict], hyp_sha: str) -> list[Violation]:
    """One creation per hypothesis, in order, each pointing at its record by hash and JSON pointer."""
    out: list[Violation] = []
    ids = [c.get("id") for c in creations]
    for i in sorted({x for x in ids if ids.count(x) > 1}, key=str):
        out.append((str(i), "more than one creation"))
    if ids != [h.get("id") for h in hyps]:
        out.append(("registry", f"creations {ids} do not match the hypotheses {[h.get('id') for h in hyps]}"))
    for k, c in enumerate(creations):
        origin, cid = c.get("origin", {}), c.get("id")
        if origin.get("sha256") != hyp_sha:
            out.append((str(cid), "origin hash is not that of hypotheses.json"))
        if origin.get("pointer") != f"/hypotheses/{k}" or k >= len(hyps) or hyps[k].get("id") != cid:
            out.append((str(cid), f"origin pointer {origin.get('pointer')!r} does not resolve to {cid}"))
    return out


def _labels(hyps: list[dict]) -> list[Violation]:
    """Ids, positions, status, confidence and role are the controller's, not the model's."""
    out: list[Violation] = []
    for k, h in enumerate(hyps):
        if h.get("id") != f"H{k + 1}" or h.get("position") != k + 1:
            out.append((str(h.get("id")), f"id/position not controller-labelled H{k + 1}"))
        if (
            h.get("status") != "new"
            or h.get("confidence") != "unassessed"
            or h.get("role") != ("tester_primary" if k == 0 else "alternative")
        ):
            out.append((str(h.get("id")), "status/confidence/role not as the controller sets them"))
    return out


def budget_equal(hyp_doc: dict, registry: dict, policy: dict) -> list[Violation]:
    """Every hypothesis and every creation holds exactly the policy's initial budget, unspent."""
    want = {"initial": policy["initial_budget"], "unit": UNIT}
    out = [
        (str(h.get("id")), f"budget_allocation {h.get('budget_allocation')} != {want}")
        for h in hyp_doc.get("hypotheses", [])
        if h.get("budget_allocation") != want
    ]
    out += [
        (str(h.get("id")), "budget_accounting is not 'not_started'")
        for h in hyp_doc.get("hypotheses", [])
        if h.get("budget_accounting") != "not_started"
    ]
    out += [
        (str(c.get("id")), f"registry allocation {c.get('budget_allocation')} != {want}")
        for c in registry.get("creations", [])
        if c.get("budget_allocation") != want
    ]
    return out


def _candidates(hyp_doc: dict) -> list[dict]:
    return [{k: h.get(k) for k in ("id", *CANDIDATE_FIELDS)} for h in hyp_doc.get("hypotheses", [])]


def references_resolve(hyp_doc: dict, context: dict) -> list[Violation]:
    return rules.references(_candidates(hyp_doc), context)


def h1_grounded(hyp_doc: dict, context: dict) -> list[Violation]:
    return rules.grounding(_candidates(hyp_doc), context)


def no_duplicates(hyp_doc: dict) -> list[Violation]:
    return rules.duplicates(_candidates(hyp_doc))


def checked_together(pkg: CasePackage, manifest: dict, revision: int, hyp_doc: dict, context: dict) -> list[Violation]:
    """The manifest points at exactly these files (by hash), the summary is the rendering of the
    hypotheses, and the hypotheses are bound to the saved policy and context."""
    out: list[Violation] = []
    p = paths(revision)
    if manifest["analysis_revision"] == revision:
        for name in (
            "hypotheses",
            "hypothesis_registry",
            "hypotheses_summary",
            "hypothesis_policy",
            "hypothesis_context",
        ):
            ptr = manifest["artifacts"].get(name)
            if ptr is None or ptr.get("path") != p[name]:
                out.append((name, f"manifest pointer is {ptr!r}, not {p[name]}"))
            elif pkg.sha(p[name]) != ptr["sha256"]:
                out.append((name, f"{p[name]} does not match the manifest's sha256"))
    # compared as bytes: a file that is not UTF-8 is simply not the rendering (not a decode error)
    md = _bytes(pkg, p["hypotheses_summary"])
    if md is None or md != summary(hyp_doc, context).encode("utf-8"):
        out.append(("hypotheses_summary", "hypotheses.md is not the rendering of hypotheses.json"))
    for key in ("policy", "context", "round"):
        ref = hyp_doc.get("bindings", {}).get(key, {})
        path = ref.get("path")
        # a path that is no file (missing, a folder, outside the package, not a string) is a broken
        # binding, not a crash
        actual = _sha(pkg, path)
        if actual is None or actual != ref.get("sha256"):
            out.append(("hypotheses", f"bindings.{key}: {path} missing or changed"))
    return out


def _bytes(pkg: CasePackage, rel: str) -> bytes | None:
    """The confined file's bytes, or None when it is missing or may not be read."""
    try:
        return pkg.read_bytes(rel)
    except HypographError:
        return None


def _sha(pkg: CasePackage, rel) -> str | None:
    """sha256 of the confined file ``rel``, or None when it is missing or no file the package may read."""
    try:
        return pkg.sha(rel)
    except HypographError:  # outside the package, a FIFO, a folder, not a path: not the bound file
        return None


# -- shapes ----------------------------------------------------------------------------------------
# What the checks and the summary index into, so a published file of another shape (an entry
# that is 7, a document that is []) is a violation naming the file and the JSON pointer instead
# of a crash. Values: ANY, a type, a {key: shape} object ("key?" optional), or [shape] a list.
ANY = object()
SCALAR = (str, int, float, type(None))  # what is compared or hashed as an id (a list would not hash)
_CANDIDATE = {
    "id": SCALAR,
    "role": ANY,
    "status": ANY,
    "confidence": ANY,
    "title": ANY,
    "mechanism": ANY,
    "rationale": ANY,
    "distinction": ANY,
    "source_ids": [str],
    "interpretation_ids": [str],
    "expected_evidence": list,
    "falsifying_evidence": list,
    "open_questions": list,
    "budget_allocation": {"initial": ANY, "unit": ANY},
    "budget_accounting": ANY,
}
SHAPES: dict[str, object] = {
    "hypotheses": {
        "package_id": ANY,
        "analysis_revision": ANY,
        "attempt_id": ANY,
        "prompt_version": ANY,
        "bindings?": {"policy?": dict, "context?": dict, "round?": dict},
        "hypotheses": [_CANDIDATE],
    },
    "hypothesis_registry": {"creations?": [{"id?": SCALAR, "origin?": dict}]},
    "hypothesis_policy": {"initial_budget": ANY},
    "hypothesis_context": {
        "question": ANY,
        "catalogue": [{"id": SCALAR, "kind": SCALAR}],
        "statements": [{"alias": SCALAR, "text": ANY}],
        "anchor": {"alias": ANY, "name": str},
    },
}
_NAMES = {
    list: "an array",
    dict: "an object",
    str: "a string",
    int: "an integer",
    bool: "a boolean",
    float: "a number",
    type(None): "null",
}


def shape_violations(doc, shape, file: str) -> list[Violation]:
    """``(file, "pointer: expected …")`` for every place ``doc`` differs from ``shape``."""
    out: list[Violation] = []
    stack = [(doc, shape, "")]
    while stack:
        value, want, ptr = stack.pop()
        if want is ANY:
            continue
        wrong = _wrong_type(value, want)
        if wrong:
            out.append((file, f"{ptr or '/'}: {wrong}"))
        elif isinstance(want, dict):
            for key, sub in want.items():
                name = key.removesuffix("?")
                if name in value:
                    stack.append((value[name], sub, f"{ptr}/{name}"))
                elif not key.endswith("?"):
                    out.append((file, f"{ptr}/{name}: missing"))
        elif isinstance(want, list):
            stack.extend((item, want[0], f"{ptr}/{i}") for i, item in reversed(list(enumerate(value))))
    return sorted(out)  # one file: by pointer


def _wrong_type(value, want) -> str | None:
    """``expected <type>, got <type>`` when ``value`` is not of the type ``want`` describes (an
    object, an array, a type, or a tuple of scalar types; a boolean is only a boolean, never a
    number), else None."""
    kind = dict if isinstance(want, dict) else list if isinstance(want, list) else want
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return None
    want_name = "a string, number or null" if isinstance(kind, tuple) else _NAMES[kind]
    return f"expected {want_name}, got {_NAMES.get(type(value), 'a value')}"


def run_checks(pkg: CasePackage, revision: int | None = None) -> dict[str, list[Violation]]:
    """Every blocking check of ``revision``'s batch (default: the current revision)."""
    manifest = pkg.manifest()
    revision = revision or manifest["analysis_revision"]
    p = paths(revision)
    docs = {name: pkg.read_json(p[name], what=name) for name in SHAPES}
    wrong = [v for name, shape in SHAPES.items() for v in shape_violations(docs[name], shape, p[name])]
    if wrong:  # no check can run on a file of another shape; each reports why, naming file and pointer
        return {name: list(wrong) for name in CHECKS}
    hyp_doc, registry = docs["hypotheses"], docs["hypothesis_registry"]
    policy, context = docs["hypothesis_policy"], docs["hypothesis_context"]
    return {
        "registry_consistent": registry_consistent(hyp_doc, registry, pkg.sha(p["hypotheses"])),
        "budget_equal": budget_equal(hyp_doc, registry, policy),
        "references_resolve": references_resolve(hyp_doc, context),
        "h1_grounded": h1_grounded(hyp_doc, context),
        "no_duplicates": no_duplicates(hyp_doc),
        "checked_together": checked_together(pkg, manifest, revision, hyp_doc, context),
    }


# check name -> what it asserts (the blocking asset checks' descriptions).
CHECKS: dict[str, str] = {
    "registry_consistent": "Registry consistent with the batch: counts, next id, remaining slots, one creation per id.",
    "budget_equal": "Every accepted hypothesis holds exactly the pinned initial budget.",
    "references_resolve": "Every source and interpretation reference resolves in this exact context.",
    "h1_grounded": "H1 cites human observation/report/comment data and the first known divergence (or fallback).",
    "no_duplicates": "No two titles or mechanisms equal after normalisation.",
    "checked_together": "hypotheses.json, registry.json and hypotheses.md published together, as the manifest says.",
}
