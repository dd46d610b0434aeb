"""A whole vault: every node under its folders, looked up by id, written through a journal.

Nodes are ``.md`` files with an ``id`` in their frontmatter, in any sub-folder except the tool's own
(``agent-notes/``, ``proximity/``, ``.hypograph/``, dot-folders). Top-level files such as
``initial_prompt.md`` or a problem log are not nodes and are never touched.

Writes go through ``hypograph.journal.Journal``: the whole plan (moves and new texts) is saved
first, then applied one file at a time, each step atomic and idempotent; if a run dies half-way,
the next ``open_vault`` rolls the plan forward before reading. Nothing is ever deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hypograph.errors import HypographError
from hypograph.ids import ID_RE, canonical_id, id_sort_key
from hypograph.journal import Journal
from hypograph.limits import encodable
from hypograph.paths import scan
from hypograph.vault.nodes import FILENAME_ID_RE, Node, link_target, read_node

SKIP_DIRS = {"agent-notes", "proximity", ".hypograph", ".obsidian", ".git", ".trash"}

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

    def of_type(self, node_type: str) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.type == node_type), key=lambda n: id_sort_key(n.id))

    def resolve(self, link) -> Node | None:
        """The node a wiki-link (``[[H-3 - T]]`` or ``[[H-3]]``) points at, by id."""
        target = link_target(link)
        return self.nodes.get(target) if target else None

    def main_question(self) -> str:
        """The run's question: ``initial_prompt.md`` (whole text; the model reads it)."""
        path = self.root / "initial_prompt.md"
        return path.read_text(encoding="utf-8") if path.exists() else ""


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
    if roll_forward:
        Journal(root).roll_forward()
    nodes: dict[str, Node] = {}
    spelled: dict[str, str] = {}  # canonical id -> the id as spelled (H-01 and H-1 collide)
    for rel in node_files(root):
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
            raise HypographError(f"{rel}: field 'id': {node_id} is also the id of {nodes[other].path}"
                                 + ("" if other == node_id else f" (as {other})"))
        spelled[canonical_id(node_id)] = node_id
        nodes[node_id] = node
    return Vault(root, nodes)


def require_vault(root: Path) -> None:
    """Refuse, in one line, a folder that is not a vault: it must hold step-3 nodes in ``hypotheses/*.md``
    (an empty folder, a vault's parent or any unrelated tree is never scanned)."""
    hyp = Path(root) / "hypotheses"
    if not hyp.is_dir():
        raise HypographError(f"{root}: not a vault (no hypotheses/ folder)")
    if not any(p.suffix == ".md" for p in hyp.iterdir()):
        raise HypographError(f"{root}: not a vault (hypotheses/ holds no .md node)")
