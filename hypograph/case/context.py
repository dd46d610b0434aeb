"""From a confirmed interpretation to the frozen context of one batch (context.json).

``verified_interpretation`` refuses to go on unless the current revision's interpretation is
confirmed and still matches, by sha256, the catalogue and every input it was made from; it
never runs an earlier phase itself. ``build_context`` gathers what the prompt may see: the
catalogue without raw payloads, the accepted statements as I-aliases with JSON pointers, the
policy, and earlier revisions' batches labelled as untested initial proposals.
"""

from __future__ import annotations

from hypograph.case.checks import SHAPES, shape_violations
from hypograph.case.config import HypothesisLimits, HypothesisPolicy
from hypograph.case.ingest import archive_members
from hypograph.case.interpret import adopt_draft, draft_path, suggested_question
from hypograph.case.models import ANCHORS, OBSERVATION_KINDS, Catalogue, Interpretation
from hypograph.case.package import CasePackage, json_text, rev_dir, sha_text
from hypograph.errors import HypographError, NotDone

PROMPT_VERSION = "hypotheses_v1"


class NotConfirmed(NotDone):
    """The current revision waits for a person's confirmation (exit 2: not done yet, nothing wrong)."""


PRIOR_LABEL = "untested initial proposals (not investigated; not evidence)"


def verified_interpretation(pkg: CasePackage, manifest: dict) -> tuple[Interpretation, Catalogue]:
    """The current revision's confirmed interpretation and its catalogue, verified against the
    files they were made from. Raises HypographError naming the file otherwise."""
    interp = pkg.interpretation(manifest)
    where = pkg.root / manifest["artifacts"]["interpretation"]["path"]
    rev = manifest["analysis_revision"]
    if interp.analysis_revision != rev:
        raise HypographError(
            f"{where}: field 'analysis_revision': {interp.analysis_revision}, but the manifest's "
            f"current revision is {rev}"
        )
    if not interp.confirmed:
        raise NotConfirmed(
            f"{where}: revision {rev} is not confirmed; a person confirms it with "
            f"`hypograph case confirm {pkg.root}` (the builder never interprets a case itself)"
        )
    refuse_a_later_edit(pkg, manifest, interp)
    cat_ptr = interp.bindings.catalogue
    if manifest["artifacts"].get("catalogue", {}).get("path") != cat_ptr.get("path"):
        raise HypographError(f"{where}: field 'bindings.catalogue': not the manifest's catalogue")
    bound = [(cat_ptr.get("path", ""), cat_ptr.get("sha256"), "bindings.catalogue")]
    bound += [(rel, sha, f"bindings.inputs[{rel!r}]") for rel, sha in interp.bindings.inputs.items()]
    for rel, expected, what in bound:
        actual = pkg.sha(rel, f"{where.name} {what}")
        if actual != expected:
            state = "missing" if actual is None else "changed since the interpretation was made"
            raise HypographError(f"{pkg.root / rel}: {state} (bound by {where.name} of revision {rev})")
    catalogue = pkg.catalogue(interp)
    check_origins(pkg, catalogue, interp.bindings.inputs)
    known = catalogue.by_id()
    for _alias, pointer, s in interp.aliases():
        for sid in s.source_ids:
            if sid not in known:
                raise HypographError(
                    f"{where}: field '{pointer.lstrip('/').replace('/', '.')}.source_ids': "
                    f"{sid!r} is not in the catalogue"
                )
    if not interp.statements or not any(s.kind in OBSERVATION_KINDS for s in catalogue.sources):
        raise HypographError(
            f"{where}: revision {rev} has no observations (no accepted statement or no human "
            "observation, report or comment in the catalogue); no hypotheses without them"
        )
    if interp.anchor() is None:
        raise HypographError(
            f"{where}: needs a first_known_divergence, failure_stage or reported_behavior "
            "for the first hypothesis to cite"
        )
    return interp, catalogue


def check_origins(pkg: CasePackage, catalogue: Catalogue, inputs: dict[str, str]) -> None:
    """Every catalogue origin is a bound input of the package (so it is confined, a regular file
    and hashed); an archive member it names is a member the archive lists."""
    cat = "catalogue"
    for i, s in enumerate(catalogue.sources):
        if s.origin is None:
            continue
        what = f"{cat} sources[{i}].origin ({s.id})"
        pkg.confined(s.origin, what)
        if s.origin not in inputs:
            raise HypographError(f"{pkg.root / s.origin}: {what}: not one of the interpretation's bound inputs")
        if s.member is not None:
            from_archive(pkg, s.origin, s.member, what)


def from_archive(pkg: CasePackage, origin: str, member: str, what: str) -> None:
    """Refuse a catalogue member the archive at ``origin`` does not list as a safe file member."""
    names = {m.name for m in archive_members(pkg.root / origin, None, origin)}
    if member not in names:
        raise HypographError(f"{pkg.root / origin}: {what}: member {member!r} is not in the archive")


def prior_generations(pkg: CasePackage, revision: int, limits: HypothesisLimits) -> list[dict]:
    """Published batches of earlier revisions, oldest first; too many is an error, not a cut."""
    prior = [
        r for r in pkg.revisions() if r < revision and (pkg.root / rev_dir("hypotheses", r) / "registry.json").exists()
    ]
    if len(prior) > limits.prior_documents:
        raise HypographError(
            f"{pkg.root}: {len(prior)} earlier batches exceed limits.prior_documents="
            f"{limits.prior_documents}; raise the limit (nothing is dropped silently)"
        )
    out = []
    for r in prior:
        rel = f"{rev_dir('hypotheses', r)}/hypotheses.json"
        doc = pkg.read_json(rel)
        wrong = shape_violations(doc, SHAPES["hypotheses"], rel)
        if wrong:
            raise HypographError(f"{pkg.root / rel}: {wrong[0][1]} (an earlier revision's batch of another shape)")
        out.append(
            {
                "analysis_revision": r,
                "label": PRIOR_LABEL,
                "hypotheses": [
                    {"id": h["id"], "title": h["title"], "mechanism": h["mechanism"]} for h in doc["hypotheses"]
                ],
            }
        )
    return out


def build_context(
    pkg: CasePackage,
    manifest: dict,
    interp: Interpretation,
    catalogue: Catalogue,
    policy: HypothesisPolicy,
    limits: HypothesisLimits,
) -> tuple[dict, str]:
    """(context document, its policy.json text). Raises when the context exceeds its limit."""
    rev = manifest["analysis_revision"]
    policy_text = json_text(policy.document(rev, PROMPT_VERSION))
    anchor_alias, anchor_name = interp.anchor()
    context = {
        "package_id": manifest["package_id"],
        "analysis_revision": rev,
        "prompt_version": PROMPT_VERSION,
        "question": interp.question,
        "catalogue": [
            {"id": s.id, "kind": s.kind, "title": s.title, "summary": s.summary, "read": s.read}
            for s in catalogue.sources
        ],
        "statements": [
            {"alias": a, "pointer": p, "text": s.text, "source_ids": s.source_ids} for a, p, s in interp.aliases()
        ],
        "anchor": {"alias": anchor_alias, "name": anchor_name},
        "policy": policy.document(rev, PROMPT_VERSION),
        "prior_generations": prior_generations(pkg, rev, limits),
        "bindings": {
            "interpretation": manifest["artifacts"]["interpretation"],
            "catalogue": interp.bindings.catalogue,
            "inputs": interp.bindings.inputs,
            "policy": {"path": f"{rev_dir('hypotheses', rev)}/policy.json", "sha256": sha_text(policy_text)},
        },
    }
    size = len(json_text(context).encode("utf-8"))
    if size > limits.context_bytes:
        raise HypographError(
            f"{pkg.root}: the context of revision {rev} is {size} bytes, over "
            f"limits.context_bytes={limits.context_bytes}; raise the limit (nothing is truncated)"
        )
    return context, policy_text


PERSONS_FIELDS = ("question", "statements", *ANCHORS)  # what a person confirms in draft.json


def refuse_a_later_edit(pkg: CasePackage, m: dict, interp: Interpretation) -> None:
    """A draft a person edited after its revision was confirmed (the question, a statement, an
    anchor) is neither applied nor passed over: one HypographError line naming draft.json and the
    first field that differs from the confirmed interpretation. Every door checks it
    (``verified_interpretation``: the case jobs, the batch; ``case confirm`` again)."""
    adopted = adopt_draft(pkg, m, interp.model_copy(update={"confirmed": False}), pkg.catalogue(interp))
    if adopted is None:
        return
    draft, now = adopted[0].model_dump(mode="json"), interp.model_dump(mode="json")
    taken = suggested_question(pkg, m)
    if taken and now["question"] == taken:  # confirmed with --use-suggested-question: not an edit
        draft["question"] = taken
    changed = next((name for name in PERSONS_FIELDS if draft[name] != now[name]), None)
    if changed is not None:
        raise HypographError(
            f"{pkg.root / draft_path(m['analysis_revision'])}: field '{changed}' was edited after revision "
            f"{m['analysis_revision']} was confirmed; a confirmed revision is never rewritten, so the edit "
            f"is not applied: undo it, or add inputs (`hypograph case add {pkg.root} PATH…`) for a new "
            "revision to interpret and confirm"
        )
