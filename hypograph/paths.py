"""Paths inside an input: the one place deciding which files a run may scan, read and write.

Policy (every refusal is one ``HypographError`` line naming the path):

* **Symlinked folders** are refused anywhere the tool reads or writes (node folders, ``hypotheses/``,
  ``proximity/``, ``.hypograph/``, ``agent-notes/``), wherever they point: a scan that does not
  follow the link and a write that does would disagree (ids minted twice, nodes written outside the
  input), and a link to a parent folder would loop. Other dot-folders (``.git``, ``.obsidian``,
  ``.trash``, a sync tool's) are not the tool's: never read or written, scanned only for ids so a
  tombstoned id is never reused, their links never followed.
* **Symlinked files** that resolve outside the input root, or nowhere, are refused (a run directory
  skips them with a warning instead, as it skips any unreadable file). One that resolves inside is
  read through, and written through (the link stays a link: a symlinked file is never replaced by
  a regular copy); moving one is refused.
* **Hidden files** (``.name``) are never nodes or hypotheses: the temporary files of a killed
  atomic write (``.NAME.xxxxxxxx.tmp``) and macOS ``._NAME.md`` copies are ignored by every scan.
* **Names**: a file name the tool writes must fit ``MAX_NAME_BYTES`` UTF-8 bytes, leaving room for
  the temporary name of an atomic write (``.NAME.`` + 8 random characters + ``.tmp``) within the
  255-byte limit of common file systems.

Bottom layer: imports only ``errors``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Literal

from hypograph.errors import HypographError

NAME_MAX = 255  # bytes per file name on ext4, APFS, NTFS (as UTF-16 units), most others
TEMP_ROOM = 24  # ".NAME." + 8 random + ".tmp" is 14 bytes; mint's ".NAME.<pid>.tmp" at most 14 too
MAX_NAME_BYTES = NAME_MAX - TEMP_ROOM
OURS = ".hypograph"  # the one dot-folder the tool writes
# the validated corpus a proximity run keeps (the hypothesis_texts asset), relative to its input
TEXTS_SNAPSHOT = PurePosixPath(OURS) / "assets" / "hypothesis_texts.json"


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be written safely (too long in UTF-8 bytes), or None."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        return (
            f"file name is {size} bytes; at most {MAX_NAME_BYTES} fit beside the temporary name "
            "of a safe write (shorten the title)"
        )
    return None


def cut_bytes(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes, never inside a character."""
    data = text.encode("utf-8")
    return text if len(data) <= max_bytes else data[:max_bytes].decode("utf-8", "ignore")


def _inside(root: Path, path: Path) -> bool:
    return path == root or root in path.parents


def _link_problem(root: Path, path: Path) -> str | None:
    """Why the symlinked file ``path`` may not be used (resolves outside ``root`` or nowhere), or None."""
    target = Path(os.path.realpath(path))
    if not _inside(root.resolve(), target):
        return f"is a symlink to {os.readlink(path)}, outside the input; not followed"
    if not target.is_file():
        return f"is a symlink to {os.readlink(path)}, which is not a file"
    return None


def _folder_refusal(root: Path, path: Path) -> HypographError:
    return HypographError(
        f"{path}: is a symlinked folder (-> {os.readlink(path)}); an input's folders "
        "must be real folders (replace the link by the folder, or move it out)"
    )


def _ours(rel_dir: Path) -> bool:
    """Whether the tool reads or writes in this folder (not another program's dot-folder)."""
    return not any(part.startswith(".") and part != OURS for part in rel_dir.parts)


def _entries(here: Path) -> tuple[list[os.DirEntry], list[os.DirEntry]]:
    """The folders (a link to a folder included, as ``os.walk`` lists it) and the other entries of
    ``here``, each sorted by name; from one ``scandir``, so a file costs no system call of its own."""
    try:
        with os.scandir(here) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return [], []  # gone or unreadable meanwhile: nothing to scan, as os.walk would do
    folders, files = [], []
    for e in entries:
        try:
            (folders if e.is_dir() else files).append(e)
        except OSError:
            files.append(e)
    return folders, files


def scan(
    root: Path,
    bad: Callable[[Path, str], None] | None = None,
    hidden_dirs: bool = False,
    only: tuple[str, ...] | None = None,
) -> Iterator[Path]:
    """Every visible regular file under ``root``, relative to it, in sorted order (a folder's files,
    then its sub-folders, sorted); a FIFO, socket or device is left out (reported to ``bad``).
    Refuses a symlinked folder, and a symlinked file resolving outside (or nowhere); with ``bad``
    given, such a visible file is reported as ``bad(rel, reason)`` and left out instead.
    ``hidden_dirs``: also descend into other programs' dot-folders (links there are neither
    followed nor refused; used to count ids). ``only``: the top-level folders to scan
    (top-level files left out), for an input whose other folders the tool never touches."""
    for rel_dir, name in scan_names(root, bad, hidden_dirs, only):
        yield rel_dir / name


def scan_names(
    root: Path,
    bad: Callable[[Path, str], None] | None = None,
    hidden_dirs: bool = False,
    only: tuple[str, ...] | None = None,
) -> Iterator[tuple[Path, str]]:
    """``scan`` as (folder relative to ``root``, file name) pairs: no path built per file, for a
    check that only wants the refusals."""
    root = Path(root)
    yield from _scan(root, root, Path("."), bad, hidden_dirs, only)


def _visible_file(root: Path, here: Path, rel_dir: Path, e: os.DirEntry, bad, ours: bool) -> bool:
    """Whether the file entry ``e`` is one a scan yields (see ``scan``); raises or reports the others."""
    name = e.name
    if ours and e.is_symlink():
        problem = _link_problem(root, here / name)
        if problem:
            if bad is None or name.startswith("."):
                raise HypographError(f"{here / name}: {problem}")
            bad(rel_dir / name, problem)
            return False
    if name.startswith("."):
        return False
    if not e.is_file():  # a FIFO would block the reader, a socket or device is no file
        if bad is not None:
            bad(rel_dir / name, "not a regular file")
        return False
    return True


def _scan(root: Path, here: Path, rel_dir: Path, bad, hidden_dirs: bool, only) -> Iterator[tuple[Path, str]]:
    ours = _ours(rel_dir)
    folders, files = _entries(here)
    if only is not None and rel_dir == Path("."):
        folders, files = [e for e in folders if e.name in only], []
    descend = []
    for e in folders:  # refused before any file of this folder is yielded
        child = rel_dir / e.name
        if e.is_symlink():  # never followed; refused where the tool reads or writes
            if ours and _ours(child):
                raise _folder_refusal(root, here / e.name)
            continue
        if hidden_dirs or _ours(child):
            descend.append(e.name)
    for e in files:
        if _visible_file(root, here, rel_dir, e, bad, ours):
            yield rel_dir, e.name
    for name in descend:
        yield from _scan(root, here / name, rel_dir / name, bad, hidden_dirs, only)


RUN_DIR_FOLDERS = ("hypotheses", "proximity", OURS)  # all prox reads or writes in a run dir


Kind = Literal["run-dir", "vault", "library", "case"]
KINDS: tuple[Kind, ...] = ("run-dir", "vault", "library", "case")
WITH_HYPOTHESES: tuple[Kind, ...] = ("run-dir", "vault", "library")  # the kinds proximity embeds
HYPOTHESIS_FOLDERS: tuple[Kind, ...] = ("run-dir", "vault")  # the kinds with a hypotheses/ folder
LIBRARY_FILE = "hypothesis_library.json"
CASE_MANIFEST = "manifest.json"


def input_kind(root: Path | str, among: tuple[Kind, ...] = KINDS) -> Kind:
    """The one rule of what an input folder is, the first of these that holds: a case package
    (``manifest.json``); a run directory or a vault (``hypotheses/``: ``H-*.json`` files make a run
    directory, else ``.md`` files a vault); a library (``hypothesis_library.json``, or its tool
    state). Only the kinds ``among`` are tried (proximity's readers: ``HYPOTHESIS_FOLDERS``);
    a folder of none of them is one ``HypographError`` line."""
    root = Path(root)
    if not root.is_dir():
        raise HypographError(f"{root}: {'not a directory' if root.exists() else 'no such directory'}")
    if "case" in among and (root / CASE_MANIFEST).is_file():
        return "case"
    if (root / "hypotheses").is_dir():
        return _run_dir_or_vault(root / "hypotheses")
    if "library" in among and ((root / LIBRARY_FILE).is_file() or (root / OURS / "library").is_dir()):
        return "library"
    if among == HYPOTHESIS_FOLDERS:
        raise HypographError(f"{root}: no hypotheses/ directory (expected a prox run directory or a vault)")
    raise HypographError(f"{root}: not an input (no hypotheses/, {LIBRARY_FILE} or {CASE_MANIFEST})")


def _run_dir_or_vault(hyp: Path) -> Kind:
    """``hypotheses/`` holding an ``H-*.json`` makes a run directory; else ``.md`` files a vault."""
    markdown = False
    with os.scandir(hyp) as entries:  # stops at the first H-*.json: no listing of 100k names
        for e in entries:
            if e.name.startswith("H-") and e.name.endswith(".json"):
                return "run-dir"
            markdown = markdown or e.name.endswith(".md")
    return "vault" if markdown else "run-dir"


def check_input(root: Path | str, folders: tuple[str, ...] = RUN_DIR_FOLDERS) -> None:
    """Refuse, in one line, a symlink the policy above forbids where the tool reads or writes:
    anywhere in a vault; in a run dir, in ``folders`` (default: ``hypotheses/``, ``proximity/`` and
    ``.hypograph/``; a file there leading outside is only skipped, with the warning ``load_corpus``
    gives)."""
    root = Path(root)
    run_dir = not (root / "hypotheses").is_dir() or input_kind(root, HYPOTHESIS_FOLDERS) == "run-dir"
    for _ in scan_names(root, only=folders if run_dir else None, bad=(lambda *_: None) if run_dir else None):
        pass


def check_folder(root: Path, rel: str | Path) -> None:
    """Refuse when ``rel`` or a folder on the way to it (below ``root``) is a symlink."""
    path = Path(root)
    for part in Path(rel).parts:
        path = path / part
        if os.path.islink(path):
            raise _folder_refusal(root, path)


def state_dir(root: Path) -> Path:
    """``root/.hypograph``, the tool's state folder in an input, once it is known not to be a
    symlink (wherever it points: state written there would leave the input, or be shared by two
    inputs); one HypographError line naming it otherwise. It may not exist yet."""
    check_folder(root, OURS)
    return Path(root) / OURS


def unsafe(root: Path, rel: str, moving: bool = False) -> str | None:
    """Why ``rel`` is not a file path the tool may write inside ``root`` (or move, if ``moving``), or None."""
    pure = PurePosixPath(rel)
    if not rel or pure.is_absolute() or Path(rel).is_absolute():
        return "is not relative to the input"
    if ".." in pure.parts or pure.name in ("", "."):
        return "leaves the input"
    path = Path(root)
    for part in pure.parts[:-1]:
        path = path / part
        if os.path.islink(path):
            return f"leads through the symlinked folder {path} (-> {os.readlink(path)})"
    path = path / pure.name
    if os.path.islink(path):
        if moving:
            return "is a symlink; moving it would break it (replace it by the file it points to)"
        problem = _link_problem(Path(root), path)
        if problem:
            return problem
    return name_problem(pure.name)


def write_target(root: Path, rel: str) -> Path:
    """The path to write for ``rel``: the file a (checked, inside) symlink points at, so the link
    stays a link; else ``root / rel``."""
    path = Path(root) / rel
    return Path(os.path.realpath(path)) if os.path.islink(path) else path
