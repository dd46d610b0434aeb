"""``agent-notes/structure.md``: the cluster inventory, counts, and a generated timestamp.

The file is rewritten only when something other than the timestamp changed, so a re-run on an
unchanged vault leaves it as it was.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from hypograph.atomic import write_text
from hypograph.vault.nodes import link_target
from hypograph.vault.vault import Vault

MAP = Path("agent-notes") / "structure.md"
GENERATED = "generated: "


def structure_counts(vault: Vault, baseline: dict | None) -> dict[str, int]:
    hyps = vault.of_type("hypothesis")
    state = lambda s: sum(h.meta.get("state") == s for h in hyps)  # noqa: E731
    return {
        "H in (step 3)": len(baseline) if baseline is not None else sum(not h.meta.get("origin") for h in hyps),
        "active": state("active"), "merged": state("merged"), "dropped": state("dropped"),
        "minted at 4b": sum(bool(h.meta.get("origin")) for h in hyps) + len(vault.of_type("hypothesis-cluster")),
        "clusters": len(vault.of_type("hypothesis-cluster")),
    }


def render_map(vault: Vault, baseline: dict | None, today: dt.date) -> str:
    lines = ["# Hypothesis structure (step 4)", "", f"{GENERATED}{today.isoformat()}", "", "## Cluster inventory", ""]
    for n, hc in enumerate(vault.of_type("hypothesis-cluster"), start=1):
        question = hc.meta.get("question")
        lines.append(f"{n}. [[{hc.path.stem}]]" + (f" — *{question}*" if question else ""))
        for k, link in enumerate(hc.meta.get("hypotheses") or [], start=1):
            h = vault.nodes.get(link_target(link) or "")
            suffix = " (residual)" if h is not None and h.meta.get("residual") is True else ""
            lines.append(f"\t{k}. [[{h.path.stem if h else link_target(link)}]]{suffix}")
    lines += ["", "## Counts", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in structure_counts(vault, baseline).items()]
    return "\n".join(lines) + "\n"


def _without_timestamp(text: str) -> str:
    return "\n".join(l for l in text.splitlines() if not l.startswith(GENERATED))


def write_map(vault: Vault, baseline: dict | None, today: dt.date | None = None) -> tuple[Path, bool]:
    """Write the map if its content changed; returns (path, whether it was written)."""
    path = vault.root / MAP
    text = render_map(vault, baseline, today or dt.date.today())
    if path.exists() and _without_timestamp(path.read_text(encoding="utf-8")) == _without_timestamp(text):
        return path, False
    return path, write_text(path, text)
