"""The version of the code this process runs: a digest of the code location's Python source.

``code_version()`` -> ``"<12 hex digits>"``: sha256 over the relative path and bytes of every
``*.py`` file of the packages a run's steps execute (``CODE_PACKAGES``, found where this process
imports them from, so a worker started with another copy on its ``PYTHONPATH`` has that copy's
version), in path order. Computed once per process, when the code location is loaded (a Celery
worker loads it at start: ``pipelines/celery_worker.py``): a worker serves many steps, and the files
it imported then are the code it runs, whatever is installed later. ``changed_on_disk()`` -> whether
those files have changed since (a checkout updated in place under a running worker: a module it
imports late would be the new code under the old version's name).

Runs carry the version of the process that created them; a step on a worker of another version is
refused (``io_managers/fleet.py``). Data files, the interpreter and third-party packages are not in
it: a deployment pins those (``pyproject.toml``'s dependencies) and the same code gives the same
results on them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from pathlib import Path

CODE_PACKAGES = ("hypograph", "resources", "io_managers", "assets", "pipelines")
MAX_SOURCE_BYTES = 4 << 20  # no source file is near this; a larger one is not code to read whole


def code_version() -> str:
    """The digest of the code location's source as this process found it (see the module docstring)."""
    return _taken()[0]


def changed_on_disk() -> bool:
    """Whether a source file of ``code_version()`` was added, removed or rewritten since it was
    computed (sizes and modification times: a few milliseconds)."""
    return _signature(_sources()) != _taken()[1]


@functools.cache
def _taken() -> tuple[str, tuple]:
    """(digest, signature) of the sources, computed once."""
    sources = _sources()
    signature = _signature(sources)
    digest = hashlib.sha256()
    for label, path in sources:
        with open(path, "rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:12], signature


def _sources() -> list[tuple[str, Path]]:
    """(``package/relative/path.py``, path) of every source file of ``CODE_PACKAGES``, in order."""
    out = []
    for name in CODE_PACKAGES:
        spec = importlib.util.find_spec(name)
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        for folder in folders[:1]:  # a regular package: one folder, the one imported
            base = Path(folder)
            for path in sorted(base.rglob("*.py")):
                if "__pycache__" not in path.parts and path.is_file():
                    out.append((f"{name}/{path.relative_to(base).as_posix()}", path))
    return out


def _signature(sources: list[tuple[str, Path]]) -> tuple:
    out = []
    for label, path in sources:
        try:
            st = path.stat()
        except OSError:  # removed since it was listed
            continue
        out.append((label, st.st_size, st.st_mtime_ns))
    return tuple(out)
