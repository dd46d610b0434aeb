"""``agent-notes/structure.md``: the cluster inventory, counts, and a generated timestamp.

The file is rewritten only when something other than the timestamp changed, so a re-run on an
unchanged vault leaves it as it was; a map not written by Hypograph that still lists exactly the
vault's clusters is left alone.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from hypograph.atomic import write_text
from hypograph.structure import session
from hypograph.structure.members import BY_HAND
from hypograph.vault.locking import structuring_lock
from hypograph.vault.nodes import link_target
from hypograph.vault.vault import Vault

MAP = Path("agent-notes") / "structure.md"
GENERATED = "generated: "
MARK = "<!-- written by hypograph; rewritten when the clusters change -->"
HC_LINK_RE = re.compile(r"\[\[(HC-\d+)\b")


def structure_counts(vault: Vault) -> dict[str, int]:
    """H in (every H not minted at step 4: nothing is ever deleted), active, merged, dropped, minted, clusters."""
    hyps = vault.of_type("hypothesis")
    state = lambda s: sum(h.meta.get("state") == s for h in hyps)  # noqa: E731
    return {
        "H in (step 3)": sum(not h.meta.get("origin") for h in hyps),
        "active": state("active"),
        "merged": state("merged"),
        "dropped": state("dropped"),
        "minted at 4b": sum(bool(h.meta.get("origin")) for h in hyps) + len(vault.of_type("hypothesis-cluster")),
        "clusters": len(vault.of_type("hypothesis-cluster")),
    }


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
        question = hc.meta.get("question")
        lines.append(f"{n}. [[{hc.path.stem}]]" + (f" — *{question}*" if question else ""))
        for k, link in enumerate(hc.meta.get("hypotheses") or [], start=1):
            h = vault.nodes.get(link_target(link) or "")
            suffix = " (residual)" if h is not None and h.meta.get("residual") is True else ""
            lines.append(f"\t{k}. [[{h.path.stem if h else link_target(link)}]]{suffix}")
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
            old = path.read_text(encoding="utf-8")
            if _without_timestamp(old) == _without_timestamp(text):
                return path, False
            listed = {hc.id for hc in vault.of_type("hypothesis-cluster")}
            if MARK not in old and set(HC_LINK_RE.findall(old)) == listed:
                return path, False
        return path, write_text(path, text)
