"""``case new`` and ``case add``: a revision of raw inputs (files, folders, ZIP archives).

``case_new(case_dir, question, paths)`` makes a package whose revision 1 catalogues every input
(see ``ingest``) with the person's question as the reported behavior and no statement yet: the
interpreter (``case interpret``) drafts them and a person confirms. ``case_add(case_dir, paths)``
copies more inputs as a new unconfirmed revision carrying the current question, statements,
anchors and sources (earlier inputs stay where they are, bound again by their hashes).
"""

from __future__ import annotations

from pathlib import Path

from hypograph.case.config import HypothesisConfig
from hypograph.case.ingest import DEFAULT_KIND, collect, next_number, sources_for
from hypograph.case.models import ANCHORS, Statement
from hypograph.case.package import CasePackage
from hypograph.case.revision import NewRevision, RevisionReport, add_revision
from hypograph.errors import HypographError


def case_new(
    case_dir: Path | str,
    question: str,
    paths: list[Path],
    kind: str = DEFAULT_KIND,
    config: HypothesisConfig | None = None,
    target_vault: Path | None = None,
) -> RevisionReport:
    """A new package at ``case_dir`` (missing or empty) from ``paths``; revision 1, unconfirmed."""
    if not question or not question.strip():
        raise HypographError("a case needs its question (what is to be explained)")
    config = config or HypothesisConfig()
    items = collect(paths, config.archives)
    sources = sources_for(items, kind, 1)
    revision = NewRevision(
        question.strip(),
        [],
        sources,
        {"reported_behavior": Statement(text=question.strip(), source_ids=[])},
        copies=items,
    )
    return add_revision(case_dir, revision, target_vault=target_vault, new=True)


def case_add(
    case_dir: Path | str, paths: list[Path], kind: str = DEFAULT_KIND, config: HypothesisConfig | None = None
) -> RevisionReport:
    """``paths`` as a new unconfirmed revision of the package at ``case_dir``."""
    pkg = CasePackage(Path(case_dir))
    if not pkg.exists():
        raise HypographError(f"{pkg.root / 'manifest.json'}: missing (not a case package; make one with `case new`)")
    config = config or HypothesisConfig()
    items = collect(paths, config.archives)
    m = pkg.manifest()
    interp = pkg.interpretation(m)
    old = pkg.catalogue(interp)
    sources = list(old.sources) + sources_for(items, kind, next_number(old.sources))
    anchors = {name: getattr(interp, name) for name in ANCHORS}
    revision = NewRevision(
        interp.question,
        list(interp.statements),
        sources,
        anchors,
        copies=items,
        carried=dict(interp.bindings.inputs),
    )
    return add_revision(case_dir, revision)
