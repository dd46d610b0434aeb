"""Id minting for the library: max-suffix + 1, never reused (library rounds, Phase 6).

``ids.json`` in tool state keeps the high-water marks (highest behavior number ever minted, and per
behavior the highest mechanism number) and every id ever minted with its batch. The next id is
one past the larger of the high-water mark and the highest id in the file, so an id survives a
person deleting its node by hand (even the highest one): it is never handed out again.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from hypograph.library.schema import BEHAVIOR_ID_RE, MECHANISM_ID_RE, Library
from hypograph.library.state import library_state, read_model, write_model


class IdLedger(BaseModel):
    behavior_hwm: int = 0
    mechanism_hwm: dict[str, int] = Field(default_factory=dict)
    minted: dict[str, str] = Field(default_factory=dict, description="id -> batch it was minted for")


def ledger_path(root: Path) -> Path:
    return library_state(root) / "ids.json"


def read_ledger(root: Path) -> IdLedger:
    return read_model(ledger_path(root), IdLedger) or IdLedger()


def write_ledger(root: Path, ledger: IdLedger) -> None:
    write_model(ledger_path(root), ledger)


class Minter:
    """Hands out ids for one persist; call only under the library lock."""

    def __init__(self, ledger: IdLedger, library: Library | None):
        self.ledger = ledger
        self.b_next = max(ledger.behavior_hwm, _max_behavior(library)) + 1
        self.m_next: dict[str, int] = {}
        self.library = library

    def behavior(self) -> str:
        bid = f"B{self.b_next}"
        self.b_next += 1
        return bid

    def mechanism(self, bid: str) -> str:
        if bid not in self.m_next:
            self.m_next[bid] = max(self.ledger.mechanism_hwm.get(bid, 0), _max_mechanism(self.library, bid)) + 1
        mid = f"{bid}-M{self.m_next[bid]}"
        self.m_next[bid] += 1
        return mid


def absorb(ledger: IdLedger, ids: dict[str, str], batch: str) -> IdLedger:
    """The ledger with ``ids`` (candidate key -> id) recorded as minted; idempotent."""
    out = ledger.model_copy(deep=True)
    for new_id in ids.values():
        out.minted.setdefault(new_id, batch)
        m = MECHANISM_ID_RE.match(new_id)
        if m:
            out.mechanism_hwm[m.group(1)] = max(out.mechanism_hwm.get(m.group(1), 0), int(m.group(2)))
        else:
            out.behavior_hwm = max(out.behavior_hwm, int(BEHAVIOR_ID_RE.match(new_id).group(1)))
    return out


def _max_behavior(library: Library | None) -> int:
    return max((int(BEHAVIOR_ID_RE.match(b.id).group(1)) for b in library.behaviors), default=0) if library else 0


def _max_mechanism(library: Library | None, bid: str) -> int:
    node = library.behavior(bid) if library else None
    return max((int(MECHANISM_ID_RE.match(m.id).group(2)) for m in node.mechanisms), default=0) if node else 0
