"""4a's ledger, ``.hypograph/dispositions.json``: every pair and topic decision, kept so a pair or a
topic judged once is never asked again (a re-run on unchanged input costs no call)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from hypograph.atomic import STATE_MAX, read_regular, write_json
from hypograph.ids import id_sort_key
from hypograph.paths import OURS

LEDGER = Path(OURS) / "dispositions.json"


class PairDecision(BaseModel):
    pair: tuple[str, str]
    decision: Literal["MERGE", "KEEP"]
    rationale: str
    decided_by: str
    widened_statement: str | None = None
    generalization_note: str | None = None
    amended: str | None = None  # what Hypograph changed in the decision, and why (written only when set)
    # the model whose answer this offline decision stands in for (rejected, or a question it cannot
    # take): a re-run does not ask that model again (written only when set)
    declined_by: str | None = None


class TopicDecision(BaseModel):
    id: str
    drop: bool
    drop_reason: str | None = None
    decided_by: str


class Ledger(BaseModel):
    pairs: dict[str, PairDecision] = Field(default_factory=dict)
    topics: dict[str, TopicDecision] = Field(default_factory=dict)


def pair_key(a: str, b: str) -> str:
    """``"H-2|H-10"``: the pair's ids in natural order."""
    a, b = sorted((a, b), key=id_sort_key)
    return f"{a}|{b}"


def read_ledger(root: Path) -> Ledger:
    """The ledger of the input at ``root`` (none yet: an empty one), read bounded (``read_regular``:
    a FIFO or a device there is one HypographError line, never waited on)."""
    try:
        return Ledger.model_validate_json(read_regular(Path(root) / LEDGER, STATE_MAX, follow=True))
    except FileNotFoundError:
        return Ledger()


def write_ledger(root: Path, ledger: Ledger) -> None:
    doc = json.loads(ledger.model_dump_json())
    for d in doc["pairs"].values():
        for optional in ("amended", "declined_by"):  # the usual case: the ledger reads as before they existed
            if d.get(optional) is None:
                d.pop(optional, None)
    write_json(Path(root) / LEDGER, doc)
