"""Registered inputs: a short, stable id per input folder, its kind, and its content fingerprint.

An input is a folder Hypograph works on: a prox run directory, a vault, a library, or a case
package. Each gets an id (its folder's name made safe, plus a short suffix when two collide) that
is written into the input itself (``.hypograph/input-id``), so a folder moved and registered again
keeps its id, and with it its history. The registry (one JSON object, id -> path and kind) is how
an id is turned back into a folder; it lives in a ``RegistryStore``: a JSON file (``JsonFileStore``,
what a path given to ``Registry`` means) or, for the Dagster code location, the instance's own
storage (``resources/inputs.py``), so that a process on another machine finds it.

Which folder an id belongs to: the id file records, besides the id, the folder it was written for
(``folder <device>:<inode>`` of the input folder). Registering a folder at a new path keeps the id
found in it only when that record names this very folder (a ``mv`` within a file system keeps the
inode). A copy (``cp -r``) carries the file but is another folder: when the id is already
registered it gets an id of its own, whether the original is still in place, moved elsewhere or
gone, and the command says so (``InputRecord.note``) -- so does a folder moved across file systems
or restored from a backup, which cannot be told from a copy. An id file of the older one-line form
is trusted as before (kept unless its registered folder still carries it) and rewritten with the
record at that registration.

Files: ``input-id`` is read as a regular file of at most ``ID_FILE_MAX`` bytes, never through a
symlink (nor through a symlinked ``.hypograph/``, which is refused: ``paths.state_dir``); the
registry as one of at most ``REGISTRY_MAX`` bytes (``atomic.read_regular``). Finding the inputs of
a workspace writes nothing (``new_folders``): registering is ``add``'s.

    registry = Registry(path)
    record = registry.add(Path("demo/vault"))     # InputRecord(id="vault", path=..., kind="vault")
    registry.resolve("vault")                       # Path(".../demo/vault")
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

from hypograph.atomic import open_regular, read_regular, write_json, write_text
from hypograph.errors import HypographError
from hypograph.locks import file_lock
from hypograph.paths import KINDS, LIBRARY_FILE, OURS, Kind, input_kind, state_dir

ID_FILE = Path(OURS) / "input-id"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_VALID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ID_FILE_MAX = 256  # bytes: an id (<= 64) and the folder record it was written for
REGISTRY_MAX = 16 << 20  # bytes: ~100,000 inputs; a larger registry file is refused, not read


@dataclass(frozen=True)
class InputRecord:
    """One registered input: its id (the partition key), its folder and its kind."""

    id: str
    path: Path
    kind: Kind
    note: str | None = field(default=None, compare=False)  # why the id is not the one the folder carried


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


def safe_id(name: str) -> str:
    """A folder name as an id: runs of characters other than letters, digits, ``.``, ``_`` and
    ``-`` become one ``-`` (so ``|``, ``@``, spaces and newlines are safe), at most 40 long."""
    slug = _SAFE.sub("-", name).strip("-._")[:40].rstrip("-._")
    return slug or "input"


class IdFile(NamedTuple):
    """What ``.hypograph/input-id`` holds: the id, and the folder (``device:inode``) it was
    written for (None in an id file of the older one-line form)."""

    id: str
    folder: str | None


def folder_identity(root: Path) -> str:
    """``device:inode`` of the folder ``root`` (what an id file records; a copy has its own)."""
    st = os.stat(root)
    return f"{st.st_dev}:{st.st_ino}"


def id_file_text(input_id: str, root: Path) -> str:
    return f"{input_id}\nfolder {folder_identity(root)}\n"


def read_id_file(root: Path) -> IdFile | None:
    """The id file of ``root`` (None if missing, or if it holds no valid id). A symlinked
    ``.hypograph/`` or ``input-id``, a FIFO or device, or a file over ``ID_FILE_MAX`` bytes is one
    HypographError line naming it; nothing is read through a link."""
    try:
        raw = read_regular(state_dir(root) / ID_FILE.name, ID_FILE_MAX)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        lines = raw.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return None
    input_id = lines[0].strip()
    if not _VALID.match(input_id):
        return None
    folder = next((line[7:].strip() for line in lines[1:] if line.startswith("folder ")), None)
    return IdFile(input_id, folder or None)


def stored_id(root: Path) -> str | None:
    """The id written into ``root`` when it was first registered (None if none, or not an id)."""
    found = read_id_file(root)
    return found.id if found else None


def _carries(root: Path, input_id: str) -> bool:
    """Whether the folder ``root`` still exists and its id file names ``input_id``."""
    try:
        return stored_id(root) == input_id
    except (HypographError, OSError):
        return False


# A person's verdicts on pairs: proximity's adjudication and step 4 read them, so an edit of the file
# is a change of the input (a decision is applied or refused by the next run, never passed over).
REVIEW_FILE = "proximity/review.json"


def fingerprint(root: Path, kind: Kind) -> str:
    """A digest of what the input's assets read, by content (names and bytes, not mtimes):
    ``hypotheses/`` of a run directory, and ``hypothesis-clusters/`` too of a vault, the library
    file, every file of a case package outside ``.hypograph/`` (its confirmation and the drafts a
    person edits included); and a person's ``proximity/review.json`` of each kind with hypotheses.
    Symlinks (but review.json's, which the adjudication follows) and special files are not followed or read."""
    root = Path(root)
    h = hashlib.sha256()
    for rel, path in _fingerprinted_files(root, kind):
        h.update(f"{rel}\0".encode())
        # a link or FIFO swapped in after the listing is refused, not read; review.json is read
        # through a link as the adjudication reads it
        fd = open_regular(path, follow=rel == REVIEW_FILE)
        try:
            while block := os.read(fd, 1 << 20):
                h.update(block)
        finally:
            os.close(fd)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _fingerprinted_files(root: Path, kind: Kind) -> list[tuple[str, str]]:
    """(path relative to ``root``, path) of each regular file ``fingerprint`` reads, in its order.
    A run directory's or vault's folders are listed with ``os.scandir``, whose entries say what they
    are without a system call each (no ``Path`` object per file either)."""
    if kind in ("library", "case"):
        paths = (
            [root / LIBRARY_FILE]
            if kind == "library"
            else sorted(p for p in root.rglob("*") if OURS not in p.relative_to(root).parts)
        )
        out = [(str(p.relative_to(root)), str(p)) for p in paths if _regular(p)]
        return out + _review(root) if kind == "library" else out
    out = []
    for name in ("hypotheses", "hypothesis-clusters") if kind == "vault" else ("hypotheses",):
        folder = root / name
        if not folder.is_dir():
            continue
        with os.scandir(folder) as entries:
            found = sorted((e.name, e) for e in entries if not e.is_symlink() and e.is_file())
        out.extend((f"{name}/{file_name}", e.path) for file_name, e in found)
    return out + _review(root)


def _review(root: Path) -> list[tuple[str, str]]:
    """A person's review.json when there is one (absent, the usual case: the digest is the one it
    was before the file was counted)."""
    path = root / REVIEW_FILE
    return [(REVIEW_FILE, str(path))] if os.path.isfile(path) else []


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


class RegistryStore(Protocol):
    """Where the registry's JSON object is kept: ``read`` its bytes (None when there is none yet),
    ``write`` a new object whole, ``lock`` around a read-modify-write; ``name`` is what an error
    line calls it."""

    name: str

    def read(self) -> bytes | None: ...

    def write(self, entries: dict) -> None: ...

    def lock(self) -> AbstractContextManager: ...


class JsonFileStore:
    """The registry as one JSON file, read bounded (``REGISTRY_MAX``), written atomically, under
    the lock file beside it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.name = str(self.path)

    def read(self) -> bytes | None:
        try:
            return read_regular(self.path, REGISTRY_MAX, f"{self.path} (the input registry)")
        except (FileNotFoundError, NotADirectoryError):
            return None

    def write(self, entries: dict) -> None:
        write_json(self.path, entries)

    def lock(self) -> AbstractContextManager:
        return file_lock(self.path.with_name(self.path.name + ".lock"))


class Registry:
    """id -> (path, kind) of every registered input, kept in ``store`` (a path: that JSON file),
    written whole under the store's lock."""

    def __init__(self, store: RegistryStore | Path | str):
        self.store = JsonFileStore(store) if isinstance(store, (str, os.PathLike)) else store
        self.ignored: list[str] = []  # one line per malformed entry the last read passed over

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
        The id written in the folder is kept when it was written for this folder, so a moved folder
        keeps its id; a copy of a registered folder gets an id of its own (see the module's rule)."""
        return self.add_all([(root, kind)])[0]

    def add_all(self, roots: list[tuple[Path, Kind | None]]) -> list[InputRecord]:
        """``add`` for many folders with one read and at most one write of the registry. A
        symlinked ``.hypograph/`` (or id file) is refused before anything is written."""
        resolved = [(Path(root).resolve(), kind) for root, kind in roots]
        with self.store.lock():
            entries = self._read()
            before = dict(entries)
            out = []
            for root, given in resolved:
                kind = given or input_kind(root)
                found = read_id_file(root)  # checks .hypograph/ is no symlink, before any write
                input_id, note = self._choose_id(root, entries, found)
                text = id_file_text(input_id, root)
                if found is None or (found.id, found.folder) != (input_id, folder_identity(root)):
                    write_text(state_dir(root) / ID_FILE.name, text)
                entries[input_id] = {"path": str(root), "kind": kind}
                out.append(InputRecord(input_id, root, kind, note))
            if entries != before:
                self.store.write(dict(sorted(entries.items())))
        return out

    def new_folders(self, folders: list[Path]) -> list[Path]:
        """Those of ``folders`` not registered at their path (resolved); reads, writes nothing."""
        known = {e["path"] for e in self._read().values()}
        return [f for f in folders if str(Path(f).resolve()) not in known]

    @staticmethod
    def _choose_id(root: Path, entries: dict, found: IdFile | None) -> tuple[str, str | None]:
        """(the id for ``root``, a note when the id file it carries was not taken)."""
        for input_id, entry in entries.items():
            if entry["path"] == str(root):
                return input_id, None
        if found is not None:
            own = found.id
            other = entries.get(own)
            if other is None:
                return own, None  # first registration here: nothing to inherit
            if found.folder == folder_identity(root):
                return own, None  # the folder it was written for, moved
            if found.folder is None and not _carries(Path(other["path"]), own):
                return own, None  # an older id file: a move, as the old path no longer carries it
        input_id = Registry._free_id(root, entries)
        note = None
        if found is not None:
            note = (
                f"{root / ID_FILE}: names input {found.id!r} ({entries[found.id]['path']}) but was "
                f"written for another folder (a copy, or a move across file systems); "
                f"registered as a new input {input_id!r}"
            )
        return input_id, note

    @staticmethod
    def _free_id(root: Path, entries: dict) -> str:
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
        name = self.store.name
        try:
            raw = self.store.read()
            raw = json.loads(raw.decode("utf-8")) if raw is not None else {}
        except RecursionError:
            raise HypographError(f"{name}: not usable JSON (nested too deep); move it aside") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise HypographError(f"{name}: not valid JSON ({e}); move it aside, then `hypograph add`") from None
        if not isinstance(raw, dict):
            raise HypographError(f"{name}: not an input registry (expected id -> {{path, kind}})")
        bad = _malformed(raw)
        self.ignored = [f"{name}: entry {i!r}: {why}; ignored" for i, why in bad.items()]
        return {i: e for i, e in raw.items() if i not in bad}


def _malformed(raw: dict) -> dict[str, str]:
    """The registry entries no record can be made of (id -> why, naming the field): each is
    ignored, so one hand-edited entry never stops every command and sensor that reads the rest."""
    bad = {}
    for input_id, e in raw.items():
        if not _VALID.match(input_id):
            bad[input_id] = "not an input id"
        elif not isinstance(e, dict):
            bad[input_id] = "expected {path, kind}"
        elif not isinstance(e.get("path"), str) or not e["path"]:
            bad[input_id] = f"field 'path': {e.get('path')!r} is not a path"
        elif e.get("kind") not in KINDS:
            bad[input_id] = f"field 'kind': {e.get('kind')!r} is not one of {', '.join(KINDS)}"
    return bad
