"""Registered inputs: a short, stable id per input folder, its kind, and its content fingerprint.

An input is a folder Hypograph works on: a prox run directory, a vault, a library, or a case
package. Each gets an id (its folder's name made safe, plus a short suffix when two collide) that
is written into the input itself (``.hypograph/input-id``), so a folder moved or mounted elsewhere
and registered again keeps its id, and with it its history. The registry (one JSON file, id ->
path and kind) is how an id is turned back into a folder.

    registry = Registry(path)
    record = registry.add(Path("demo/vault"))     # InputRecord(id="vault", path=..., kind="vault")
    registry.resolve("vault")                       # Path(".../demo/vault")
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from hypograph.atomic import write_json, write_text
from hypograph.errors import HypographError
from hypograph.locks import file_lock
from hypograph.paths import OURS, detect_kind

Kind = Literal["run-dir", "vault", "library", "case"]
KINDS: tuple[Kind, ...] = ("run-dir", "vault", "library", "case")
WITH_HYPOTHESES: tuple[Kind, ...] = ("run-dir", "vault", "library")  # the kinds proximity embeds
ID_FILE = Path(OURS) / "input-id"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_VALID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
LIBRARY_FILE = "hypothesis_library.json"
CASE_MANIFEST = "manifest.json"


@dataclass(frozen=True)
class InputRecord:
    """One registered input: its id (the partition key), its folder and its kind."""

    id: str
    path: Path
    kind: Kind


class Sub(NamedTuple):
    """A round or revision key taken apart: the input's id and ``r0001``."""

    input: str
    sub: str


def sub_key(input_id: str, sub: str) -> str:
    """``vault-ab12`` + ``r0003`` -> ``vault-ab12/r0003`` (input ids never hold a ``/``)."""
    return f"{input_id}/{sub}"


def split_sub_key(key: str) -> Sub:
    """``lib/r0003`` -> (``lib``, ``r0003``); a one-line error for a key of another shape."""
    input_id, sep, sub = (key or "").rpartition("/")
    if not sep or not input_id or not sub:
        raise HypographError(f"partition {key!r}: expected <input id>/rNNNN")
    return Sub(input_id, sub)


def input_kind(root: Path) -> Kind:
    """What ``root`` is: a case package (``manifest.json``), a run directory or a vault
    (``hypotheses/``), or a library (``hypothesis_library.json``); a one-line error otherwise."""
    root = Path(root)
    if not root.is_dir():
        raise HypographError(f"{root}: no such directory")
    if (root / CASE_MANIFEST).is_file():
        return "case"
    if (root / "hypotheses").is_dir():
        return detect_kind(root)
    if (root / LIBRARY_FILE).is_file() or (root / OURS / "library").is_dir():
        return "library"
    raise HypographError(f"{root}: not an input (no hypotheses/, {LIBRARY_FILE} or {CASE_MANIFEST})")


def safe_id(name: str) -> str:
    """A folder name as an id: runs of characters other than letters, digits, ``.``, ``_`` and
    ``-`` become one ``-`` (so ``|``, ``@``, spaces and newlines are safe), at most 40 long."""
    slug = _SAFE.sub("-", name).strip("-._")[:40].rstrip("-._")
    return slug or "input"


def stored_id(root: Path) -> str | None:
    """The id written into ``root`` when it was first registered (None if none, or not an id)."""
    try:
        text = (Path(root) / ID_FILE).read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return text if _VALID.match(text) else None


def fingerprint(root: Path, kind: Kind) -> str:
    """A digest of what the input's assets read, by content (names and bytes, not mtimes):
    ``hypotheses/`` of a run directory or vault, the library file, every file of a case package
    outside ``.hypograph/``. Symlinks and special files are not followed or read."""
    root = Path(root)
    h = hashlib.sha256()
    if kind == "library":
        files = [root / LIBRARY_FILE]
    elif kind == "case":
        files = sorted(p for p in root.rglob("*") if OURS not in p.relative_to(root).parts)
    else:
        files = sorted((root / "hypotheses").iterdir()) if (root / "hypotheses").is_dir() else []
    for p in files:
        if p.is_symlink() or not p.is_file():
            continue
        h.update(f"{p.relative_to(root)}\0".encode())
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()[:16]


class Registry:
    """id -> (path, kind) of every registered input, kept in one JSON file (written atomically
    under its lock)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def records(self) -> list[InputRecord]:
        """Every registered input, by id."""
        return [InputRecord(i, Path(e["path"]), e["kind"]) for i, e in sorted(self._read().items())]

    def of_kind(self, *kinds: Kind) -> list[InputRecord]:
        return [r for r in self.records() if r.kind in kinds]

    def get(self, input_id: str) -> InputRecord | None:
        entry = self._read().get(input_id)
        return InputRecord(input_id, Path(entry["path"]), entry["kind"]) if entry else None

    def resolve(self, input_id: str) -> Path:
        """The folder of ``input_id``; a one-line error if unknown or gone."""
        record = self.get(input_id)
        if record is None:
            raise HypographError(f"input {input_id!r} is not registered (hypograph add PATH)")
        if not record.path.is_dir():
            raise HypographError(f"input {input_id}: {record.path} is gone (moved? `hypograph add` its new path)")
        return record.path

    def add(self, root: Path, kind: Kind | None = None) -> InputRecord:
        """Register ``root`` (idempotent) as ``kind`` (default: what it holds) and return its record.
        The id written in the folder is kept, so a moved folder keeps its id; a copy of a registered
        folder (same id file, the original still in place) gets an id of its own."""
        return self.add_all([(root, kind)])[0]

    def add_all(self, roots: list[tuple[Path, Kind | None]]) -> list[InputRecord]:
        """``add`` for many folders with one read and at most one write of the registry."""
        resolved = [(Path(root).resolve(), kind) for root, kind in roots]
        with file_lock(self.path.with_name(self.path.name + ".lock")):
            entries = self._read()
            before = dict(entries)
            out = []
            for root, given in resolved:
                kind = given or input_kind(root)
                input_id = self._choose_id(root, entries)
                if stored_id(root) != input_id:
                    write_text(root / ID_FILE, input_id + "\n")
                entries[input_id] = {"path": str(root), "kind": kind}
                out.append(InputRecord(input_id, root, kind))
            if entries != before:
                write_json(self.path, dict(sorted(entries.items())))
        return out

    @staticmethod
    def _choose_id(root: Path, entries: dict) -> str:
        for input_id, entry in entries.items():
            if entry["path"] == str(root):
                return input_id
        own = stored_id(root)
        if own is not None:
            other = entries.get(own)
            other_path = Path(other["path"]) if other else None
            if other is None or other_path is None or stored_id(other_path) != own:
                return own  # first registration, or a move: the old path no longer carries this id
        base = safe_id(root.name)
        if base not in entries:
            return base
        suffix = hashlib.sha256(str(root).encode()).hexdigest()
        for n in range(6, len(suffix)):
            candidate = f"{base}-{suffix[:n]}"
            if candidate not in entries:
                return candidate
        raise HypographError(f"{root}: no free input id")  # pragma: no cover - 2^24 collisions

    def _read(self) -> dict:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise HypographError(f"{self.path}: not valid JSON ({e}); move it aside, then `hypograph add`") from None
        if not isinstance(raw, dict) or not all(
            isinstance(v, dict) and {"path", "kind"} <= v.keys() for v in raw.values()
        ):
            raise HypographError(f"{self.path}: not an input registry (expected id -> {{path, kind}})")
        return raw
