"""A whole vault: every node under its folders, looked up by id, written through a journal.

Nodes are ``.md`` files with an ``id`` in their frontmatter, in any sub-folder except the tool's own
(``agent-notes/``, ``proximity/``, ``.hypograph/``, dot-folders). Top-level files such as
``initial_prompt.md`` or a problem log are not nodes and are never touched.

Writes go through ``hypograph.journal.Journal``: the whole plan (moves and new texts) is saved
first, then applied one file at a time, each step atomic and idempotent; if a run dies half-way,
the next ``open_vault`` rolls the plan forward before reading. Nothing is ever deleted.

A ``Vault`` is read once and then kept as the writer's index of the nodes: ``Vault.apply`` writes a
plan through the journal and updates the nodes it wrote, ``Vault.add`` takes in a node just minted,
so a step re-reads nothing it wrote itself. Reading holds the vault's reading lock
(``hypograph.vault.locking``): never in the middle of a structuring's write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hypograph.atomic import read_utf8
from hypograph.errors import HypographError
from hypograph.ids import ID_RE, canonical_id, id_sort_key
from hypograph.journal import Journal, Step
from hypograph.limits import encodable
from hypograph.paths import OURS, scan
from hypograph.vault.locking import reading_lock
from hypograph.vault.nodes import FILENAME_ID_RE, MAX_NODE_BYTES, Node, link_target, parse_node, read_node

SKIP_DIRS = {"agent-notes", "proximity", OURS, ".obsidian", ".git", ".trash"}

# node type -> (id prefix, folder), as the seed pipeline lays a vault out
NODE_TYPES: dict[str, tuple[str, str]] = {
    "hypothesis": ("H", "hypotheses"),
    "hypothesis-cluster": ("HC", "hypothesis-clusters"),
    "observation": ("O", "observations-and-facts"),
    "source": ("S", "sources"),
    "argument": ("A", "arguments"),
    "data-basis": ("D", "data-bases"),
    "evidence-link": ("E", "evidence-links"),
    "correlation-group": ("CG", "correlation-groups"),
}


@dataclass
class Vault:
    root: Path
    nodes: dict[str, Node]
    _by_type: dict[str, list[Node]] = field(default_factory=dict, repr=False, compare=False)

    def of_type(self, node_type: str) -> list[Node]:
        """The nodes of ``node_type`` by id (a new list; computed once until the index changes)."""
        if node_type not in self._by_type:
            self._by_type[node_type] = sorted(
                (n for n in self.nodes.values() if n.type == node_type), key=lambda n: id_sort_key(n.id)
            )
        return list(self._by_type[node_type])

    def apply(self, steps: list[Step]) -> int:
        """Write ``steps`` through the vault's journal (one plan) and take the written nodes into the
        index as they now are on disk. Returns the number of files changed."""
        changed = Journal(self.root).apply(steps)
        self.written(steps)
        return changed

    def written(self, steps: list[Step]) -> None:
        """Take the nodes ``steps`` wrote (applied by the caller) into the index."""
        for step in steps:
            node = parse_node(step.text, Path(step.to))
            if "id" in node.meta:
                self.nodes[node.id] = node
        if steps:
            self._by_type.clear()

    def add(self, rel: Path | str, text: str) -> Node:
        """Take a node just minted at ``rel`` (its file's ``text``) into the index."""
        node = parse_node(text, Path(rel))
        self.nodes[node.id] = node
        self._by_type.clear()
        return node

    def resolve(self, link) -> Node | None:
        """The node a wiki-link (``[[H-3 - T]]`` or ``[[H-3]]``) points at, by id."""
        target = link_target(link)
        return self.nodes.get(target) if target else None

    def main_question(self) -> str:
        """The run's question: ``initial_prompt.md`` (whole text; the model reads it)."""
        path = self.root / "initial_prompt.md"
        return read_utf8(path, MAX_NODE_BYTES) if path.exists() else ""


def node_files(root: Path):
    """Relative paths of candidate node files, sorted. The scan (``hypograph.paths.scan``) covers
    the whole input, so a forbidden symlink anywhere the tool reads or writes is refused here."""
    for rel in scan(root):
        if len(rel.parts) < 2 or any(p in SKIP_DIRS or p.startswith(".") for p in rel.parts[:-1]):
            continue  # top-level files are not nodes; nor is anything in the tool's folders
        if rel.suffix == ".md":
            if not encodable(rel.name):
                raise HypographError(f"{root / rel.parent}: a file name is not UTF-8 ({ascii(rel.name)}); rename it")
            yield rel


def open_vault(root: Path | str, roll_forward: bool = True) -> Vault:
    """Roll forward an interrupted write (unless told not to: a read-only look), then read every
    node. Errors name the file."""
    root = Path(root)
    if not root.is_dir():
        raise HypographError(f"{root}: not a directory")
    with reading_lock(root, roll_forward):
        return Vault(root, _read_nodes(root))


def _read_nodes(root: Path) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    spelled: dict[str, str] = {}  # canonical id -> the id as spelled (H-01 and H-1 collide)
    for rel in node_files(root):
        if not FILENAME_ID_RE.match(rel.name) and (root / rel).stat().st_size > MAX_NODE_BYTES:
            continue  # a note too large to read is no node: a node's file name starts with its id
        node = read_node(root, rel)
        if "id" not in node.meta:
            continue  # a plain note, not a node
        node_id = node.meta["id"]
        if not isinstance(node_id, str) or not ID_RE.match(node_id):
            raise HypographError(f"{rel}: field 'id': {node_id!r} is not an id like H-12")
        m = FILENAME_ID_RE.match(rel.name)
        if not m or m.group(1) != node_id:
            raise HypographError(f"{rel}: field 'id': {node_id} does not match the filename")
        other = spelled.get(canonical_id(node_id))
        if other is not None:
            raise HypographError(
                f"{rel}: field 'id': {node_id} is also the id of {nodes[other].path}"
                + ("" if other == node_id else f" (as {other})")
            )
        spelled[canonical_id(node_id)] = node_id
        nodes[node_id] = node
    return nodes


def require_vault(root: Path, what: str = "") -> None:
    """Refuse, in one line, a folder that is not a vault: it must hold step-3 nodes in
    ``hypotheses/*.md`` (or in its ``dropped/`` or ``merged/`` sub-folder: a vault whose step 4
    left nothing active is still one), and no prox run directory's ``H-*.json`` (an empty folder, a
    vault's parent or any unrelated tree is never scanned). ``what``: what named the folder (a
    flag, a field), said in the line."""
    root, named = Path(root), f" ({what})" if what else ""
    hyp = root / "hypotheses"
    if not root.is_dir():
        raise HypographError(f"{root}: no such vault directory{named}")
    if not hyp.is_dir():
        raise HypographError(f"{root}: not a vault (no hypotheses/ folder){named}")
    names = [p.name for d in (hyp, hyp / "dropped", hyp / "merged") if d.is_dir() for p in d.iterdir()]
    if any(n.startswith("H-") and n.endswith(".json") for n in names):
        raise HypographError(f"{root}: not a vault (hypotheses/ holds a prox run directory's H-*.json){named}")
    if not any(n.endswith(".md") for n in names):
        raise HypographError(f"{root}: not a vault (hypotheses/ holds no .md node){named}")
