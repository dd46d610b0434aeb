"""A case package on disk, read and written only through this module.

```
CASE_DIR/
  manifest.json                          package_id, analysis_revision, package_generation, phase,
                                         target_vault (optional: the vault batches are minted into),
                                         artifacts: {name: {"path", "sha256"}} (current pointers)
  case/rNNNN/                            the original inputs, never rewritten (ZIP archives whole)
  analysis/interpretation/NNNN/          catalogue.json, interpretation.json, draft.json (the
                                         interpreter's or a person's draft; revision NNNN)
  analysis/hypotheses/NNNN/              policy.json, context.json, rounds/<attempt>.json,
                                         hypotheses.json, registry.json, hypotheses.md,
                                         dispatch.json, errors/<attempt>.json
  analysis/.journal.json                 a write in progress (rolled forward by the next writer)
  .hypograph/                            tool state: lock, LLM traces and cache
```

Confinement: every path the package names (manifest artifacts, bindings, catalogue origins) is
read only through ``confined``: relative, no ``..``, resolving inside the package, a regular file
(``O_NONBLOCK`` + ``fstat``: no device, FIFO or socket), its size checked before it is read,
hashed in a stream. A refusal is one HypographError line naming the artifact.

Every write of package files is one journal plan (``hypograph.journal``): saved whole, then
applied, so a crash leaves either the old package or a plan the next writer finishes. Files
the tool does not own are never opened for writing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ValidationError

from hypograph.atomic import open_regular, remove_stale_temps
from hypograph.case.models import Catalogue, Interpretation
from hypograph.case.publish import HookedJournal
from hypograph.errors import HypographError, NotDone
from hypograph.journal import Journal, Step
from hypograph.limits import data_problem
from hypograph.locks import file_lock
from hypograph.paths import OURS, state_dir

MANIFEST = "manifest.json"
CASE_WRITES = ("analysis/**/*", "case/**/*")  # what the case lock's holder writes (temp files swept)
FORMAT = "hypograph-case-package/1"
JOURNAL = "analysis/.journal.json"
ARTIFACT_ORDER = (
    "catalogue",
    "interpretation",
    "hypothesis_policy",
    "hypothesis_context",
    "hypotheses",
    "hypothesis_registry",
    "hypotheses_summary",
)
HYPOTHESIS_POINTERS = ARTIFACT_ORDER[2:]
PHASE_INTERPRETED = "CASE_INTERPRETED"
PHASE_GENERATING = "GENERATING_HYPOTHESES"
TARGET_VAULT = "target_vault"  # optional manifest field: the absolute path of the vault batches flow into
# No package JSON needs more; a bigger one (or a FIFO, a device) is refused before it is read.
MAX_JSON_BYTES = 64 << 20


class CaseBusy(NotDone):
    """Another process holds the case lock: the step is DEFERRED (exit 2), nothing was done."""

    status = "DEFERRED"


def json_text(value) -> str:
    """The one JSON text form of package files: indented UTF-8, key order as given, final newline."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def sha_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _open_regular(path: Path, what: str) -> int:
    """A read-only descriptor of the regular file ``path`` (``hypograph.atomic.open_regular``; the
    path is confined before, so a link is followed)."""
    return open_regular(path, what, follow=True)


def _stream_sha(fd: int) -> str:
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def path_problem(rel) -> str | None:
    """Why ``rel`` (a path a package file names) may not be followed at all, or None: it must be a
    non-empty relative POSIX path without ``..``, NUL or backslash."""
    if not isinstance(rel, str) or not rel:
        return "is not a path"
    pure = PurePosixPath(rel)
    if pure.is_absolute() or Path(rel).is_absolute() or rel.startswith("~"):
        return "is an absolute path; a package names only its own files"
    if ".." in pure.parts:
        return "leaves the package ('..')"
    if "\\" in rel or "\0" in rel:
        return "holds a backslash or NUL"
    return None


def rev_dir(kind: str, revision: int) -> str:
    """``analysis/<kind>/NNNN`` (kind: interpretation or hypotheses)."""
    return f"analysis/{kind}/{revision:04d}"


class CasePackage:
    def __init__(self, root: Path | str, case_id: str | None = None):
        self.root = Path(root)
        self.case_id = case_id or self.root.name
        self.state_dir = self.root / OURS
        self.max_json_bytes = MAX_JSON_BYTES

    # -- reading ---------------------------------------------------------------------------------

    def exists(self) -> bool:
        return (self.root / MANIFEST).is_file()

    def manifest(self) -> dict:
        """The manifest, checked field by field."""
        m = self.read_json(MANIFEST)
        if not isinstance(m, dict):
            raise HypographError(f"{self.root / MANIFEST}: not a JSON object")
        for key, kind in (
            ("package_id", str),
            ("analysis_revision", int),
            ("package_generation", int),
            ("phase", str),
            ("artifacts", dict),
        ):
            if not isinstance(m.get(key), kind) or isinstance(m.get(key), bool):
                raise HypographError(f"{self.root / MANIFEST}: field '{key}': missing or not a {kind.__name__}")
        if m["analysis_revision"] < 1:
            raise HypographError(f"{self.root / MANIFEST}: field 'analysis_revision': must be at least 1")
        for name, ptr in m["artifacts"].items():
            if not (isinstance(ptr, dict) and isinstance(ptr.get("path"), str) and isinstance(ptr.get("sha256"), str)):
                raise HypographError(f"{self.root / MANIFEST}: field 'artifacts.{name}': needs 'path' and 'sha256'")
            problem = path_problem(ptr["path"])
            if problem:
                raise HypographError(
                    f"{self.root / MANIFEST}: field 'artifacts.{name}.path': {ptr['path']!r} {problem}"
                )
        target = m.get(TARGET_VAULT)
        if target is not None and not (isinstance(target, str) and Path(target).is_absolute()):
            raise HypographError(
                f"{self.root / MANIFEST}: field '{TARGET_VAULT}': must be an absolute path, got {target!r}"
            )
        return m

    def target_vault(self, manifest: dict | None = None) -> Path | None:
        """The vault this case's batches are minted into (``manifest.json`` field ``target_vault``:
        the vault a case was made from, or the last ``batch --into``), or None."""
        target = (manifest or self.manifest()).get(TARGET_VAULT)
        return Path(target) if target else None

    def confined(self, rel, what: str | None = None) -> Path:
        """``root/rel`` once it is known to stay inside the package: a relative path without
        ``..`` whose real location (symlinks resolved) is inside the package's real folder.
        Raises one HypographError line naming the artifact (``what``) otherwise. It may not exist."""
        named = f"{what}: " if what else ""
        problem = path_problem(rel)
        if problem:
            raise HypographError(f"{self.root}: {named}path {rel!r} {problem}; not read")
        path = self.root / rel
        real, base = Path(os.path.realpath(path)), Path(os.path.realpath(self.root))
        if real != base and base not in real.parents:
            raise HypographError(f"{path}: {named}resolves to {real}, outside the package; not read")
        return real

    def _open(self, rel, what: str | None, max_bytes: int | None) -> int:
        """A descriptor of the confined regular file ``rel`` (FileNotFoundError if missing), its
        size checked against ``max_bytes`` before any byte is read."""
        real = self.confined(rel, what)
        fd = _open_regular(real, f"{self.root / rel}" + (f" ({what})" if what and what != rel else ""))
        size = os.fstat(fd).st_size
        if max_bytes is not None and size > max_bytes:
            os.close(fd)
            raise HypographError(
                f"{self.root / rel}: {size} bytes, over the {max_bytes}-byte limit for "
                f"{what or 'a package file'}; not read"
            )
        return fd

    def read_bytes(self, rel, what: str | None = None, max_bytes: int | None = None) -> bytes:
        """The bytes of the confined regular file ``rel`` (default limit: ``max_json_bytes``)."""
        try:
            fd = self._open(rel, what, self.max_json_bytes if max_bytes is None else max_bytes)
        except FileNotFoundError:
            raise HypographError(f"{self.root / rel}: missing" + (f" ({what})" if what else "")) from None
        with os.fdopen(fd, "rb") as fh:
            return fh.read()

    def read_head(self, rel, n: int, what: str | None = None) -> tuple[bytes, bool]:
        """(the first ``n`` bytes of the confined regular file ``rel``, whether that is all of it)."""
        try:
            fd = self._open(rel, what, None)
        except FileNotFoundError:
            raise HypographError(f"{self.root / rel}: missing" + (f" ({what})" if what else "")) from None
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(n + 1)
        return data[:n], len(data) <= n

    def read_json(self, rel: str, model: type[BaseModel] | None = None, what: str | None = None):
        """The JSON document ``rel`` (confined, size-limited), validated by ``model`` if given.
        Malformed, too deep or invalid: one HypographError line naming the file."""
        path = self.root / rel
        raw = self.read_bytes(rel, what)
        try:
            data = json.loads(raw.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise HypographError(f"{path}: not valid UTF-8 JSON: {e}") from None
        except RecursionError:  # the C decoder recurses per bracket: 100,000 '[' exhaust the stack
            raise HypographError(f"{path}: not usable JSON: nested too deep to parse") from None
        problem = data_problem(data)
        if problem:
            raise HypographError(f"{path}: not usable JSON: {problem}")
        if model is None:
            return data
        try:
            return model.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(map(str, err["loc"])) or "(document)"
            raise HypographError(f"{path}: field '{field}': {err['msg']}") from None

    def read_optional(self, rel: str):
        return self.read_json(rel) if os.path.lexists(self.root / rel) else None

    def sha(self, rel: str, what: str | None = None) -> str | None:
        """sha256 of the confined regular file ``rel``, streamed (any size); None if missing."""
        try:
            fd = self._open(rel, what, None)
        except FileNotFoundError:
            return None
        return _stream_sha(fd)

    def pointed(self, manifest: dict, name: str, model: type[BaseModel] | None = None):
        """The artifact the manifest names ``name``, after checking its hash."""
        ptr = manifest["artifacts"].get(name)
        if ptr is None:
            raise HypographError(f"{self.root / MANIFEST}: field 'artifacts.{name}': missing")
        what = f"manifest artifacts.{name}"
        actual = self.sha(ptr["path"], what)
        if actual != ptr["sha256"]:
            state = "missing" if actual is None else "changed since the manifest recorded it"
            raise HypographError(f"{self.root / ptr['path']}: {state} ({what})")
        return self.read_json(ptr["path"], model, what)

    def interpretation(self, manifest: dict) -> Interpretation:
        return self.pointed(manifest, "interpretation", Interpretation)

    def catalogue(self, interpretation: Interpretation) -> Catalogue:
        return self.read_json(
            interpretation.bindings.catalogue.get("path", ""), Catalogue, "interpretation bindings.catalogue"
        )

    def revisions(self) -> list[int]:
        """Analysis revisions with an interpretation, ascending."""
        base = self.root / "analysis" / "interpretation"
        # ASCII digits only: a folder named "²" or "٣" is no revision (int() refuses the first)
        numbered = (p.name for p in base.iterdir()) if base.is_dir() else ()
        return sorted(int(n) for n in numbered if n.isascii() and n.isdigit())

    # -- writing ---------------------------------------------------------------------------------

    def journal(self, step_hook=None) -> Journal:
        return HookedJournal(self.root, JOURNAL, step_hook)

    def roll_forward(self) -> int:
        """Finish a write a crashed process left half-done, and delete the temporary files of
        atomic writes it was killed in (``.NAME.xxxxxxxx.tmp`` under analysis/). Call under the
        case lock: every writer of analysis/ holds it, so no temp file found is still being written."""
        changed = self.journal().roll_forward()
        self.remove_temp_files()
        return changed

    def remove_temp_files(self) -> list[str]:
        """Delete leftover temp files of killed atomic writes under analysis/ and case/
        (``atomic.remove_stale_temps``; under the case lock); returns them."""
        return remove_stale_temps(self.root, CASE_WRITES)

    @staticmethod
    def manifest_text(manifest: dict) -> str:
        arts = manifest["artifacts"]
        ordered = {k: arts[k] for k in ARTIFACT_ORDER if k in arts} | {
            k: v for k, v in sorted(arts.items()) if k not in ARTIFACT_ORDER
        }
        target = {TARGET_VAULT: manifest[TARGET_VAULT]} if manifest.get(TARGET_VAULT) else {}
        return json_text(
            {
                "format": FORMAT,
                **{k: manifest[k] for k in ("package_id", "analysis_revision", "package_generation", "phase")},
                **target,
                "artifacts": ordered,
            }
        )

    @staticmethod
    def pointer(path: str, text: str) -> dict:
        return {"path": path, "sha256": sha_text(text)}

    def write(self, files: dict[str, str], manifest: dict, step_hook=None) -> int:
        """One journal plan: ``files`` (path -> text) first, the manifest last."""
        steps = [Step(to=p, text=t) for p, t in files.items()] + [Step(to=MANIFEST, text=self.manifest_text(manifest))]
        return self.journal(step_hook).apply(steps)

    # -- the case lock ---------------------------------------------------------------------------

    @contextmanager
    def lock(self, blocking: bool = False) -> Iterator[None]:
        """Hold the case's exclusive lock. Non-blocking by default: raises CaseBusy at once when
        another dispatch holds it (two dispatches never run side by side)."""
        busy = None if blocking else CaseBusy(f"{self.root}: another dispatch holds the case lock")
        with file_lock(state_dir(self.root) / "case.lock", busy):  # never through a symlinked .hypograph/
            yield


class CaseStore:
    """A folder of case packages; a case id is the name of its directory."""

    def __init__(self, root: Path | str):
        self.root = Path(root)

    @classmethod
    def for_dir(cls, case_dir: Path | str) -> tuple[CaseStore, str]:
        case_dir = Path(case_dir).resolve()
        return cls(case_dir.parent), case_dir.name

    def package(self, case_id: str) -> CasePackage:
        if not case_id or "/" in case_id or case_id in (".", ".."):
            raise HypographError(f"case id {case_id!r}: not a directory name")
        pkg = CasePackage(self.root / case_id, case_id)
        if not pkg.exists():
            raise HypographError(f"{pkg.root / MANIFEST}: missing (not a case package)")
        return pkg

    def cases(self) -> list[str]:
        """Case ids: sub-directories holding a manifest, sorted."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / MANIFEST).is_file())


def new_package_id(case_dir: Path) -> str:
    """A fresh package id: the directory's name and random hex (never reused across packages)."""
    slug = re.sub(r"[^a-z0-9]+", "-", Path(case_dir).name.lower()).strip("-")[:40] or "case"
    return f"{slug}-{os.urandom(4).hex()}"
