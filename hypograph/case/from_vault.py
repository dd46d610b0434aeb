"""A vault as a case: ``hypograph case from-vault VAULT CASE_DIR``.

The catalogue is the vault's observations (``O-N``, kind ``human_observation``: a recorded
observation or fact) and sources (``S-N``, kind ``report``: a publication, described by its
summary); the question is ``initial_prompt.md``'s quoted main question (else its whole text);
each observation becomes an accepted statement citing itself and its source; the reported
behavior to explain is the question. The node files and ``initial_prompt.md`` are copied
byte-for-byte under ``case/rNNNN/`` as the revision's inputs. The revision is unconfirmed: a
person confirms it with ``hypograph case confirm``. The vault is only read; the manifest names it
as the case's ``target_vault``, the vault its batches are minted into.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypograph.atomic import read_utf8
from hypograph.case.models import Source, Statement
from hypograph.case.revision import NewRevision, RevisionReport, add_revision
from hypograph.errors import HypographError
from hypograph.paths import OURS
from hypograph.vault.node_view import NodeView
from hypograph.vault.nodes import MAX_NODE_BYTES, Node
from hypograph.vault.vault import open_vault

QUESTION_RE = re.compile(r"Main question[^:\n]*:\s*[\"“](.+?)[\"”]\s*$", re.M)
SUMMARY_RE = re.compile(r"\*\*summary\*\*\s*[-—:]\s*(.+?)(?:\n\s*\n|\Z)", re.S)


def question_of(prompt: str) -> str:
    m = QUESTION_RE.search(prompt)
    return m.group(1).strip() if m else prompt.strip()


def _text(root: Path, rel: Path) -> str:
    return read_utf8(root / rel, MAX_NODE_BYTES)


def _summary(node: Node) -> str:
    m = SUMMARY_RE.search(node.body)
    return " ".join(m.group(1).split()) if m else ""


def case_from_vault(vault_root: Path | str, case_dir: Path | str) -> RevisionReport:
    """Record the vault's current state as a new unconfirmed revision of ``case_dir`` (created if
    missing); unchanged since the last revision: nothing written."""
    root = Path(vault_root)
    if (root / OURS / "journal.json").exists():
        raise HypographError(
            f"{root / OURS / 'journal.json'}: the vault has an interrupted write; "
            "finish it first (any hypograph command on the vault rolls it forward)"
        )
    vault = open_vault(root, roll_forward=False)  # a read-only look: the vault is not ours to write
    prompt_path = root / "initial_prompt.md"
    if not prompt_path.is_file():
        raise HypographError(f"{prompt_path}: missing; a vault case needs its question")
    prompt = _text(root, Path("initial_prompt.md"))
    observations = vault.of_type("observation")
    if not observations:
        raise HypographError(f"{root / 'observations-and-facts'}: no observation nodes; no case without observations")
    inputs = {"vault/initial_prompt.md": prompt}
    sources: list[Source] = []
    for s in vault.of_type("source"):
        inputs[f"vault/{s.path.as_posix()}"] = _text(root, s.path)
        sources.append(
            Source(
                id=s.id, kind="report", title=s.title or s.id, summary=_summary(s), origin=f"vault/{s.path.as_posix()}"
            )
        )
    known = {s.id for s in sources}
    statements = []
    for o in observations:
        text = o.meta.get("statement")
        if not isinstance(text, str) or not text.strip():
            raise HypographError(f"{root / o.path}: field 'statement': an observation needs its statement")
        inputs[f"vault/{o.path.as_posix()}"] = _text(root, o.path)
        sources.append(
            Source(
                id=o.id,
                kind="human_observation",
                title=o.title or o.id,
                summary=text,
                origin=f"vault/{o.path.as_posix()}",
            )
        )
        cited = [o.id] + [t for t in [NodeView(o).source_id] if t in known]
        statements.append(Statement(text=text, source_ids=cited))
    question = question_of(prompt)
    revision = NewRevision(
        question, statements, sources, {"reported_behavior": Statement(text=question, source_ids=[])}, inputs
    )
    return add_revision(case_dir, revision, target_vault=root)
