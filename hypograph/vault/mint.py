"""Mint node ids and create nodes, as the seed's ``create_node.py`` does.

The next id is one past the highest ``PREFIX-N`` anywhere under the vault (sub-folders included,
so merged and dropped ids are never reused), taken while holding an exclusive ``flock`` on
``<vault>/.create_node.lock`` — the lock file the seed's script uses, so both tools can mint in
one vault at once. Ids never come from a model.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypograph.atomic import FILE_MODE
from hypograph.errors import HypographError
from hypograph.locks import file_lock
from hypograph.paths import scan, unsafe
from hypograph.vault.locking import (
    MINT_LOCK,
    structuring_lock,  # noqa: F401 - its old home: imported from here
)
from hypograph.vault.nodes import clean_title, parse_node, render
from hypograph.vault.vault import NODE_TYPES

LOCK_NAME = MINT_LOCK  # the seed's lock file name
PLACEHOLDER = "{{ID}}"


@contextmanager
def vault_lock(root: Path) -> Iterator[None]:
    """Hold the vault's exclusive minting lock (blocks until free)."""
    with file_lock(Path(root) / LOCK_NAME):
        yield


def highest_id(root: Path, prefix: str) -> int:
    """Highest N of any file named ``PREFIX-N…`` anywhere under ``root``, other programs' dot-folders
    included (0 if none). The scan is the one every read and write uses: a symlinked folder that a
    write would follow but a scan would not is refused, never minted into."""
    pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)(?:\D|$)")
    best = 0
    for rel in scan(root, hidden_dirs=True):
        m = pattern.match(rel.name)
        if m:
            best = max(best, int(m.group(1)))
    return best


def file_with_id(root: Path, node_id: str) -> Path | None:
    """A file named ``ID`` or ``ID - …`` anywhere under ``root`` (so ``H-1`` is not ``H-12``), or None."""
    pattern = re.compile(rf"^{re.escape(node_id)}(?:\D|$)")
    for dirpath, _dirs, files in os.walk(root):
        for name in sorted(files):
            if pattern.match(name):
                return Path(dirpath) / name
    return None


def create_node(
    root: Path,
    node_type: str,
    title: str,
    meta: dict[str, Any] | None = None,
    body: str = "",
    folder: str | None = None,
) -> tuple[str, Path]:
    """Mint the next id for ``node_type`` and write ``ID - Title.md`` (exclusive create).

    ``meta`` fields follow ``type`` and ``id``; ``{{ID}}`` in any string field or the body is
    replaced by the new id. Returns (id, path relative to the vault).
    """
    if node_type not in NODE_TYPES:  # before the lock: a refused call leaves no file behind
        raise HypographError(f"unknown node type {node_type!r}: one of {', '.join(NODE_TYPES)}")
    with minting(root) as mint:
        node_id, rel, _text = mint.create(node_type, title, meta, body, folder)
    return node_id, rel


@contextmanager
def minting(root: Path) -> Iterator[Minter]:
    """Hold the vault's minting lock over a batch of mints: the vault is scanned once, each mint
    takes the next id of its prefix (the same ids ``create_node`` one by one would give: while the
    lock is held nobody else mints)."""
    root = Path(root)
    with vault_lock(root):
        yield Minter(root)


class Minter:
    """Mints under a held minting lock (``minting``); one scan of the vault for all its mints."""

    def __init__(self, root: Path):
        self.root = root
        self._ids: set[str] | None = None
        self._highest: dict[str, int] = {}

    def _scan(self) -> None:
        """Every file named by an id, wherever it is (as ``file_with_id`` looks), once per batch."""
        pattern = re.compile(r"^([A-Z]+)-(\d+)(?:\D|$)")
        self._ids = set()
        for _dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                m = pattern.match(name)
                if m:
                    self._ids.add(f"{m.group(1)}-{m.group(2)}")

    def create(
        self, node_type: str, title: str, meta: dict[str, Any] | None = None, body: str = "", folder: str | None = None
    ) -> tuple[str, Path, str]:
        """Mint the next id for ``node_type`` and write ``ID - Title.md``; returns (id, path, text)."""
        if node_type not in NODE_TYPES:
            raise HypographError(f"unknown node type {node_type!r}: one of {', '.join(NODE_TYPES)}")
        prefix, default_folder = NODE_TYPES[node_type]
        root = self.root
        if self._ids is None:
            self._scan()
        if prefix not in self._highest:
            self._highest[prefix] = highest_id(root, prefix)  # the count, once per prefix and batch
        node_id = f"{prefix}-{self._highest[prefix] + 1}"
        fields = {"type": node_type, "id": node_id}
        for k, v in (meta or {}).items():
            if k not in fields:
                fields[k] = v.replace(PLACEHOLDER, node_id) if isinstance(v, str) else v
        rel = Path(folder or default_folder) / f"{node_id} - {clean_title(title.replace(PLACEHOLDER, node_id))}.md"
        problem = unsafe(root, str(rel))
        if problem:
            raise HypographError(f"{root / rel}: {problem}")
        # The count said the id is free; a file with it (whatever its title) means the count was
        # stale — someone minted without the lock — and a second node with one id is never made.
        if node_id in self._ids:
            taken = file_with_id(root, node_id)
            raise HypographError(f"{taken or root}: id {node_id} already exists; not minting it again")
        text = render(fields, body.replace(PLACEHOLDER, node_id))
        try:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            _create_exclusive(root / rel, text)
        except OSError as e:
            raise HypographError(f"{root / rel}: cannot write ({e.strerror or type(e).__name__})") from None
        self._ids.add(node_id)
        self._highest[prefix] = id_number_of(node_id)
        return node_id, rel, text


def id_number_of(node_id: str) -> int:
    return int(node_id.rsplit("-", 1)[1])


def _create_exclusive(path: Path, text: str) -> None:
    """Write a complete file under a temp name, then hard-link it into place: the file appears
    whole or not at all, and an existing file is never overwritten."""
    # a killed run's leftover never collides
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise HypographError(f"{path}: already exists; not overwriting it") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def create_node_from_text(root: Path, node_type: str, title: str, text: str) -> tuple[str, Path]:
    """``hypograph create-node``: ``text`` is a body, or a whole node with frontmatter."""
    node = parse_node(text, Path("<stdin>"))
    meta = {k: v for k, v in node.meta.items() if k not in ("type", "id")}
    return create_node(root, node_type, title, meta, node.body)
