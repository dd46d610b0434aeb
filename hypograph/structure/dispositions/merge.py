"""4a's merge mechanics, applied through the journal: survivor = lowest id; absorbed nodes get
``state: merged`` and a one-hop ``merged_into`` and move to ``hypotheses/merged/``; the survivor gains
``merged_from``, ``additional_sources``, a per-source ``locator`` list and, if widened, a new
statement plus ``generalization_note``. Drops move to ``hypotheses/dropped/`` with their reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from hypograph.ids import id_sort_key
from hypograph.journal import Journal, Step
from hypograph.structure.baseline import read_baseline
from hypograph.structure.dispositions.amend import stale_notes, widening_problem
from hypograph.structure.dispositions.ledger import Ledger, PairDecision
from hypograph.structure.scope import active_hypotheses, open_to_4a
from hypograph.vault.nodes import Node, link_target
from hypograph.vault.vault import Vault


@dataclass
class DispositionReport:
    merged: dict[str, list[str]] = field(default_factory=dict)  # survivor -> absorbed
    dropped: dict[str, str] = field(default_factory=dict)  # id -> reason
    active: list[str] = field(default_factory=list)
    files_changed: int = 0
    decisions: int = 0
    candidates: int = 0  # candidate pairs this run (proximity's pairs plus the net)
    judged: int = 0  # pairs put to the policy this run
    groups_direct: int = 0  # MERGE groups whose every pair was judged MERGE
    groups_chained: int = 0  # MERGE groups that hold a pair no one judged (closed by chaining)
    amended: list[str] = field(default_factory=list)  # decisions or files amended so the vault completes
    by_hand: list[str] = field(default_factory=list)  # human MERGEs applied to clustered hypotheses
    refused: list[str] = field(default_factory=list)  # human MERGEs refused, with the reason


def drop(vault: Vault, h: Node, reason: str) -> list[tuple[Node, Path]]:
    """Mark ``h`` dropped, and with it the nodes merged into it (merged_into must name an active H;
    the merge stays on record as ``former_merged_into``, as the seed pipeline does). Returns each
    changed node with its destination in ``hypotheses/dropped/``."""
    out = []
    for node, why in [(h, reason)] + [
            (x, f"Follows its merge survivor {h.id}, dropped: {reason}") for x in vault.of_type("hypothesis")
            if x.meta.get("state") == "merged" and link_target(x.meta.get("merged_into")) == h.id]:
        node.meta["state"] = "dropped"
        node.meta["drop_reason"] = why
        if "merged_into" in node.meta:
            node.meta["former_merged_into"] = node.meta.pop("merged_into")
        out.append((node, Path("hypotheses/dropped") / node.path.name))
    return out


def merge_groups(active: list[str], ledger: Ledger) -> dict[str, list[str]]:
    """Survivor (lowest id) -> absorbed ids. MERGE pairs join groups in ledger order, unless a KEEP
    lies between the two groups (no merging by transitivity alone)."""
    group = {i: {i} for i in active}
    keep = {frozenset(d.pair) for d in ledger.pairs.values() if d.decision == "KEEP"}
    for d in ledger.pairs.values():
        a, b = d.pair
        if d.decision != "MERGE" or a not in group or b not in group or group[a] is group[b]:
            continue
        if any(frozenset((x, y)) in keep for x in group[a] for y in group[b]):
            continue
        merged = group[a] | group[b]
        for x in merged:
            group[x] = merged
    out: dict[str, list[str]] = {}
    for members in {id(g): g for g in group.values()}.values():
        if len(members) > 1:
            ordered = sorted(members, key=id_sort_key)
            out[ordered[0]] = ordered[1:]
    return out


def _source_id(node: Node) -> str | None:
    return link_target(node.meta.get("source"))


def _locator_entries(node: Node) -> list[str]:
    loc = node.meta.get("locator")
    if isinstance(loc, list):
        return [str(x) for x in loc]
    sid = _source_id(node)
    return [f"{sid}: {loc}" if loc not in (None, "") else f"{sid}: unspecified"] if sid else []


def absorb(survivor: Node, absorbed: list[Node], widening: PairDecision | None) -> None:
    meta = survivor.meta
    own = _source_id(survivor)
    merged_from = list(meta.get("merged_from") or [])
    extra = list(meta.get("additional_sources") or [])
    entries = _locator_entries(survivor)
    for x in absorbed:
        if x.link not in merged_from and link_target(x.link) not in {link_target(m) for m in merged_from}:
            merged_from.append(x.link)
        sid = _source_id(x)
        if sid and sid != own and sid not in {link_target(e) for e in extra}:
            extra.append(x.meta["source"])
        for entry in _locator_entries(x):
            prefix, _, where = (part.strip() for part in entry.partition(":"))
            same = [k for k, e in enumerate(entries) if e.partition(":")[0].strip() == prefix]
            if not same:
                entries.append(entry)
                continue
            have = entries[same[0]].partition(":")[2].strip()
            # Same source cited by both: add only the places the survivor's entry does not list yet.
            new = [w.strip() for w in where.split(";")
                   if w.strip() and w.strip() not in [h.strip() for h in have.split(";")]]
            if new:
                entries[same[0]] = f"{prefix}: " + "; ".join([have] * bool(have) + new)
    meta["state"] = "active"
    meta["merged_from"] = merged_from
    if extra:
        meta["additional_sources"] = extra
    meta["locator"] = entries
    if widening and widening.widened_statement:
        meta["statement"] = widening.widened_statement
        meta["generalization_note"] = widening.generalization_note


def group_widening(survivor: Node, absorbed_ids: list[str], ledger: Ledger,
                   baseline: dict | None) -> PairDecision | None:
    """The widening the group takes: from a MERGE pair holding the survivor if one widens, else from
    any MERGE pair of the group (ledger order); never one that repeats the survivor's statement."""
    group = {survivor.id, *absorbed_ids}
    widenings = [d for d in ledger.pairs.values()
                 if d.decision == "MERGE" and d.widened_statement and set(d.pair) <= group
                 and widening_problem(d.widened_statement, [survivor], baseline) is None]
    return next((d for d in widenings if survivor.id in d.pair), next(iter(widenings), None))


def chained(survivor: str, absorbed: list[str], ledger: Ledger) -> bool:
    """Whether the group holds a pair no decision judged MERGE (it was closed by chaining)."""
    merged = {frozenset(d.pair) for d in ledger.pairs.values() if d.decision == "MERGE"}
    return any(frozenset(p) not in merged for p in combinations([survivor, *absorbed], 2))


def apply_dispositions(vault: Vault, ledger: Ledger) -> DispositionReport:
    """Plan every file change from the ledger and apply it through the journal."""
    active = active_hypotheses(vault)
    ids = [h.id for h in open_to_4a(vault)]
    baseline = read_baseline(vault.root)
    report = DispositionReport(decisions=len(ledger.pairs) + len(ledger.topics))
    drops = {t.id: t.drop_reason for t in ledger.topics.values() if t.drop and t.id in ids}
    groups = merge_groups([i for i in ids if i not in drops], ledger)
    report.groups_chained = sum(chained(s, a, ledger) for s, a in groups.items())
    report.groups_direct = len(groups) - report.groups_chained
    steps: list[Step] = []
    touched: dict[str, tuple[Node, Path]] = {}
    for node, line in stale_notes(vault, baseline):  # what an earlier version wrote from a non-widening
        touched[node.id] = (node, node.path)
        report.amended.append(line)
    for survivor_id, absorbed_ids in groups.items():
        survivor, absorbed = vault.nodes[survivor_id], [vault.nodes[x] for x in absorbed_ids]
        # Nodes merged earlier into one being absorbed now follow it to the new survivor (one hop).
        for x in list(absorbed):
            absorbed += [m for m in vault.of_type("hypothesis")
                         if m.meta.get("state") == "merged" and link_target(m.meta.get("merged_into")) == x.id]
        widening = group_widening(survivor, absorbed_ids, ledger, baseline)
        absorb(survivor, absorbed, widening)
        touched[survivor.id] = (survivor, survivor.path)
        for x in absorbed:
            x.meta["state"] = "merged"
            x.meta["merged_into"] = survivor.link
            touched[x.id] = (x, Path("hypotheses/merged") / x.path.name)
        report.merged[survivor_id] = [x.id for x in absorbed]
    for h_id, reason in drops.items():
        for node, dest in drop(vault, vault.nodes[h_id], reason):
            touched[node.id] = (node, dest)
            report.dropped[node.id] = node.meta["drop_reason"]
    for h in active:
        if h.id not in touched and h.meta.get("state") != "active":
            h.meta["state"] = "active"
            touched[h.id] = (h, h.path)
    # Survivors first, then moves: a merged node never points at a survivor not yet written.
    for node, dest in touched.values():
        if node.changed or dest != node.path:
            steps.append(Step(to=str(dest), text=node.text(), src=str(node.path)))
    report.files_changed = Journal(vault.root).apply(steps)
    report.active = [h.id for h in active if h.id not in drops and not any(h.id in a for a in groups.values())]
    return report
