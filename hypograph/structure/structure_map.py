"""``agent-notes/structure.md``: the cluster inventory, counts, and a generated timestamp.

The file is rewritten only when something other than the timestamp changed, so a re-run on an
unchanged vault leaves it as it was; a map not written by Hypograph that still lists exactly the
vault's clusters is left alone.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from hypograph.atomic import read_utf8, write_text
from hypograph.structure import session
from hypograph.structure.members import BY_HAND
from hypograph.vault.locking import structuring_lock
from hypograph.vault.node_view import NodeView
from hypograph.vault.nodes import MAX_NODE_BYTES, Node
from hypograph.vault.vault import Vault

MAP = Path("agent-notes") / "structure.md"
GENERATED = "generated: "
MARK = "<!-- written by hypograph; rewritten when the clusters change -->"
HC_LINK_RE = re.compile(r"\[\[(HC-\d+)\b")


def vault_summary(vault: Vault) -> dict:
    """What a command's summary shows of the vault after step 4 (read from the run's record): the
    active hypotheses, each cluster node's hypotheses (its links, in order), each merged
    hypothesis's survivor and each dropped one's reason."""
    hyps = vault.of_type("hypothesis")
    return {
        "active": sum(h.meta.get("state") == "active" for h in hyps),
        "clusters": [
            [hc.path.stem, [str(x) for x in hc.meta.get("hypotheses") or []]]
            for hc in vault.of_type("hypothesis-cluster")
        ],
        "merged": [[h.id, str(h.meta.get("merged_into"))] for h in hyps if h.meta.get("state") == "merged"],
        "dropped": [[h.id, str(h.meta.get("drop_reason"))] for h in hyps if h.meta.get("state") == "dropped"],
    }


def structure_counts(vault: Vault) -> dict[str, int]:
    """H in (every H not minted at step 4: nothing is ever deleted), active, merged, dropped, the
    hypotheses minted at step 4 (residuals and constructed complements), clusters."""
    hyps = vault.of_type("hypothesis")
    views = [NodeView(h) for h in hyps]
    return {
        "H in (step 3)": sum(not v.minted for v in views),
        "active": sum(v.active for v in views),
        "merged": sum(v.merged for v in views),
        "dropped": sum(v.dropped for v in views),
        # hypotheses only, as the CLI's "hypotheses minted" counts them: the clusters (every one of
        # them minted at 4b too) are the next row
        "hypotheses minted at 4b (residuals, complements)": sum(v.minted for v in views),
        "clusters": len(vault.of_type("hypothesis-cluster")),
    }


def _cluster_lines(vault: Vault, n: int, hc: Node) -> list[str]:
    """Cluster ``n`` of the inventory: its link and question, then its members in order."""
    question = NodeView(hc).question
    lines = [f"{n}. [[{hc.path.stem}]]" + (f" — *{question}*" if question else "")]
    for k, member_id in enumerate(NodeView(hc).listed_ids, start=1):
        h = vault.nodes.get(member_id or "")
        suffix = " (residual)" if h is not None and NodeView(h).residual else ""
        lines.append(f"\t{k}. [[{h.path.stem if h else member_id}]]{suffix}")
    return lines


def render_map(vault: Vault, today: dt.date) -> str:
    lines = [
        "# Hypothesis structure (step 4)",
        "",
        f"{GENERATED}{today.isoformat()}",
        "",
        MARK,
        "",
        "## Cluster inventory",
        "",
    ]
    for n, hc in enumerate(vault.of_type("hypothesis-cluster"), start=1):
        lines += _cluster_lines(vault, n, hc)
    by_hand = [
        f"- [[{hc.path.stem}]]: {line.strip()[len(BY_HAND) :].strip()}"
        for hc in vault.of_type("hypothesis-cluster")
        for line in hc.body.splitlines()
        if line.strip().startswith(BY_HAND)
    ]
    if by_hand:  # a person's deliberate exceptions to the frozen member lists
        lines += ["", "## Changed by hand", "", *by_hand]
    lines += ["", "## Counts", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in structure_counts(vault).items()]
    return "\n".join(lines) + "\n"


def _without_timestamp(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith(GENERATED))


def write_map(vault: Vault | Path, today: dt.date | None = None) -> tuple[Path, bool]:
    """Write the map if its content changed; returns (path, whether it was written).

    ``vault``: the vault's root (or a Vault: only its root is used). The vault is read and the map
    written under the structuring lock, so the map written last describes the vault as it is
    (inside a ``structuring`` block: the index 4b left, not read again).

    A map another tool (or a person) wrote is kept as long as it lists exactly the vault's
    clusters: its prose may say more than ours would.
    """
    root = Path(vault.root if isinstance(vault, Vault) else vault)
    with structuring_lock(root):
        vault = session.open_for_step(root)
        path = root / MAP
        text = render_map(vault, today or dt.date.today())
        if path.exists():
            old = read_utf8(path, MAX_NODE_BYTES)
            if _without_timestamp(old) == _without_timestamp(text):
                return path, False
            listed = {hc.id for hc in vault.of_type("hypothesis-cluster")}
            if MARK not in old and set(HC_LINK_RE.findall(old)) == listed:
                return path, False
        return path, write_text(path, text)
