"""The interpreter phase: a draft interpretation of the current revision, for a person to confirm.

``draft_interpretation(case_dir, config, gateway)`` asks the model (prompt ``interpretation_v1``)
for question, statements with source ids, first known divergence, failure stage, reported behavior
and per-source summaries, from the catalogue and bounded excerpts of the inputs — never a raw
archive: a ZIP member is decompressed in a stream up to its share, after the archive passed its
``[archives]`` checks again. The whole prompt context stays within ``limits.context_bytes``: each
source gets an equal share of what the catalogue leaves; a source shown whole may be marked read.
The answer is validated like a batch answer (every source id exists; each statement cites one; at
least one statement and one anchor; nothing the controller sets) and saved, unconfirmed, as

    analysis/interpretation/NNNN/draft.json

With no model (``gateway`` None) a template with the same fields is saved there instead, for a
person to fill in. An existing draft is never overwritten (a person may have edited it): a re-run
changes nothing and costs no call; delete the file to draft again. ``case confirm`` adopts the
draft (``adopt_draft``), and ``case show`` prints it (``show_text``). The question stays the
person's as typed: the model's wording of it is saved beside it as ``suggested_question``, shown by
``case show``, and taken only by ``case confirm --use-suggested-question``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hypograph.case.config import HypothesisConfig
from hypograph.case.gateway import CaseGateway
from hypograph.case.ingest import archive_members, read_member
from hypograph.case.models import ANCHORS, CONTROLLER_FIELDS, Catalogue, Interpretation, Source, Statement
from hypograph.case.package import CasePackage, json_text, rev_dir, sha_text
from hypograph.errors import HypographError, NotDone
from hypograph.ids import numbered_key
from hypograph.journal import Step
from hypograph.llm.client import Request, untrusted
from hypograph.text import printable

PROMPT_VERSION = "interpretation_v1"
TASK = "case-interpretation"
MIN_SHARE = 64  # bytes of excerpt per source below which the context limit is too small to be useful
TEMPLATE_NOTE = (
    "Fill in, then run `hypograph case confirm`: statements [{text, source_ids}] citing catalogue "
    "ids; first_known_divergence, failure_stage, reported_behavior (a statement or null; at least "
    "one); source_summaries {id: summary}; read: ids you have read. Blank statements are refused."
)


SUGGESTED = "suggested_question"  # draft.json: the model's wording of the question, never applied by itself
USE_SUGGESTED = "--use-suggested-question"  # the `case confirm` flag that applies it


def draft_path(revision: int) -> str:
    return f"{rev_dir('interpretation', revision)}/draft.json"


# -- the model's answer ----------------------------------------------------------------------------


class DraftStatement(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=4000)
    source_ids: list[str] = Field(min_length=1)

    @field_validator("text")
    @classmethod
    def _nonblank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v


class SourceSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source_id: str
    summary: str = Field(min_length=1, max_length=2000)


class DraftAnswer(BaseModel):
    """The interpreter's answer: every field required (null allowed for an anchor)."""

    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, max_length=2000)
    statements: list[DraftStatement] = Field(min_length=1)
    first_known_divergence: DraftStatement | None
    failure_stage: DraftStatement | None
    reported_behavior: DraftStatement | None
    source_summaries: list[SourceSummary]

    @model_validator(mode="before")
    @classmethod
    def _no_controller_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data:
                if str(key).lower() in CONTROLLER_FIELDS:
                    raise ValueError(f"field {key!r} is not accepted from the model")
        return data


def answer_violations(answer: DraftAnswer, catalogue: Catalogue) -> list[str]:
    """Why ``answer`` cannot be a draft of this catalogue (empty: it can)."""
    known = catalogue.by_id()
    named = [("statements", i, s) for i, s in enumerate(answer.statements)]
    named += [(name, None, getattr(answer, name)) for name in ANCHORS if getattr(answer, name) is not None]
    out = [v for name, i, s in named for v in _citation_violations(name if i is None else f"{name}[{i}]", s, known)]
    if all(getattr(answer, name) is None for name in ANCHORS):
        out.append("no first_known_divergence, failure_stage or reported_behavior: at least one is needed")
    ids = [s.source_id for s in answer.source_summaries]
    out += [f"source_summaries: {sid!r} is not a source of this case's catalogue" for sid in ids if sid not in known]
    out += [f"source_summaries: {sid!r} summarised twice" for sid in sorted({x for x in ids if ids.count(x) > 1})]
    return out


def _citation_violations(where: str, statement: DraftStatement, known: dict) -> list[str]:
    """Why the sources ``statement`` (at ``where``) cites are wrong: one not in the catalogue, one twice."""
    out = [
        f"{where}.source_ids: {sid!r} is not a source of this case's catalogue"
        for sid in statement.source_ids
        if sid not in known
    ]
    if len(set(statement.source_ids)) != len(statement.source_ids):
        out.append(f"{where}.source_ids: lists an id twice")
    return out


# -- excerpts ----------------------------------------------------------------------------------------


def _catalogue_view(catalogue: Catalogue) -> list[dict]:
    return [
        {"id": s.id, "kind": s.kind, "title": s.title, "summary": s.summary, "read": s.read} for s in catalogue.sources
    ]


def excerpts(pkg: CasePackage, catalogue: Catalogue, share: int, config: HypothesisConfig) -> list[dict]:
    """For each source with an origin: at most ``share`` bytes of its content as text
    (``{"source_id", "text", "bytes_shown", "complete"}``); binary content is not shown."""
    out = []
    for s in catalogue.sources:
        if s.origin is None:
            continue
        what = f"catalogue source {s.id} origin"
        if s.member is None:
            data, complete = pkg.read_head(s.origin, share, what)
        else:
            pkg.sha(s.origin, what)  # confined and a regular file, before the archive is opened
            path = pkg.root / s.origin
            archive_members(path, config.archives, str(path))  # the limits again: the config may be stricter now
            data, complete = read_member(path, s.member, share)
        text = data.decode("utf-8", errors="replace")
        if "\0" in text:
            out.append({"source_id": s.id, "text": "(binary content, not shown)", "bytes_shown": 0, "complete": False})
        else:
            out.append({"source_id": s.id, "text": text, "bytes_shown": len(data), "complete": complete})
    return out


def interpreter_context(
    pkg: CasePackage, interp: Interpretation, catalogue: Catalogue, config: HypothesisConfig
) -> dict:
    """{"question", "catalogue", "excerpts"}: what the interpreter is shown, within limits.context_bytes."""
    limit = config.limits.context_bytes
    base = {"question": interp.question, "catalogue": _catalogue_view(catalogue), "excerpts": []}
    shown = [s for s in catalogue.sources if s.origin is not None]
    room = limit - len(json_text(base).encode("utf-8")) - 200 * len(shown)  # 200: each excerpt's own keys
    share = room // max(len(shown), 1)
    if shown and share < MIN_SHARE:
        raise HypographError(
            f"{pkg.root}: limits.context_bytes={limit} leaves {max(share, 0)} bytes of excerpt per "
            f"source for {len(shown)} sources; raise the limit (nothing is truncated silently)"
        )
    # JSON escaping can make text longer than its bytes: shrink the share until the document fits
    while True:
        context = {**base, "excerpts": excerpts(pkg, catalogue, share, config)}
        if len(json_text(context).encode("utf-8")) <= limit:
            return context
        share //= 2
        if share < MIN_SHARE:
            raise HypographError(
                f"{pkg.root}: the interpreter's context does not fit limits.context_bytes={limit}; raise the limit"
            )


def build_request(context: dict, catalogue: Catalogue) -> Request[DraftAnswer]:
    raw = resources.files("hypograph.case").joinpath(f"{PROMPT_VERSION}.txt").read_text(encoding="utf-8")
    text = "\n".join(ln for ln in raw.splitlines() if not ln.startswith("#"))
    system, _, user = text.partition("=== system\n")[2].partition("=== user\n")
    values = {
        "question": untrusted("question", {}, {"question": context["question"]}),
        "catalogue": untrusted("case_catalogue", {}, {"sources": context["catalogue"]}),
        "excerpts": untrusted("excerpts", {"bounded": "true"}, {"excerpts": context["excerpts"]}),
    }

    def check(answer: DraftAnswer) -> None:
        bad = answer_violations(answer, catalogue)
        if bad:
            raise ValueError("; ".join(bad[:8]))

    return Request(
        name=f"interpretation-{sha_text(json_text(context))[:12]}",
        system=Template(system.strip()).substitute(values),
        user=Template(user.strip()).substitute(values),
        schema=DraftAnswer,
        check=check,
    )


# -- the phase -----------------------------------------------------------------------------------------


@dataclass
class DraftReport:
    case_dir: Path
    analysis_revision: int
    path: Path
    drafted_by: str  # "model", "template", or "existing" (an earlier draft kept)
    message: str
    llm: dict


def _current(pkg: CasePackage) -> tuple[dict, Interpretation, Catalogue]:
    m = pkg.manifest()
    interp = pkg.interpretation(m)
    catalogue = pkg.catalogue(interp)
    return m, interp, catalogue


def draft_interpretation(
    case_dir: Path | str,
    config: HypothesisConfig | None = None,
    gateway: CaseGateway | None = None,
    revision: int | None = None,
) -> DraftReport:
    """Draft the current revision's interpretation (see the module docstring): ``gateway`` None
    saves the template. In: the package (``revision``, if given, must be its current one); out:
    draft.json (unconfirmed) and what happened. Raises HypographError on refused input, NotDone
    when the model gave no valid answer or another process holds the case (CaseBusy)."""
    config = config or HypothesisConfig()
    pkg = CasePackage(Path(case_dir))
    if not pkg.exists():
        raise HypographError(f"{pkg.root / 'manifest.json'}: missing (not a case package)")
    with pkg.lock():
        pkg.roll_forward()
        m, interp, catalogue = _current(pkg)
        rev = m["analysis_revision"]
        if revision is not None and revision != rev:
            raise HypographError(
                f"{pkg.root / 'manifest.json'}: revision {revision} is not the current one "
                f"({numbered_key(rev)}); earlier revisions stay as they were"
            )
        rel = draft_path(rev)
        report = lambda by, msg, llm=None: DraftReport(pkg.root, rev, pkg.root / rel, by, msg, llm or {})  # noqa: E731
        if interp.confirmed:
            return report(
                "existing", f"revision {rev} is already confirmed; nothing to draft (add inputs for a new revision)"
            )
        if os.path.lexists(pkg.root / rel):
            pkg.read_json(rel, what="the draft interpretation")  # confined, and JSON
            return report("existing", f"draft kept: {rel} exists (delete it to draft again); review it, then confirm")
        bindings = {"interpretation": m["artifacts"]["interpretation"], "catalogue": m["artifacts"]["catalogue"]}
        if gateway is None:
            doc = _template(rev, interp, catalogue, bindings)
            pkg.journal().apply([_step(rel, doc)])
            return report("template", f"no model: template written to {rel}; fill it in, then confirm")
        context = interpreter_context(pkg, interp, catalogue, config)
        outcome = gateway.ask(build_request(context, catalogue), pkg.state_dir, TASK)
        if outcome.outage:
            raise NotDone(
                f"{pkg.root}: no endpoint answered the interpreter: {'; '.join(outcome.failures)}; nothing written"
            )
        if outcome.rejected:
            raise NotDone(f"{pkg.root}: the interpreter's answer was rejected: {outcome.rejected}; nothing written")
        answer: DraftAnswer = outcome.answer
        complete = [e["source_id"] for e in context["excerpts"] if e["complete"]]
        doc = {
            "analysis_revision": rev,
            "drafted_by": "model",
            "endpoint": outcome.endpoint,
            "prompt_version": PROMPT_VERSION,
            "confirmed": False,
            "bindings": {**bindings, "context_sha256": sha_text(json_text(context))},
            **_fields(answer.model_dump(mode="json")),
            # The person's question is the case: kept as typed; the model's wording is only shown
            # beside it, taken by `case confirm --use-suggested-question` (a person's choice).
            "question": interp.question,
            **({SUGGESTED: answer.question} if answer.question.strip() != interp.question.strip() else {}),
            "source_summaries": {s.source_id: s.summary for s in answer.source_summaries},
            "read": complete,
        }
        pkg.journal().apply([_step(rel, doc)])
        return report(
            "model", f"draft written to {rel} (unconfirmed): review it with `case show`, then confirm", outcome.usage
        )


def _fields(answer: dict) -> dict:
    return {k: answer[k] for k in ("question", "statements", *ANCHORS)}


def _step(rel: str, doc: dict) -> Step:
    return Step(rel, json_text(doc))


def _template(rev: int, interp: Interpretation, catalogue: Catalogue, bindings: dict) -> dict:
    current = interp.model_dump(mode="json")
    return {
        "analysis_revision": rev,
        "drafted_by": "template",
        "note": TEMPLATE_NOTE,
        "confirmed": False,
        "bindings": bindings,
        "question": interp.question,
        "statements": current["statements"] or [{"text": "", "source_ids": []}],
        **{name: current[name] for name in ANCHORS},
        "source_summaries": {s.id: s.summary for s in catalogue.sources},
        "read": [s.id for s in catalogue.sources if s.read],
    }


# -- the person's step: adopt the draft at confirmation ----------------------------------------------------


class HumanStatement(BaseModel):
    """A statement as a person writes it (blank text is caught with a hint, not a schema message)."""

    model_config = ConfigDict(extra="forbid")
    text: str
    source_ids: list[str] = []


class HumanDraft(BaseModel):
    """A draft as a person may leave it: the model's fields, statements possibly without sources."""

    model_config = ConfigDict(extra="ignore")
    analysis_revision: int
    question: str = Field(min_length=1)
    statements: list[HumanStatement] = Field(min_length=1)
    first_known_divergence: HumanStatement | None = None
    failure_stage: HumanStatement | None = None
    reported_behavior: HumanStatement | None = None
    source_summaries: dict[str, str] = {}
    read: list[str] = []
    suggested_question: str | None = None


def suggested_question(pkg: CasePackage, m: dict) -> str | None:
    """The model's wording of the question in the current revision's draft, when it differs from
    the person's (None: no draft, or no other wording)."""
    rel = draft_path(m["analysis_revision"])
    if not os.path.lexists(pkg.root / rel):
        return None
    return pkg.read_json(rel, HumanDraft, "the draft interpretation").suggested_question


def adopt_draft(
    pkg: CasePackage, m: dict, interp: Interpretation, catalogue: Catalogue, use_suggested: bool = False
) -> tuple[Interpretation, Catalogue] | None:
    """(interpretation, catalogue) as the current revision's draft makes them, or None without a
    draft; its ``question`` (the person's, as typed) unless ``use_suggested`` takes the model's
    ``suggested_question``. One HypographError line naming draft.json and the field when the draft
    cannot be adopted."""
    rel = draft_path(m["analysis_revision"])
    if not os.path.lexists(pkg.root / rel):
        if use_suggested:
            raise HypographError(f"{pkg.root / rel}: missing, so no suggested question to use ({USE_SUGGESTED})")
        return None
    where = pkg.root / rel
    draft = pkg.read_json(rel, HumanDraft, "the draft interpretation")
    if use_suggested:
        draft = _with_suggested_question(draft, where)
    if draft.analysis_revision != m["analysis_revision"]:
        raise HypographError(
            f"{where}: field 'analysis_revision': {draft.analysis_revision}, not the current "
            f"revision {m['analysis_revision']}"
        )
    _check_filled(draft, where, catalogue.by_id())
    sources = [
        s.model_copy(
            update={"summary": draft.source_summaries.get(s.id, s.summary), "read": s.read or s.id in draft.read}
        )
        for s in catalogue.sources
    ]
    new_cat = Catalogue(sources=sources)
    fields = draft.model_dump(include={"question", "statements", *ANCHORS})
    try:
        new_interp = Interpretation.model_validate({**interp.model_dump(mode="json"), **fields})
    except ValidationError as e:
        err = e.errors()[0]
        raise HypographError(f"{where}: field '{'.'.join(map(str, err['loc']))}': {err['msg']}") from None
    return new_interp, new_cat


def _with_suggested_question(draft: HumanDraft, where: Path) -> HumanDraft:
    """The draft with the model's suggested question taken (a person's explicit choice)."""
    if not (draft.suggested_question or "").strip():
        raise HypographError(
            f"{where}: field '{SUGGESTED}': none (the draft keeps your question as typed); "
            f"confirm without {USE_SUGGESTED}"
        )
    return draft.model_copy(update={"question": draft.suggested_question.strip()})


def _check_filled(draft: HumanDraft, where: Path, known: dict) -> None:
    """One line naming draft.json and the field: a blank statement, or a source the catalogue lacks."""
    named = [(f"statements.{i}", s) for i, s in enumerate(draft.statements)]
    named += [(name, getattr(draft, name)) for name in ANCHORS if getattr(draft, name) is not None]
    for field, s in named:
        if not s.text.strip():
            raise HypographError(f"{where}: field '{field}.text': blank; fill in the template")
    for sid in [*draft.source_summaries, *draft.read]:
        if sid not in known:
            raise HypographError(f"{where}: field 'source_summaries/read': {sid!r} is not a source of the catalogue")


def show_text(case_dir: Path | str) -> str:
    """What a person confirms: the current revision's draft (else its interpretation) and catalogue,
    one line per item (control characters from names, members and answers escaped: ``printable``)."""
    pkg = CasePackage(Path(case_dir))
    m, interp, catalogue = _current(pkg)
    rev = m["analysis_revision"]
    adopted = None if interp.confirmed else adopt_draft(pkg, m, interp, catalogue)
    shown, cat = adopted or (interp, catalogue)
    state = "confirmed" if interp.confirmed else ("draft, unconfirmed" if adopted else "unconfirmed")
    lines = [
        f"{pkg.root} revision {rev} ({state}; from {draft_path(rev) if adopted else 'interpretation.json'})",
        f"question: {shown.question}",
    ]
    suggestion = None if interp.confirmed else suggested_question(pkg, m)
    if suggestion:
        lines.append(
            f"suggested question (the model's wording; used only with `case confirm {USE_SUGGESTED}`): {suggestion}"
        )
    lines.append("statements:")
    lines += [f"  I{n}. {_cited(s)}" for n, s in enumerate(shown.statements, 1)]
    for name in ANCHORS:
        s = getattr(shown, name)
        lines.append(f"{name.replace('_', ' ')}: " + (_cited(s) if s else "(none)"))
    lines.append("sources:")
    lines += [f"  {_source_line(s)}" for s in cat.sources]
    if not interp.confirmed:
        lines.append(_next_step(pkg.root, shown, cat))
    return "\n".join(printable(line) for line in lines)  # a name's ESC or newline escaped, on its line


def _next_step(root: Path, shown, cat) -> str:
    """What a person does next with an unconfirmed revision: confirm it once it has statements;
    before that, draft them (``interpret`` reads the sources, or writes a template to fill in)."""
    if shown.statements:
        return f"confirm it with: hypograph case confirm {root}"
    unread = sum(not s.read for s in cat.sources)
    sources = f"{unread} of {len(cat.sources)} sources unread" if unread else "sources read"
    return (
        f"nothing to confirm yet (no statement; {sources}): draft the interpretation with: "
        f"hypograph case interpret {root}, then review it here and confirm it with: hypograph case confirm {root}"
    )


def _cited(s: Statement) -> str:
    return f"{s.text} [{', '.join(s.source_ids) or 'no source'}]"


def _source_line(s: Source) -> str:
    """One catalogue source as ``show`` prints it: id, kind, title, where its bytes are, summary."""
    origin = f"{s.origin}{'#' + s.member if s.member else ''}" if s.origin else "no file"
    return f"{s.id} ({s.kind}{'' if s.read else ', unread'}): {s.title} [{origin}]" + (
        f" - {s.summary}" if s.summary else ""
    )
