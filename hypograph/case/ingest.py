"""Raw inputs as a case: ``hypograph case new CASE_DIR --question "…" PATH…`` and ``case add``.

Files and folders are copied byte-for-byte under ``case/rNNNN/`` (a file by its name, a folder
as ``NAME/…``; hidden files and other programs' dot-folders are left out, as every scan of the
tool does). A file named ``*.zip`` is an archive: kept whole, never extracted, and listed member
by member after its central directory passed every check of ``archive_members`` (member count,
total and per-member uncompressed size, compression ratio — the ``[archives]`` keys — and always:
no absolute or ``..`` member name, no link, no encrypted or special member, stored or deflate only),
and each member decompressed once in a stream to its end (``check_member_bytes``): a CRC, size or
name that lies is refused by ``case new`` and ``case add``, naming the archive and the member.

Every input file, and every file member of an archive, becomes one catalogue source ``IN<n>``
(numbered on from the sources already in the case): title its path, kind the person's choice
(``--kind``; default ``report``, an input a person brought), empty summary and ``read: false``
until a person or the interpreter has read it. ``case new`` needs the question; ``case add``
carries the current revision's question, statements and sources into a new unconfirmed revision.
Refusals are one HypographError line naming the input (and the member and limit); nothing of a
refused command is written.
"""

from __future__ import annotations

import hashlib
import os
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from hypograph.case.config import ArchiveLimits
from hypograph.case.models import SOURCE_KINDS, Source
from hypograph.errors import HypographError
from hypograph.limits import encodable
from hypograph.paths import name_problem, scan

DEFAULT_KIND = "report"  # what a person brings without saying otherwise: a report of what happened
SOURCE_PREFIX = "IN"
# what reading a member whose directory lies raises (zlib.error: a corrupt deflate stream)
ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, KeyError, zlib.error)


@dataclass(frozen=True)
class Member:
    """A file member of an archive, as its central directory declares it."""

    name: str
    size: int  # uncompressed bytes
    compressed: int


@dataclass(frozen=True)
class Input:
    """One file to copy: ``rel`` under ``case/rNNNN/``, from ``source`` outside the package."""

    rel: str
    source: Path
    sha256: str
    size: int
    members: tuple[Member, ...] | None = None  # an archive's file members (None: not an archive)


def is_archive(name: str) -> bool:
    return name.lower().endswith(".zip")


def archive_members(path: Path, limits: ArchiveLimits | None, label: str | None = None) -> list[Member]:
    """The file members of the ZIP at ``path`` from its central directory (nothing extracted),
    each checked; ``limits`` None checks names and kinds only (an archive already in a package).
    Raises one line naming the archive (``label``), the member and the limit or rule it breaks."""
    label = label or str(path)
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as e:
        raise HypographError(f"{label}: not a readable ZIP archive ({e})") from None
    members: list[Member] = []
    seen: set[str] = set()
    total = 0
    for info in infos:
        why = _member_problem(info)
        if why is None and not info.is_dir():
            why = "listed twice" if info.filename in seen else None
            seen.add(info.filename)
            members.append(Member(info.filename, info.file_size, info.compress_size))
            total += info.file_size
            if why is None and limits is not None:
                why = _over_limit(info, len(members), total, limits)
        if why:
            raise HypographError(f"{label}: member {info.filename!r}: {why}; nothing extracted")
    return members


def _member_problem(info: zipfile.ZipInfo) -> str | None:
    """Why a member may never be in a case (whatever the limits), or None."""
    problem = _member_name_problem(info.filename)
    if problem:
        return problem
    mode = info.external_attr >> 16 if info.create_system == 3 else 0  # unix mode bits, when a unix zip set them
    if stat.S_ISLNK(mode):
        return "a symbolic link (links are refused always)"
    if info.is_dir():
        return None
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # type bits set (writers may leave them 0) and not a file
        return "not a regular file (device, FIFO or socket; refused always)"
    if info.flag_bits & 0x1:
        return "encrypted (cannot be read)"
    bounded = info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)  # read with a bounded output
    return None if bounded else f"compression method {info.compress_type} (only stored and deflate are read)"


def _member_name_problem(name: str) -> str | None:
    """Why a member's name may never be extracted (it would leave the folder it is written to), or None."""
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "absolute member name (refused always)"
    if ".." in name.replace("\\", "/").split("/"):
        return "'..' in the member name leaves the archive (zip slip; refused always)"
    if "\0" in name or "\\" in name:
        return "backslash or NUL in the member name (refused always)"
    return None


def _over_limit(info: zipfile.ZipInfo, count: int, total: int, limits: ArchiveLimits) -> str | None:
    """Which ``[archives]`` limit the ``count``-th file member breaks (``total``: bytes so far), or None."""
    if count > limits.max_members:
        return f"member {count} is over archives.max_members={limits.max_members}"
    if info.file_size > limits.max_member_bytes:
        return f"{info.file_size} bytes uncompressed, over archives.max_member_bytes={limits.max_member_bytes}"
    if total > limits.max_total_bytes:
        return f"brings the uncompressed total to {total} bytes, over archives.max_total_bytes={limits.max_total_bytes}"
    ratio = info.file_size / max(info.compress_size, 1)
    if ratio > limits.max_ratio:
        return (
            f"compression ratio {ratio:.0f} ({info.file_size} from {info.compress_size} bytes), "
            f"over archives.max_ratio={limits.max_ratio}"
        )
    return None


def read_member(path: Path, member: str, max_bytes: int) -> tuple[bytes, bool]:
    """(at most ``max_bytes`` of ``member``'s uncompressed bytes, whether that is all of it),
    decompressed in a stream: never more than ``max_bytes + 1`` bytes are produced. A member that
    cannot be read as its directory declares it is one HypographError (``unreadable_member``)."""
    try:
        with zipfile.ZipFile(path) as zf, zf.open(member) as fh:
            data = fh.read(max_bytes + 1)
    except ZIP_ERRORS as e:
        raise unreadable_member(path, member, e) from None
    return data[:max_bytes], len(data) <= max_bytes


def check_member_bytes(path: Path, members: list[Member], label: str | None = None) -> None:
    """Decompress every member of the ZIP at ``path`` to its end in a stream, keeping nothing: a
    CRC, size or name that lies, or a truncated stream, is refused now rather than when the
    member is read. At most each member's declared size is produced (the limits capped those)."""
    name = None
    try:
        with zipfile.ZipFile(path) as zf:
            for name in (m.name for m in members):
                with zf.open(name) as fh:
                    while fh.read(1 << 16):
                        pass
    except ZIP_ERRORS as e:
        raise unreadable_member(label or path, name, e) from None


def unreadable_member(archive: Path | str, member: str | None, error: BaseException) -> HypographError:
    """``<archive>: member 'x': cannot be read as the archive declares it (Bad CRC-32 …)``."""
    why = " ".join(str(error).split()) or type(error).__name__
    return HypographError(
        f"{archive}: member {member!r}: cannot be read as the archive declares it ({why}); "
        "its sizes, checksum or name lie, or it is cut short: nothing extracted"
    )


def open_input(path: Path) -> int:
    """A descriptor of the input file ``path``, refused unless it is a regular file (O_NONBLOCK: a
    FIFO does not block the open)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise HypographError(f"{path}: cannot be read ({e.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise HypographError(f"{path}: not a regular file (a FIFO, socket or device); not copied")
    return fd


def file_sha(path: Path) -> tuple[str, int]:
    """(sha256, size) of the input file ``path``, streamed."""
    fd = open_input(path)
    h, size = hashlib.sha256(), 0
    with os.fdopen(fd, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def collect(paths: list[Path], limits: ArchiveLimits) -> list[Input]:
    """Every file of ``paths`` (files, folders) as an Input, archives checked; one name once."""
    found = [pair for raw in paths for pair in _files(Path(raw))]
    if not found:
        raise HypographError(f"{', '.join(map(str, paths))}: no input files (hidden files are left out)")
    out: list[Input] = []
    names: dict[str, Path] = {}
    for rel, source in found:
        if rel in names:
            raise HypographError(f"{source}: its name {rel!r} is already taken by {names[rel]}; rename one")
        names[rel] = source
        out.append(_input(rel, source, limits))
    return out


def _files(path: Path) -> list[tuple[str, Path]]:
    """(name in the case, file) for the file ``path``, or each visible file under the folder ``path``."""
    if not os.path.lexists(path):
        raise HypographError(f"{path}: no such file or folder")
    if not path.is_dir():
        return [(path.name, path)]
    bad = lambda rel, why, root=path: _refuse_in_folder(root, rel, why)
    return [
        (f"{path.resolve().name}/{rel.as_posix()}", path / rel)
        for rel in scan(path, bad)
        if not any(part.startswith(".") for part in rel.parts)
    ]  # .hypograph/ too: tool state


def _input(rel: str, source: Path, limits: ArchiveLimits) -> Input:
    """The input file ``source`` named ``rel``: its name checked, hashed, an archive's members listed."""
    problem = None if encodable(rel) else "its name is not valid Unicode"
    problem = problem or next((name_problem(part) for part in rel.split("/") if name_problem(part)), None)
    if problem:
        raise HypographError(f"{source}: {problem}; rename it to add it")
    sha, size = file_sha(source)
    members = tuple(archive_members(source, limits, str(source))) if is_archive(rel) else None
    if members == ():
        raise HypographError(f"{source}: the archive holds no file; nothing to catalogue")
    if members:
        check_member_bytes(source, list(members), str(source))  # a lying member is refused here, not at interpret
    return Input(rel, source, sha, size, members)


def _refuse_in_folder(root: Path, rel: Path, why: str) -> None:
    raise HypographError(f"{root / rel}: {why}; not copied (an input folder holds regular files only)")


def sources_for(inputs: list[Input], kind: str, first: int) -> list[Source]:
    """The catalogue sources of ``inputs`` (origins relative to the revision folder), ids ``IN<first>``…"""
    if kind not in SOURCE_KINDS:
        raise HypographError(f"kind {kind!r}: not a source kind (one of {', '.join(SOURCE_KINDS)})")
    out: list[Source] = []
    for item in inputs:
        for member in item.members or (None,):
            title = item.rel if member is None else f"{item.rel}: {member.name}"
            out.append(
                Source(
                    id=f"{SOURCE_PREFIX}{first + len(out)}",
                    kind=kind,
                    title=title[:300],
                    summary="",
                    origin=item.rel,
                    member=None if member is None else member.name,
                    read=False,
                )
            )
    return out


def next_number(sources: list[Source]) -> int:
    """The number after the highest ``IN<n>`` source id (1 for none): ids are never reused."""
    taken = [
        int(s.id[len(SOURCE_PREFIX) :])
        for s in sources
        if s.id.startswith(SOURCE_PREFIX) and s.id[len(SOURCE_PREFIX) :].isdigit()
    ]
    return max(taken, default=0) + 1
