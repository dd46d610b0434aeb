"""Analysis revisions: record a new (unconfirmed) interpretation, and a person's confirmation.

``add_revision`` writes the inputs under ``case/`` (new files only: an original is never
rewritten), the revision's catalogue and interpretation bound to them by sha256, and moves the
manifest to the new revision; an identical interpretation is not a new revision. Earlier
revisions' files, batches and allocations are never touched. ``confirm`` is the explicit human
step the builder requires.
"""

from __future__ import annotations

import datetime as dt
import getpass
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from hypograph.atomic import write_atomic
from hypograph.case.context import refuse_a_later_edit, verified_interpretation
from hypograph.case.ingest import open_input
from hypograph.case.interpret import adopt_draft, draft_path
from hypograph.case.models import Bindings, Catalogue, Interpretation, Source, Statement
from hypograph.case.package import (
    PHASE_INTERPRETED,
    TARGET_VAULT,
    CasePackage,
    json_text,
    new_package_id,
    rev_dir,
    sha_text,
)
from hypograph.errors import HypographError
from hypograph.ids import numbered_key


@dataclass
class RevisionReport:
    case_dir: Path
    package_id: str
    analysis_revision: int
    created: bool  # False: the interpretation was unchanged, nothing written
    message: str


def _content(interp: dict, catalogue: dict) -> str:
    """What makes two revisions the same: question, statements, anchors and sources, not paths."""
    sources = [{k: v for k, v in s.items() if k != "origin"} for s in catalogue["sources"]]
    keep = {k: v for k, v in interp.items() if k not in ("analysis_revision", "bindings", "confirmed", "confirmation")}
    return json.dumps([keep, sources], sort_keys=True)


@dataclass(frozen=True)
class NewRevision:
    """What one revision records: the question, its statements and anchors, the catalogue's
    ``sources``, and the inputs written under ``<input_folder>/rNNNN/``: ``inputs`` (path -> text)
    and ``copies`` (``ingest.Input`` files copied byte for byte). Each new source's ``origin`` is
    relative to that folder, except an origin in ``carried`` (package path -> sha256 of an earlier
    revision's input, bound again as it is)."""

    question: str
    statements: list[Statement]
    sources: list[Source]
    anchors: dict[str, Statement | None] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)
    copies: list = field(default_factory=list)
    carried: dict[str, str] = field(default_factory=dict)
    input_folder: str = "case"


def add_revision(
    case_dir: Path | str, revision: NewRevision, target_vault: Path | str | None = None, new: bool = False
) -> RevisionReport:
    """Create the package if needed and record ``revision``, unconfirmed. ``target_vault``: recorded
    in the manifest as the vault batches flow into. ``new``: refuse a folder that is already a case
    package. An interpretation equal to the current one is no new revision (nothing written)."""
    pkg = CasePackage(Path(case_dir))
    if not pkg.exists() and pkg.root.exists() and any(pkg.root.iterdir()):
        raise HypographError(f"{pkg.root}: not empty and not a case package; choose a new directory")
    if new and pkg.exists():
        raise HypographError(f"{pkg.root}: already a case package; add inputs with `case add`")
    pkg.root.mkdir(parents=True, exist_ok=True)
    with pkg.lock():
        pkg.roll_forward()
        m = pkg.manifest() if pkg.exists() else _first_manifest(pkg)
        rev = m["analysis_revision"] + 1
        base = f"{revision.input_folder}/{numbered_key(rev)}"
        files = {f"{base}/{rel}": text for rel, text in sorted(revision.inputs.items())}
        copied = {f"{base}/{c.rel}": c for c in revision.copies}
        _refuse_existing(pkg, base, files, copied)
        catalogue_text, interp_text = _records(revision, rev, base, files, copied)
        target = str(Path(target_vault).resolve()) if target_vault else m.get(TARGET_VAULT)
        if rev > 1 and _unchanged(pkg, m, catalogue_text, interp_text) and not copied:
            if target != m.get(TARGET_VAULT):
                pkg.write({}, {**m, TARGET_VAULT: target, "package_generation": m["package_generation"] + 1})
            return RevisionReport(
                pkg.root,
                m["package_id"],
                rev - 1,
                False,
                f"unchanged: revision {rev - 1} already holds this interpretation",
            )
        for rel, item in copied.items():  # before the plan: the manifest names them only once it is applied
            copy_input(item.source, pkg.root / rel, item.sha256)
        cat_path = f"{rev_dir('interpretation', rev)}/catalogue.json"
        int_path = f"{rev_dir('interpretation', rev)}/interpretation.json"
        files[cat_path], files[int_path] = catalogue_text, interp_text
        manifest = {
            **m,
            "analysis_revision": rev,
            "package_generation": m["package_generation"] + 1,
            "phase": PHASE_INTERPRETED,
            TARGET_VAULT: target,
            "artifacts": {
                "catalogue": CasePackage.pointer(cat_path, catalogue_text),
                "interpretation": CasePackage.pointer(int_path, interp_text),
            },
        }
        pkg.write(files, manifest)
    return RevisionReport(
        pkg.root,
        m["package_id"],
        rev,
        True,
        f"revision {rev} recorded, unconfirmed: review {int_path}, then `hypograph case confirm`",
    )


def _first_manifest(pkg: CasePackage) -> dict:
    """The manifest of a package before its first revision."""
    return {
        "package_id": new_package_id(pkg.root),
        "analysis_revision": 0,
        "package_generation": 0,
        "phase": PHASE_INTERPRETED,
        "artifacts": {},
    }


def _refuse_existing(pkg: CasePackage, base: str, files: dict[str, str], copied: dict) -> None:
    """Refuse to write over anything: an original input is never rewritten, and a file to copy that
    is already there must be that very input (a copy an interrupted add left)."""
    for rel in files:
        if os.path.lexists(pkg.root / rel):
            raise HypographError(f"{pkg.root / rel}: already exists; an original input is never rewritten")
    for rel, item in copied.items():
        pkg.confined(rel, "a new input")
        if os.path.lexists(pkg.root / rel) and pkg.sha(rel) != item.sha256:
            raise HypographError(
                f"{pkg.root / rel}: already exists and is no revision's input (left by an "
                f"interrupted add?); move {pkg.root / base} away and add again"
            )


def _records(revision: NewRevision, rev: int, base: str, files: dict[str, str], copied: dict) -> tuple[str, str]:
    """Revision ``rev``'s catalogue and interpretation as JSON texts, the interpretation bound by
    sha256 to the catalogue and to every input (carried, written and copied)."""
    carried = revision.carried
    sources = [
        s if s.origin in carried else s.model_copy(update={"origin": f"{base}/{s.origin}" if s.origin else None})
        for s in revision.sources
    ]
    catalogue_text = json_text(Catalogue(sources=sources).model_dump(mode="json"))
    cat_path = f"{rev_dir('interpretation', rev)}/catalogue.json"
    bound = {
        **carried,
        **{rel: sha_text(text) for rel, text in files.items()},
        **{rel: c.sha256 for rel, c in copied.items()},
    }
    interp = Interpretation(
        analysis_revision=rev,
        question=revision.question,
        statements=revision.statements,
        **revision.anchors,
        bindings=Bindings(
            catalogue={"path": cat_path, "sha256": sha_text(catalogue_text)}, inputs=dict(sorted(bound.items()))
        ),
    )
    return catalogue_text, json_text(interp.model_dump(mode="json"))


def _unchanged(pkg: CasePackage, m: dict, catalogue_text: str, interp_text: str) -> bool:
    """Whether the current revision already holds this interpretation (``_content``: not its paths)."""
    old = pkg.interpretation(m)
    old_cat = pkg.catalogue(old)
    return _content(old.model_dump(mode="json"), old_cat.model_dump(mode="json")) == _content(
        json.loads(interp_text), json.loads(catalogue_text)
    )


def copy_input(source: Path, dest: Path, sha256: str) -> None:
    """Copy the input file ``source`` to ``dest`` byte for byte (atomically, streamed), refusing a
    source whose bytes changed since they were hashed; an identical ``dest`` is left alone."""
    h = hashlib.sha256()
    fd = open_input(source)

    def write(out) -> None:
        with os.fdopen(fd, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
                out.write(chunk)
        if h.hexdigest() != sha256:
            raise HypographError(f"{source}: changed while it was being copied; add it again")

    write_atomic(dest, write)


def confirm(
    case_dir: Path | str, by: str | None = None, now: dt.datetime | None = None, use_suggested: bool = False
) -> RevisionReport:
    """Mark the current revision's interpretation confirmed (a person's decision, recorded with
    who and when), adopting the draft: its question the person's as typed, or the model's
    ``suggested_question`` with ``use_suggested``. Verifies the bindings first; confirming twice
    changes nothing."""
    pkg = CasePackage(Path(case_dir))
    if not pkg.exists():
        raise HypographError(f"{pkg.root / 'manifest.json'}: missing (not a case package)")
    with pkg.lock():
        pkg.roll_forward()
        m = pkg.manifest()
        interp = pkg.interpretation(m)
        rev = m["analysis_revision"]
        if interp.confirmed:
            refuse_a_later_edit(pkg, m, interp)
            return RevisionReport(pkg.root, m["package_id"], rev, False, f"revision {rev} was already confirmed")
        files: dict[str, str] = {}
        arts = dict(m["artifacts"])
        adopted = adopt_draft(pkg, m, interp, pkg.catalogue(interp), use_suggested)
        if adopted is not None:  # the draft (the model's or a person's) becomes the interpretation
            interp, catalogue = adopted
            cat_text = json_text(catalogue.model_dump(mode="json"))
            cat_path = interp.bindings.catalogue["path"]
            interp = interp.model_copy(
                update={
                    "bindings": interp.bindings.model_copy(
                        update={"catalogue": {"path": cat_path, "sha256": sha_text(cat_text)}}
                    )
                }
            )
            files[cat_path] = cat_text
            arts["catalogue"] = CasePackage.pointer(cat_path, cat_text)
        confirmed = interp.model_copy(
            update={
                "confirmed": True,
                "confirmation": {
                    "by": by or getpass.getuser(),
                    "at": (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds"),
                },
            }
        )
        text = json_text(confirmed.model_dump(mode="json"))
        path = m["artifacts"]["interpretation"]["path"]
        files[path] = text
        arts["interpretation"] = CasePackage.pointer(path, text)
        manifest = {**m, "package_generation": m["package_generation"] + 1, "artifacts": arts}
        # Check what the builder will check, before recording the decision.
        verified_interpretation(_Preview(pkg, files), manifest)
        pkg.write(files, manifest)
    how = f" (adopting {draft_path(rev)})" if adopted is not None else ""
    how += "; the question as the model suggested it" if use_suggested else ""
    return RevisionReport(pkg.root, m["package_id"], rev, True, f"revision {rev} confirmed{how}")


class _Preview(CasePackage):
    """The package as it will be once ``overrides`` (path -> text) are written."""

    def __init__(self, pkg: CasePackage, overrides: dict[str, str]):
        super().__init__(pkg.root, pkg.case_id)
        self.overrides = overrides

    def sha(self, rel: str, what=None):
        return sha_text(self.overrides[rel]) if rel in self.overrides else super().sha(rel, what)

    def read_json(self, rel: str, model=None, what=None):
        if rel in self.overrides:
            data = json.loads(self.overrides[rel])
            return model.model_validate(data) if model else data
        return super().read_json(rel, model, what)
