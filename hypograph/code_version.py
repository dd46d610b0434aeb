"""The version of the code this process runs: a digest of the code location's Python source.

``code_version()`` -> ``"<12 hex digits>"``: sha256 over the relative path and bytes of every
``*.py`` file of the packages a run's steps execute (``CODE_PACKAGES``, found where this process
imports them from, so a worker started with another copy on its ``PYTHONPATH`` has that copy's
version), in path order. Computed once per process: a worker serves many steps, and the files it
imported at start are the code it runs, whatever is installed later.

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


@functools.cache
def code_version() -> str:
    """The digest of the code location's source as this process finds it (see the module docstring)."""
    digest = hashlib.sha256()
    for name in CODE_PACKAGES:
        spec = importlib.util.find_spec(name)
        folders = list(spec.submodule_search_locations or []) if spec is not None else []
        for folder in folders[:1]:  # a regular package: one folder, the one imported
            base = Path(folder)
            for path in sorted(base.rglob("*.py")):
                if "__pycache__" in path.parts or not path.is_file():
                    continue
                with open(path, "rb") as f:
                    data = f.read(MAX_SOURCE_BYTES + 1)
                digest.update(f"{name}/{path.relative_to(base).as_posix()}\0{len(data)}\0".encode())
                digest.update(data)
    return digest.hexdigest()[:12]
