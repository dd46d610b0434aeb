"""Read hypotheses from a prox run directory or a vault into one record type, ``Hypothesis``.

Two input shapes, one record:

* run directory: ``<dir>/hypotheses/H-*.json`` objects with ``id``, ``title``, ``statement``,
  ``mechanism`` and any other fields (kept in ``extra``);
* vault: ``<dir>/hypotheses/*.md`` step-3 nodes, YAML frontmatter (``type: hypothesis``, ``id``,
  ``statement``, ``question``, ``source``, ``locator``, ``quote``), filename ``H-N - Title.md``.
  Only active nodes directly in ``hypotheses/`` are read; ``merged/`` and ``dropped/`` are not.

Bad input policy (each case is tested):

=============================  ==========================  =================================
problem                        run directory (prox)        vault
=============================  ==========================  =================================
not UTF-8 (content or name)    skip + warning              error
unparseable JSON / YAML        skip + warning              error
too deep, lone surrogate,      skip + warning              error
huge number, unreadable file
missing id / id not a string   skip + warning              error
id does not match filename     skip + warning              error
``h-1.json``, ``H-1.JSON``     skip + warning              --
no text to embed               skip + warning              error
state merged/dropped at top    --                          skip + warning
YAML aliases, duplicate keys   --                          error
step-4 residual / constructed  --                          skipped (not from a paper)
two files with one id          error                       error
(``H-01`` and ``H-1`` too)
symlink leading outside        skip + warning              error
symlinked folder               error                       error
hidden file (``.x``, ``._x``)  ignored                     ignored
no hypotheses at all           error                       error
=============================  ==========================  =================================

A run directory skips a bad file because that is prox's documented behaviour (``load_corpus``'s
default; ``hypograph`` reads with ``skip_bad=False`` unless ``--skip-bad-files``: the first such
file is then one error line naming it); a vault is a
knowledge graph that later steps rewrite, so a node that cannot be read stops the run instead of
silently leaving a hole in it.
"""

from __future__ import annotations

import datetime
import errno
import json
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import orjson

from hypograph.errors import HypographError
from hypograph.ids import ID_RE, canonical_id, id_sort_key
from hypograph.limits import data_problem, encodable
from hypograph.paths import HYPOTHESIS_FOLDERS, RUN_DIR_FOLDERS, input_kind, scan_names

# The vault's modules (YAML) are imported by the vault branch of load_corpus: prox on a run dir
# starts without them.

TEXT_FIELDS = ("title", "statement", "mechanism")  # a run dir's fields joined into the text embedded
NODE_ID_RE = re.compile(r"^(?:[A-Za-z]+-\d+|B\d+(?:-M\d+)?)$")  # node ids; library B3, B3-M2
WIKILINK_RE = re.compile(r"!?\[\[([^\]|#]+)(?:#[^\]|]*)?(?:\|([^\]]+))?\]\]")


@dataclass(frozen=True, kw_only=True)
class Hypothesis:
    """One hypothesis, whichever file it came from. ``text`` is what gets embedded.

    A dataclass, not a pydantic model: the readers check each field of a file before building one
    (100k of them are not validated twice), and ``prox embed`` starts without pydantic (0.1 s).
    """

    id: str
    title: str = ""
    statement: str = ""
    mechanism: str = ""
    question: str = ""
    path: str  # the file the hypothesis was read from, relative to the input root
    extra: dict[str, Any] = field(default_factory=dict)  # every other field, as read

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not NODE_ID_RE.match(self.id):
            raise ValueError(f"{self.path}: field 'id': {self.id!r} is not a node id (H-12, B3, B3-M2)")

    @cached_property
    def text(self) -> str:
        """Title, statement and mechanism, whichever are present, joined by single spaces."""
        parts = [
            strip_wikilinks(self.title).strip(),
            strip_wikilinks(self.statement).strip(),
            strip_wikilinks(self.mechanism).strip(),
        ]
        return " ".join(filter(None, parts))

    def document(self) -> dict:
        """The fields as JSON values (dates in ``extra``, which a vault's YAML may hold, as ISO text)."""
        doc = {k: getattr(self, k) for k in ("id", "title", "statement", "mechanism", "question", "path")}
        doc["extra"] = json.loads(json.dumps(self.extra, default=_json_value))
        return doc


def _json_value(value: Any) -> Any:
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)


@dataclass
class Corpus:
    """The hypotheses of one input, in id order, plus what was skipped and why."""

    root: Path
    kind: Literal["run-dir", "vault", "library"]
    hypotheses: list[Hypothesis]
    warnings: list[str] = field(default_factory=list)
    files_read: int | None = None  # the hypothesis files the reader listed and read (None: one library file)

    @property
    def ids(self) -> list[str]:
        return [h.id for h in self.hypotheses]

    @property
    def texts(self) -> list[str]:
        return [h.text for h in self.hypotheses]


def strip_wikilinks(text: str) -> str:
    """``[[S-2 - Liu 2023|Liu]]`` -> ``Liu``; ``[[H-3 - Title]]`` -> ``H-3 - Title``."""
    if "[[" not in text:  # the common case, without a regex pass (100k files: ~1 s)
        return text
    return WIKILINK_RE.sub(lambda m: (m.group(2) or m.group(1)).strip(), text)


def load_corpus(root: Path | str, skip_bad: bool = True) -> Corpus:
    """Read every hypothesis under ``root`` (run dir or vault); raise HypographError on fatal input.
    ``skip_bad`` False (``hypograph``'s default; prox keeps the seed's skipping): a run directory's
    file the table above skips is fatal too, one line naming it (``refuse_skipped``)."""
    root = Path(root)
    kind = input_kind(root, HYPOTHESIS_FOLDERS)
    warnings: list[str] = []
    if kind == "vault":
        from hypograph.vault.locking import reading_lock
        from hypograph.vault.vault import node_files

        # never in the middle of a structuring's write; an interrupted one's journal finished first
        with reading_lock(root):
            files = [rel for rel in node_files(root) if rel.parent == Path("hypotheses")]
            items = [_read_vault_node(root / rel, root, warnings) for rel in files]
        count = len(files)
    else:
        names = _run_dir_files(root, warnings)
        raws = _read_files(root / "hypotheses", names)
        items = [_json_hypothesis(name, raw, warnings) for name, raw in zip(names, raws, strict=True)]
        count = len(names)
        if not skip_bad:
            refuse_skipped(root, warnings)
    hyps = [h for h in items if h is not None]
    _reject_duplicate_ids(hyps)
    if not hyps:
        skipped = f" ({len(warnings)} file(s) skipped, first: {warnings[0]})" if warnings else ""
        raise HypographError(f"{root / 'hypotheses'}: no hypotheses found{skipped}")
    hyps.sort(key=lambda h: id_sort_key(h.id))
    return Corpus(root=root, kind=kind, hypotheses=hyps, warnings=warnings, files_read=count)


SKIP_FLAG = "--skip-bad-files"  # hypograph's flag (skip_bad_files in the proximity settings)


def refuse_skipped(root: Path, warnings: list[str]) -> None:
    """A run directory's bad file is a bad input: one HypographError line naming the first (and
    how many more), what to do, and that nothing was written."""
    if not warnings:
        return
    rel, _, why = warnings[0].partition(": skipped: ")
    more = f" ({len(warnings) - 1} more bad file(s) besides)" if len(warnings) > 1 else ""
    raise HypographError(
        f"{Path(root) / rel}: {why or warnings[0]}{more}; a bad input file stops the run, nothing written: "
        f"fix it, or pass {SKIP_FLAG} (Launchpad: skip_bad_files) to skip it and go on"
    )


def _run_dir_files(root: Path, warnings: list[str]) -> list[str]:
    """The names of the ``hypotheses/H-*.json`` files of a run dir, by the one input scan
    (``hypograph.paths``): a symlinked folder is refused, a symlinked file leading outside skipped
    with a warning, and a file almost named so (``h-1.json``, ``H-1.JSON``) named in a warning;
    other files are ignored. Plain strings: 100k files cost no path object each."""
    out = []
    for rel_dir, name in scan_names(
        root, bad=lambda rel, why: warnings.append(f"{rel}: skipped: {why}"), only=RUN_DIR_FOLDERS
    ):
        lower = name.lower()
        if str(rel_dir) != "hypotheses" or not lower.endswith(".json"):
            continue
        if not encodable(name):
            warnings.append(f"hypotheses/{ascii(name)}: skipped: the file name is not UTF-8")
        elif name.startswith("H-") and name.endswith(".json"):  # fnmatch's H-*.json
            out.append(name)
        elif lower.startswith("h-"):  # notes.json is no hypothesis; h-1.json meant one
            warnings.append(
                f"hypotheses/{name}: skipped: a hypothesis file is named H-<number>.json (capital H, .json)"
            )
    return out


def _reject_duplicate_ids(hyps: list[Hypothesis]) -> None:
    """Two files with one id (``H-01`` and ``H-1`` are one id spelled twice) is an error naming both."""
    seen: dict[str, Hypothesis] = {}
    for h in hyps:
        other = seen.setdefault(canonical_id(h.id), h)
        if other is not h:
            spelled = "" if other.id == h.id else f" (as {other.id})"
            raise HypographError(f"{h.path}: field 'id': {h.id} is also the id of {other.path}{spelled}")


def _read_files(folder: Path, names: list[str]) -> list[bytes | OSError]:
    """The bytes of each file ``folder / names[k]``, or the error reading it (a warning later)."""
    from hypograph.progress import stage

    out: list[bytes | OSError] = []
    prefix = os.path.join(folder, "")
    with stage("read hypotheses", total=len(names), unit="files") as s:
        for k, name in enumerate(names):
            try:
                out.append(_file_bytes(prefix + name))
            except OSError as e:
                out.append(e)
            if k % 1000 == 999:  # a bar on 100k files; nothing per file
                s.advance(1000)
    return out


MAX_FILE_BYTES = 16 << 20  # a hypothesis file is a few kB of text; a larger one is skipped, saying so


def _file_bytes(path: str) -> bytes:
    """The bytes of the file ``path`` through plain system calls, cheaper per file than
    ``Path.read_bytes`` (which counts at 100k files), at most ``MAX_FILE_BYTES`` of them (more is
    an OSError, a warning naming the file). ``O_NONBLOCK``: a FIFO put in a file's place reads as
    empty rather than waiting for a writer."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, MAX_FILE_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_FILE_BYTES:
                raise OSError(errno.EFBIG, f"over the {MAX_FILE_BYTES}-byte limit for a hypothesis file")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _parse_json(raw: bytes | OSError) -> tuple[Any, str | None]:
    """(data, None) or (None, why the file cannot be used): every failure of reading (``raw`` is
    the error) or parsing one file, so a bad file is a warning and never stops the run."""
    if isinstance(raw, OSError):
        return None, f"cannot be read ({raw.strerror or type(raw).__name__})"
    try:
        try:  # orjson: 4x faster; anything it refuses goes to the standard library for the message
            data = orjson.loads(raw)
            if isinstance(data, dict) and not any(isinstance(v, (dict, list)) for v in data.values()):
                return data, None  # flat, and orjson refuses lone surrogates: nothing for data_problem
        except orjson.JSONDecodeError:
            data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        return None, _parse_problem(e)
    problem = data_problem(data)
    return (None, f"malformed JSON ({problem})") if problem else (data, None)


def _parse_problem(e: ValueError | RecursionError) -> str:
    """Why a file's bytes are no JSON, in a warning's words."""
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 ({e.reason} at byte {e.start})"
    if isinstance(e, json.JSONDecodeError):
        return f"malformed JSON (line {e.lineno} column {e.colno}: {e.msg})"
    if isinstance(e, RecursionError):
        return "malformed JSON (nested too deeply to read)"
    return f"malformed JSON ({str(e).split(';')[0]})"  # e.g. an integer of more digits than Python converts


def _json_hypothesis(name: str, raw: bytes | OSError, warnings: list[str]) -> Hypothesis | None:
    """The hypothesis in the file ``name`` of a run dir's ``hypotheses/`` (its bytes ``raw``, or the
    error reading it), or None with a warning."""
    rel = f"hypotheses/{name}"
    data, problem = _parse_json(raw)
    if problem:
        warnings.append(f"{rel}: skipped: {problem}")
        return None
    if not isinstance(data, dict):
        warnings.append(f"{rel}: skipped: expected a JSON object, got {type(data).__name__}")
        return None
    problem = _id_problem(data.get("id"), name[: -len(".json")])
    if problem:
        warnings.append(f"{rel}: skipped: field 'id': {problem}")
        return None
    fields = {}
    for k in TEXT_FIELDS:
        v = data.get(k)
        if v is not None and not isinstance(v, str):
            warnings.append(f"{rel}: skipped: field '{k}': expected a string, got {type(v).__name__}")
            return None
        fields[k] = v or ""
    question = data.get("question")
    extra = dict(data)
    for k in ("id", *TEXT_FIELDS):
        extra.pop(k, None)
    h = Hypothesis(
        id=data["id"], **fields, question=question if isinstance(question, str) else "", path=rel, extra=extra
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
    from hypograph.vault.node_view import CONSTRUCTED, RESIDUAL, NodeView
    from hypograph.vault.nodes import read_node  # the vault's reader: no YAML alias expansion

    rel = str(path.relative_to(root))
    node = read_node(root, path.relative_to(root))
    meta, view = node.meta, NodeView(node)
    filename_id, _, title = path.stem.partition(" - ")
    problem = _id_problem(meta.get("id"), filename_id.strip())
    if problem:
        raise HypographError(f"{rel}: field 'id': {problem}")
    if meta.get("type") != "hypothesis":
        raise HypographError(f"{rel}: field 'type': expected 'hypothesis', got {meta.get('type')!r}")
    if not view.open:
        warnings.append(f"{rel}: skipped: state {view.state!r} but the file is not in hypotheses/{view.state}/")
        return None
    if view.origin in (RESIDUAL, CONSTRUCTED):
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


def corpus_json(corpus: Corpus) -> bytes:
    """The JSON snapshot of a corpus (what the ``hypothesis_texts`` asset persists): its root, kind,
    warnings and each hypothesis's fields, ``extra`` as JSON values (dates, which a vault's YAML
    may hold, as ISO text; sets as sorted lists; anything else as its text)."""
    doc = {
        "root": str(corpus.root),
        "kind": corpus.kind,
        "warnings": corpus.warnings,
        "hypotheses": [
            {k: getattr(h, k) for k in ("id", "title", "statement", "mechanism", "question", "path", "extra")}
            for h in corpus.hypotheses
        ],
    }
    options = (
        orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS | orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    )
    try:  # the bytes json.dumps(indent=2, ensure_ascii=False) writes, written far faster
        return orjson.dumps(doc, default=_json_value, option=options)
    except orjson.JSONEncodeError:  # integers past 64 bits, lone surrogates: the standard library writes them
        return (json.dumps(doc, default=_json_value, indent=2) + "\n").encode("ascii")


def corpus_from_json(raw: bytes) -> Corpus:
    """The corpus of a ``corpus_json`` snapshot."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:  # what only the standard library writes (see corpus_json)
        doc = json.loads(raw)
    return Corpus(
        root=Path(doc["root"]),
        kind=doc["kind"],
        hypotheses=[Hypothesis(**h) for h in doc["hypotheses"]],
        warnings=list(doc["warnings"]),
    )
