"""Read hypotheses from a prox run directory or a vault into one pydantic model.

Two input shapes, one model:

* run directory: ``<dir>/hypotheses/H-*.json`` objects with ``id``, ``title``, ``statement``,
  ``mechanism`` and any other fields (kept in ``extra``);
* vault: ``<dir>/hypotheses/*.md`` step-3 nodes, YAML frontmatter (``type: hypothesis``, ``id``,
  ``statement``, ``question``, ``source``, ``locator``, ``quote``), filename ``H-N - Title.md``.
  Only active nodes directly in ``hypotheses/`` are read; ``merged/`` and ``dropped/`` are not.

Bad input policy (each case is tested):

=============================  ==========================  =================================
problem                        run directory (prox)        vault
=============================  ==========================  =================================
not UTF-8                      skip + warning              error
unparseable JSON / YAML        skip + warning              error
missing id / id not a string   skip + warning              error
id does not match filename     skip + warning              error
no text to embed               skip + warning              error
state merged/dropped at top    --                          skip + warning
YAML aliases in frontmatter    --                          error
step-4 residual / constructed  --                          skipped (not from a paper)
two files with one id          error                       error
no hypotheses at all           error                       error
=============================  ==========================  =================================

A run directory skips a bad file because that is prox's documented behaviour; a vault is a
knowledge graph that later steps rewrite, so a node that cannot be read stops the run instead of
silently leaving a hole in it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hypograph.errors import HypographError
from hypograph.ids import ID_RE, id_sort_key
from hypograph.journal import Journal
from hypograph.vault.mint import structuring_lock
from hypograph.vault.nodes import read_node  # the vault's reader: no YAML alias expansion

STEP4_ORIGINS = ("step-4-residual", "step-4-constructed")
WIKILINK_RE = re.compile(r"!?\[\[([^\]|#]+)(?:#[^\]|]*)?(?:\|([^\]]+))?\]\]")


class Hypothesis(BaseModel):
    """One hypothesis, whichever file it came from. ``text`` is what gets embedded."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(pattern=r"^[A-Za-z]+-\d+$")
    title: str = ""
    statement: str = ""
    mechanism: str = ""
    question: str = ""
    path: str = Field(description="file the hypothesis was read from, relative to the input root")
    extra: dict[str, Any] = Field(default_factory=dict, description="every other field, as read")

    @property
    def text(self) -> str:
        """Title, statement and mechanism, whichever are present, joined by single spaces."""
        parts = (strip_wikilinks(p).strip() for p in (self.title, self.statement, self.mechanism))
        return " ".join(p for p in parts if p)


@dataclass
class Corpus:
    """The hypotheses of one input, in id order, plus what was skipped and why."""

    root: Path
    kind: Literal["run-dir", "vault"]
    hypotheses: list[Hypothesis]
    warnings: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [h.id for h in self.hypotheses]

    @property
    def texts(self) -> list[str]:
        return [h.text for h in self.hypotheses]


def strip_wikilinks(text: str) -> str:
    """``[[S-2 - Liu 2023|Liu]]`` -> ``Liu``; ``[[H-3 - Title]]`` -> ``H-3 - Title``."""
    return WIKILINK_RE.sub(lambda m: (m.group(2) or m.group(1)).strip(), text)


def detect_kind(root: Path) -> Literal["run-dir", "vault"]:
    """A directory whose ``hypotheses/`` holds ``H-*.json`` files is a run dir; else ``.md`` files make a vault."""
    hyp = root / "hypotheses"
    if not root.is_dir():
        raise HypographError(f"{root}: not a directory")
    if not hyp.is_dir():
        raise HypographError(f"{root}: no hypotheses/ directory (expected a prox run directory or a vault)")
    if not any(hyp.glob("H-*.json")) and any(hyp.glob("*.md")):
        return "vault"
    return "run-dir"


def load_corpus(root: Path | str) -> Corpus:
    """Read every hypothesis under ``root`` (run dir or vault); raise HypographError on fatal input."""
    root = Path(root)
    kind = detect_kind(root)
    warnings: list[str] = []
    if kind == "vault":
        if Journal(root).pending():  # an interrupted (or running) structuring write: finish it first
            with structuring_lock(root):
                Journal(root).roll_forward()
        items = [_read_vault_node(p, root, warnings) for p in sorted((root / "hypotheses").glob("*.md"))]
    else:
        items = [_read_json_hypothesis(p, root, warnings) for p in sorted((root / "hypotheses").glob("H-*.json"))]
    hyps = [h for h in items if h is not None]
    _reject_duplicate_ids(hyps)
    if not hyps:
        raise HypographError(f"{root / 'hypotheses'}: no hypotheses found")
    hyps.sort(key=lambda h: id_sort_key(h.id))
    return Corpus(root=root, kind=kind, hypotheses=hyps, warnings=warnings)


def _reject_duplicate_ids(hyps: list[Hypothesis]) -> None:
    seen: dict[str, str] = {}
    for h in hyps:
        if h.id in seen:
            raise HypographError(f"{h.path}: field 'id': {h.id} is also the id of {seen[h.id]}")
        seen[h.id] = h.path


def _read_json_hypothesis(path: Path, root: Path, warnings: list[str]) -> Hypothesis | None:
    rel = str(path.relative_to(root))
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        warnings.append(f"{rel}: skipped: not UTF-8 ({e.reason} at byte {e.start})")
        return None
    except json.JSONDecodeError as e:
        warnings.append(f"{rel}: skipped: malformed JSON (line {e.lineno} column {e.colno}: {e.msg})")
        return None
    if not isinstance(data, dict):
        warnings.append(f"{rel}: skipped: expected a JSON object, got {type(data).__name__}")
        return None
    problem = _id_problem(data.get("id"), path.stem)
    if problem:
        warnings.append(f"{rel}: skipped: field 'id': {problem}")
        return None
    fields = {k: data.get(k) for k in ("title", "statement", "mechanism")}
    for k, v in fields.items():
        if v is not None and not isinstance(v, str):
            warnings.append(f"{rel}: skipped: field '{k}': expected a string, got {type(v).__name__}")
            return None
    h = Hypothesis(
        id=data["id"],
        **{k: v or "" for k, v in fields.items()},
        question=data.get("question") if isinstance(data.get("question"), str) else "",
        path=rel,
        extra={k: v for k, v in data.items() if k not in ("id", "title", "statement", "mechanism")},
    )
    if not h.text:
        warnings.append(f"{rel}: skipped: no title, statement or mechanism to embed")
        return None
    return h


def _id_problem(value: Any, filename_id: str) -> str | None:
    if value is None:
        return "missing"
    if not isinstance(value, str) or not ID_RE.match(value):
        return f"{value!r} is not an id like H-12"
    if value != filename_id:
        return f"{value} does not match the filename's id {filename_id}"
    return None


def _read_vault_node(path: Path, root: Path, warnings: list[str]) -> Hypothesis | None:
    rel = str(path.relative_to(root))
    meta = read_node(root, path.relative_to(root)).meta
    filename_id, _, title = path.stem.partition(" - ")
    problem = _id_problem(meta.get("id"), filename_id.strip())
    if problem:
        raise HypographError(f"{rel}: field 'id': {problem}")
    if meta.get("type") != "hypothesis":
        raise HypographError(f"{rel}: field 'type': expected 'hypothesis', got {meta.get('type')!r}")
    state = meta.get("state")
    if state not in (None, "active"):
        warnings.append(f"{rel}: skipped: state {state!r} but the file is not in hypotheses/{state}/")
        return None
    if meta.get("origin") in STEP4_ORIGINS:
        return None  # a residual or constructed member minted at step 4, not a paper's hypothesis
    for k in ("statement", "question", "mechanism"):
        if meta.get(k) is not None and not isinstance(meta[k], str):
            raise HypographError(f"{rel}: field '{k}': expected a string, got {type(meta[k]).__name__}")
    h = Hypothesis(
        id=meta["id"],
        title=title.strip(),
        statement=meta.get("statement") or "",
        mechanism=meta.get("mechanism") or "",
        question=meta.get("question") or "",
        path=rel,
        extra={k: v for k, v in meta.items() if k not in ("id", "statement", "mechanism", "question")},
    )
    if not h.text:
        raise HypographError(f"{rel}: field 'statement': empty, and the filename has no title")
    return h


def corpus_document(corpus: Corpus) -> dict:
    """A JSON-ready snapshot of a corpus (what the ``hypothesis_texts`` asset persists)."""
    return {
        "root": str(corpus.root),
        "kind": corpus.kind,
        "warnings": corpus.warnings,
        "hypotheses": [h.model_dump(mode="json") for h in corpus.hypotheses],
    }


def corpus_from_document(doc: dict) -> Corpus:
    return Corpus(
        root=Path(doc["root"]),
        kind=doc["kind"],
        hypotheses=[Hypothesis.model_validate(h) for h in doc["hypotheses"]],
        warnings=list(doc["warnings"]),
    )


def input_fingerprint(root: Path | str) -> str:
    """A cheap digest of ``hypotheses/`` (names, sizes, mtimes) that changes when any file does."""
    h = hashlib.sha256()
    for p in sorted((Path(root) / "hypotheses").glob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]
