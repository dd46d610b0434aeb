"""A case package on disk, read and written only through this module.

```
CASE_DIR/
  manifest.json                          package_id, analysis_revision, package_generation, phase,
                                         artifacts: {name: {"path", "sha256"}} (current pointers)
  case/                                  the original inputs, never rewritten
  analysis/interpretation/NNNN/          catalogue.json, interpretation.json   (revision NNNN)
  analysis/hypotheses/NNNN/              policy.json, context.json, rounds/<attempt>.json,
                                         hypotheses.json, registry.json, hypotheses.md,
                                         dispatch.json, errors/<attempt>.json
  analysis/.journal.json                 a write in progress (rolled forward by the next writer)
  .hypograph/                            tool state: lock, LLM traces and cache
```

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
from pathlib import Path

from pydantic import BaseModel, ValidationError

from hypograph.casework.models import Catalogue, Interpretation
from hypograph.casework.publish import HookedJournal
from hypograph.errors import HypographError
from hypograph.journal import Journal, Step
from hypograph.locks import file_lock

MANIFEST = "manifest.json"
FORMAT = "hypograph-case-package/1"
JOURNAL = "analysis/.journal.json"
ARTIFACT_ORDER = ("catalogue", "interpretation", "hypothesis_policy", "hypothesis_context", "hypotheses",
                  "hypothesis_registry", "hypotheses_summary")
HYPOTHESIS_POINTERS = ARTIFACT_ORDER[2:]
PHASE_INTERPRETED = "CASE_INTERPRETED"
PHASE_GENERATING = "GENERATING_HYPOTHESES"


class CaseBusy(HypographError):
    """Another process holds the case lock."""


def json_text(value) -> str:
    """The one JSON text form of package files: indented UTF-8, key order as given, final newline."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def sha_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha_file(path: Path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def rev_dir(kind: str, revision: int) -> str:
    """``analysis/<kind>/NNNN`` (kind: interpretation or hypotheses)."""
    return f"analysis/{kind}/{revision:04d}"


class CasePackage:
    def __init__(self, root: Path | str, case_id: str | None = None):
        self.root = Path(root)
        self.case_id = case_id or self.root.name
        self.state_dir = self.root / ".hypograph"

    # -- reading ---------------------------------------------------------------------------------

    def exists(self) -> bool:
        return (self.root / MANIFEST).is_file()

    def manifest(self) -> dict:
        """The manifest, checked field by field."""
        m = self.read_json(MANIFEST)
        if not isinstance(m, dict):
            raise HypographError(f"{self.root / MANIFEST}: not a JSON object")
        for key, kind in (("package_id", str), ("analysis_revision", int), ("package_generation", int),
                          ("phase", str), ("artifacts", dict)):
            if not isinstance(m.get(key), kind) or isinstance(m.get(key), bool):
                raise HypographError(f"{self.root / MANIFEST}: field '{key}': missing or not a {kind.__name__}")
        if m["analysis_revision"] < 1:
            raise HypographError(f"{self.root / MANIFEST}: field 'analysis_revision': must be at least 1")
        for name, ptr in m["artifacts"].items():
            if not (isinstance(ptr, dict) and isinstance(ptr.get("path"), str) and isinstance(ptr.get("sha256"), str)):
                raise HypographError(f"{self.root / MANIFEST}: field 'artifacts.{name}': needs 'path' and 'sha256'")
        return m

    def read_json(self, rel: str, model: type[BaseModel] | None = None):
        path = self.root / rel
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
        except FileNotFoundError:
            raise HypographError(f"{path}: missing") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise HypographError(f"{path}: not valid UTF-8 JSON: {e}") from None
        if model is None:
            return data
        try:
            return model.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(map(str, err["loc"])) or "(document)"
            raise HypographError(f"{path}: field '{field}': {err['msg']}") from None

    def read_optional(self, rel: str):
        return self.read_json(rel) if (self.root / rel).exists() else None

    def sha(self, rel: str) -> str | None:
        return sha_file(self.root / rel)

    def pointed(self, manifest: dict, name: str, model: type[BaseModel] | None = None):
        """The artifact the manifest names ``name``, after checking its hash."""
        ptr = manifest["artifacts"].get(name)
        if ptr is None:
            raise HypographError(f"{self.root / MANIFEST}: field 'artifacts.{name}': missing")
        actual = self.sha(ptr["path"])
        if actual != ptr["sha256"]:
            state = "missing" if actual is None else "changed since the manifest recorded it"
            raise HypographError(f"{self.root / ptr['path']}: {state} (manifest artifacts.{name})")
        return self.read_json(ptr["path"], model)

    def interpretation(self, manifest: dict) -> Interpretation:
        return self.pointed(manifest, "interpretation", Interpretation)

    def catalogue(self, interpretation: Interpretation) -> Catalogue:
        return self.read_json(interpretation.bindings.catalogue["path"], Catalogue)

    def revisions(self) -> list[int]:
        """Analysis revisions with an interpretation, ascending."""
        base = self.root / "analysis" / "interpretation"
        return sorted(int(p.name) for p in base.iterdir() if p.name.isdigit()) if base.is_dir() else []

    # -- writing ---------------------------------------------------------------------------------

    def journal(self, step_hook=None) -> Journal:
        return HookedJournal(self.root, JOURNAL, step_hook)

    def roll_forward(self) -> int:
        """Finish a write a crashed process left half-done (call under the case lock)."""
        return self.journal().roll_forward()

    @staticmethod
    def manifest_text(manifest: dict) -> str:
        arts = manifest["artifacts"]
        ordered = ({k: arts[k] for k in ARTIFACT_ORDER if k in arts}
                   | {k: v for k, v in sorted(arts.items()) if k not in ARTIFACT_ORDER})
        return json_text({"format": FORMAT, **{k: manifest[k] for k in ("package_id", "analysis_revision",
                          "package_generation", "phase")}, "artifacts": ordered})

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
        with file_lock(self.state_dir / "case.lock", busy):
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
