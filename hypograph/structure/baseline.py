"""What step 3 handed over, recorded once per vault in ``.hypograph/step3-baseline.json``.

Checks 1 and 5 need it: "nothing deleted" (every step-3 id still has a file), "source never
rewritten" and "generalization_note iff the statement was widened". It is written at the first
structuring run and only ever extended (a step-3 node added later joins it); it is never rewritten.
A vault structured by another tool has no baseline, and those sub-checks are skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypograph.atomic import STATE_MAX, read_regular, write_json
from hypograph.paths import OURS
from hypograph.vault.node_view import NodeView
from hypograph.vault.vault import Vault

BASELINE = Path(OURS) / "step3-baseline.json"


def read_baseline(root: Path) -> dict[str, dict] | None:
    try:  # bounded: a FIFO or a device here is one line, never waited on
        return json.loads(read_regular(Path(root) / BASELINE, STATE_MAX, follow=True))["hypotheses"]
    except FileNotFoundError:
        return None


def record_baseline(vault: Vault) -> dict[str, dict]:
    """Add every step-3 H node not yet recorded (no ``state``, no step-4 origin) and return all."""
    known = read_baseline(vault.root) or {}
    added = False
    for h in vault.of_type("hypothesis"):
        view = NodeView(h)
        if h.id in known or view.has_state or view.minted:
            continue
        known[h.id] = {"statement": view.statement, "source": view.source, "locator": view.locator}
        added = True
    if added or not (vault.root / BASELINE).exists():
        write_json(vault.root / BASELINE, {"hypotheses": known})
    return known
