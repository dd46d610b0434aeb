"""Phase 6: merge a round's scored survivors into ``hypothesis_library.json``, crash-safely.

``persist_round(L, round_key)`` under the library lock:

1. the file is read and validated first (an invalid file is an error naming the field, and is
   never overwritten);
2. ids for scored survivors not yet planned are minted (``ledger.Minter``) and saved in
   ``rounds/<key>/persist.json`` *before* the library is written, then recorded in ``ids.json``;
   a re-run after a crash reuses the plan, so no id is ever consumed twice;
3. the plan is applied to the raw JSON: new nodes appended (``status: candidate``, batch stamp),
   mechanisms appended under an existing given behavior, duplicates' nuance added to ``notes``;
   nodes already present are left alone, so applying twice changes nothing; after a re-score,
   the round's nodes get the new impact / novelty (nothing else of theirs changes);
4. the file is written atomically; ``MANIFEST.md`` gets one entry when the file is first created;
   the plan is marked complete.

A round with a survivor the scorer rejected never gets here (``score.Unscored``): no node without
impact / novelty, and no behavior dropped for good.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from hypograph.atomic import read_utf8, write_json, write_text
from hypograph.errors import HypographError
from hypograph.ids import key_number, numbered_key
from hypograph.library.checks import require_sound
from hypograph.library.ledger import Minter, absorb, read_ledger, write_ledger
from hypograph.library.rounds import (
    BehaviorScores,
    CandidateBehavior,
    CandidateMechanism,
    PersistPlan,
    RoundCandidates,
    RoundDedup,
    RoundScores,
)
from hypograph.library.schema import LIBRARY_FILE, Library, empty_library, library_path, read_library, validate_library
from hypograph.library.state import (
    library_lock,
    read_model,
    round_dir,
    write_model,
)


def round_plan(root: Path, key: str) -> PersistPlan | None:
    return read_model(round_dir(root, key) / "persist.json", PersistPlan)


def round_persisted(root: Path, key: str) -> bool:
    plan = round_plan(root, key)
    return bool(plan and plan.complete)


def require_previous_rounds(root: Path, key: str) -> None:
    """HypographError unless every round before ``key`` has persisted (rounds build on each other)."""
    for n in range(1, key_number(key)):
        if not round_persisted(root, numbered_key(n)):
            raise HypographError(
                f"round {key} cannot be generated before round {numbered_key(n)} has persisted "
                "(each round's banlist is the library the earlier rounds left)"
            )


def load_round(root: Path, key: str, name: str, model):
    value = read_model(round_dir(root, key) / f"{name}.json", model)
    if value is None:
        raise HypographError(f"round {key}: no {name} yet (run the round's earlier steps first)")
    return value


def persist_round(
    root: Path, key: str, dedup: RoundDedup | None = None, scores: RoundScores | None = None
) -> PersistPlan:
    """Merge round ``key``'s scored survivors into the library; returns the completed plan."""
    candidates = load_round(root, key, "candidates", RoundCandidates)
    dedup = dedup or load_round(root, key, "dedup", RoundDedup)
    scores = scores or load_round(root, key, "scores", RoundScores)
    with library_lock(root):
        plan = round_plan(root, key) or PersistPlan(round=key)
        if plan.complete and plan.scores_digest == scores.digest:
            return plan
        require_sound(root)  # a library failing its own checks is never written to
        loaded = read_library(root)
        library, raw = loaded if loaded else (None, empty_library(candidates.settings.topic, candidates.date))
        plan = _extend_plan(root, plan, library, dedup, scores, candidates.batch)
        rescored = bool(plan.applied)  # the round was written before: only restamp scores on its nodes
        changed = _apply(raw, plan, dedup, scores, candidates.batch, rescore=rescored)
        if changed or loaded is None:
            raw["updated"] = dt.date.today().isoformat() if loaded else raw["updated"]
            validate_library(raw, library_path(root))  # never write a file that would not read back
            write_json(library_path(root), raw)
            if loaded is None:
                _manifest_entry(root, candidates.settings.topic, candidates.date)
        plan.applied = sorted(set(plan.applied) | set(plan.ids.values()) | {f"notes:{b}" for b in plan.notes})
        plan.complete, plan.scores_digest = True, scores.digest
        write_model(round_dir(root, key) / "persist.json", plan)
        return plan


def _extend_plan(
    root: Path, plan: PersistPlan, library: Library | None, dedup: RoundDedup, scores: RoundScores, batch: str
) -> PersistPlan:
    """Mint ids for scored survivors the plan does not have yet; save plan, then ledger."""
    by_key = {s.key: s for s in scores.behaviors if s.rejected is None}
    minter = Minter(read_ledger(root), library)
    new = plan.model_copy(deep=True)
    for b in dedup.survivors:
        if b.key in by_key:
            _mint(new, minter, b, by_key[b.key])
    new.notes.update({v.of: v.nuance for v in dedup.verdicts if v.nuance and v.of and not v.of.startswith("c")})
    if new != plan:
        new.complete = False
        write_model(round_dir(root, plan.round) / "persist.json", new)
    write_ledger(root, absorb(minter.ledger, new.ids, batch))
    return new


def _mint(plan: PersistPlan, minter: Minter, b: CandidateBehavior, s: BehaviorScores) -> None:
    """Record in ``plan`` the id of scored survivor ``b`` (its target's in given mode, else one
    minted once) and of each of its scored mechanisms not minted yet."""
    if b.existing_id:
        plan.targets[b.key] = b.existing_id
    elif b.key not in plan.ids:
        plan.ids[b.key] = minter.behavior()
    bid = b.existing_id or plan.ids[b.key]
    for m in b.mechanisms:
        if m.key in s.novelty and m.key not in plan.ids:
            plan.ids[m.key] = minter.mechanism(bid)


def _apply(raw: dict, plan: PersistPlan, dedup: RoundDedup, scores: RoundScores, batch: str, rescore: bool) -> bool:
    """Apply ``plan`` to the raw library dict in place; True if anything changed."""
    write = _Write(raw, plan, batch, rescore)
    by_key = {s.key: s for s in scores.behaviors if s.rejected is None}
    changed = False
    for b in dedup.survivors:
        s = by_key.get(b.key)
        bid = plan.targets.get(b.key) or plan.ids.get(b.key)
        if s is not None and bid is not None:
            changed |= write.behavior(bid, b, s)
    changed |= write.notes()
    return changed


@dataclass
class _Write:
    """Applying one round's plan to the raw library dict (``rescore``: the round was written before,
    so scores on its nodes are restamped)."""

    raw: dict
    plan: PersistPlan
    batch: str
    rescore: bool
    nodes: dict[str, dict] = field(init=False)

    def __post_init__(self) -> None:
        self.nodes = {b["id"]: b for b in self.raw["behaviors"]}

    def behavior(self, bid: str, b: CandidateBehavior, s: BehaviorScores) -> bool:
        """Add behavior ``bid`` (never one a person deleted), or restamp its impact, then its
        mechanisms; True if anything changed."""
        node = self.nodes.get(bid)
        if node is None and b.existing_id:
            raise HypographError(
                f"{LIBRARY_FILE}: behavior {bid} (the round's given behavior) is no longer in the file"
            )
        if node is None and bid in self.plan.applied:
            return False  # a person deleted it after the round was written: never re-added
        changed = False
        if node is None:
            node = _behavior_node(bid, b, s, self.batch)
            self.raw["behaviors"].append(node)
            self.nodes[bid] = node
            changed = True
        elif s.impact is not None and (self.rescore or "impact" not in node):
            changed |= _set(node, "impact", _impact(s))
        changed |= _apply_mechanisms(node, b, s, self.plan, self.batch, self.rescore)
        return changed

    def notes(self) -> bool:
        """Append the dedup judge's nuances to the kept nodes, once each; True if anything changed."""
        changed = False
        for bid, nuance in self.plan.notes.items():
            node = self.nodes.get(bid)
            if node is not None and f"notes:{bid}" not in self.plan.applied and nuance not in node.get("notes", ""):
                node["notes"] = f"{node['notes']} {nuance}".strip() if node.get("notes") else nuance
                changed = True
        return changed


def _apply_mechanisms(
    node: dict, b: CandidateBehavior, s: BehaviorScores, plan: PersistPlan, batch: str, rescore: bool
) -> bool:
    """Add ``b``'s scored mechanisms missing from ``node`` (never one a person deleted), or rescore
    those present; True if anything changed."""
    changed = False
    present = {m.get("id") for m in node.setdefault("mechanisms", [])}
    for m in b.mechanisms:
        mid = plan.ids.get(m.key)
        if mid is None or m.key not in s.novelty:
            continue
        if mid not in present and mid not in plan.applied:
            node["mechanisms"].append(_mechanism_node(mid, m, s, batch))
            changed = True
        elif mid in present and rescore:
            leaf = next(x for x in node["mechanisms"] if x.get("id") == mid)
            changed |= _set(leaf, "novelty", _novelty(s, m.key))
    return changed


def _set(node: dict, field: str, value: dict) -> bool:
    if node.get(field) == value:
        return False
    node[field] = value
    return True


def _impact(s: BehaviorScores) -> dict:
    return {**s.impact.model_dump(mode="json", exclude_none=True), "method": s.method, "date": s.date}


def _novelty(s: BehaviorScores, key: str) -> dict:
    """A mechanism's novelty as the file keeps it: ``llm-chat+web`` only when its closest prior work
    is a retrieved paper (papers shown but the closest from the model's memory: ``llm-chat``)."""
    novelty = s.novelty[key]
    score = {
        k: v for k, v in novelty.model_dump(mode="json", exclude_none=True).items() if not (k == "closest_id" and not v)
    }
    method = "llm-chat" if novelty.closest_source == "memory" else s.method
    return {**score, "method": method, "date": s.date}


def _behavior_node(bid: str, b: CandidateBehavior, s: BehaviorScores, batch: str) -> dict:
    return {
        "id": bid,
        "source": b.source,
        "discovery_strategy": b.discovery_strategy,
        "discovery_strategy_detail": b.discovery_strategy_detail,
        "statement": b.statement,
        "five_bars": b.five_bars.model_dump(mode="json"),
        "impact": _impact(s),
        "gaps": list(b.gaps),
        "notes": "",
        "batch": batch,
        "mechanisms": [],
    }


def _mechanism_node(mid: str, m: CandidateMechanism, s: BehaviorScores, batch: str) -> dict:
    return {
        "id": mid,
        "strategy": m.strategy,
        "directions": list(m.directions),
        "hypothesis": m.hypothesis,
        "boring_null": m.boring_null,
        "data": m.data.model_dump(mode="json"),
        "model": list(m.model),
        "novelty": _novelty(s, m.key),
        "status": "candidate",
        "batch": batch,
    }


MANIFEST_MAX = 16 << 20  # MANIFEST.md: a line per file; a larger one is refused unread


def _manifest_entry(root: Path, topic: str, date: str) -> None:
    """One line in ``MANIFEST.md`` for the library file's creation (the file is created if absent)."""
    path = Path(root) / "MANIFEST.md"
    old = read_utf8(path, MANIFEST_MAX) if path.exists() else "# Manifest\n\n"
    line = (
        f"- {date} `{LIBRARY_FILE}` — hypothesis-batch: tree library of behaviors → mechanisms "
        f'for topic "{topic}" (created)\n'
    )
    write_text(path, old + ("" if old.endswith("\n") else "\n") + line)
