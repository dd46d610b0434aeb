"""4a's merge mechanics, applied through the journal: survivor = lowest id; absorbed nodes get
``state: merged`` and a one-hop ``merged_into`` and move to ``hypotheses/merged/``; the survivor gains
``merged_from``, ``additional_sources``, a per-source ``locator`` list and, if widened, a new
statement plus ``generalization_note``. Drops move to ``hypotheses/dropped/`` with their reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from hypograph.ids import id_sort_key
from hypograph.journal import Step
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
    # MERGE pairs not applied because the join would put a KEEP pair under one survivor (chained)
    blocked_by_keep: list[str] = field(default_factory=list)
    resumed: str | None = None  # what of an interrupted structuring this run completed, if any


def drop(vault: Vault, h: Node, reason: str, followers: list[Node] | None = None) -> list[tuple[Node, Path]]:
    """Mark ``h`` dropped, and with it the nodes merged into it (merged_into must name an active H;
    the merge stays on record as ``former_merged_into``, as the seed pipeline does). Returns each
    changed node with its destination in ``hypotheses/dropped/``. ``followers``: the nodes merged
    into ``h``, when the caller has them indexed (else the vault is searched)."""
    out = []
    if followers is None:
        followers = [
            x
            for x in vault.of_type("hypothesis")
            if x.meta.get("state") == "merged" and link_target(x.meta.get("merged_into")) == h.id
        ]
    for node, why in [(h, reason)] + [(x, f"Follows its merge survivor {h.id}, dropped: {reason}") for x in followers]:
        node.meta["state"] = "dropped"
        node.meta["drop_reason"] = why
        if "merged_into" in node.meta:
            node.meta["former_merged_into"] = node.meta.pop("merged_into")
        out.append((node, Path("hypotheses/dropped") / node.path.name))
    return out


def merged_into_index(vault: Vault) -> dict[str, list[Node]]:
    """Active id -> the merged hypotheses whose ``merged_into`` names it, in id order."""
    out: dict[str, list[Node]] = {}
    for x in vault.of_type("hypothesis"):
        if x.meta.get("state") == "merged":
            target = link_target(x.meta.get("merged_into"))
            if target:
                out.setdefault(target, []).append(x)
    return out


def merge_groups(  # noqa: C901
    active: list[str],
    ledger: Ledger,
    earlier: dict[str, list[str]] | None = None,
    blocked: list[str] | None = None,
) -> dict[str, list[str]]:
    """Survivor (lowest id) -> the ids of ``active`` it absorbs. MERGE pairs join groups in ledger
    order, unless the join would put two nodes recorded KEEP under one survivor (no merging by
    transitivity alone).

    ``earlier``: survivor in ``active`` -> the nodes merged into it before (by an earlier run, or by
    this one before it was interrupted). They stay in their survivor's group: a MERGE naming one
    joins its survivor's group, and a KEEP naming one blocks as if it were still active. They are
    not listed as absorbed (they follow their survivor; ``apply_dispositions``). ``blocked``: a list
    given here gets one line per join a KEEP blocked, in ledger order."""
    group: dict[str, set[str]] = {i: {i} for i in active}
    for survivor, members in (earlier or {}).items():
        if survivor in group:
            for m in members:
                if m not in group:
                    group[survivor].add(m)
                    group[m] = group[survivor]
    keep: dict[str, set[str]] = {}
    for d in ledger.pairs.values():
        if d.decision == "KEEP":
            a, b = d.pair
            keep.setdefault(a, set()).add(b)
            keep.setdefault(b, set()).add(a)
    for d in ledger.pairs.values():
        a, b = d.pair
        if d.decision != "MERGE" or a not in group or b not in group or group[a] is group[b]:
            continue
        small, large = sorted((group[a], group[b]), key=len)
        clashes = [tuple(sorted((x, y), key=id_sort_key)) for x in small for y in keep.get(x, ()) if y in large]
        if clashes:
            if blocked is not None:
                x, y = min(clashes, key=lambda p: (id_sort_key(p[0]), id_sort_key(p[1])))
                blocked.append(
                    f"MERGE {a}/{b} not applied: it would put {x} and {y}, recorded KEEP, under one survivor"
                )
            continue
        large |= small  # the smaller group joins the larger: each node moves O(log n) times
        for x in small:
            group[x] = large
    listed = set(active)
    out: dict[str, list[str]] = {}
    for members in {id(g): g for g in group.values()}.values():
        ordered = sorted((m for m in members if m in listed), key=id_sort_key)
        if len(ordered) > 1:
            out[ordered[0]] = ordered[1:]
    return out


def earlier_members(vault: Vault, ids: list[str]) -> dict[str, list[str]]:
    """Each id of ``ids`` -> the hypotheses merged into it before: by their one-hop ``merged_into``
    and by its ``merged_from``, transitively (a survivor absorbed later brings its own along)."""
    into: dict[str, list[str]] = {}
    for h in vault.of_type("hypothesis"):
        if h.meta.get("state") == "merged":
            target = link_target(h.meta.get("merged_into"))
            if target:
                into.setdefault(target, []).append(h.id)
    out: dict[str, list[str]] = {}
    for s in ids:
        seen: list[str] = []
        todo = [s]
        while todo:
            x = todo.pop()
            node = vault.nodes.get(x)
            merged_from = node.meta.get("merged_from") if node is not None else None
            links = [link_target(m) for m in merged_from] if isinstance(merged_from, list) else []
            for m in [*into.get(x, []), *(t for t in links if t)]:
                if m != s and m not in seen and m in vault.nodes:
                    seen.append(m)
                    todo.append(m)
        if seen:
            out[s] = seen
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
            new = [
                w.strip()
                for w in where.split(";")
                if w.strip() and w.strip() not in [h.strip() for h in have.split(";")]
            ]
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


def group_widening(
    survivor: Node,
    absorbed_ids: list[str],
    ledger: Ledger,
    baseline: dict | None,
    widening: list[PairDecision] | None = None,
) -> PairDecision | None:
    """The widening the group takes: from a MERGE pair holding the survivor if one widens, else from
    any MERGE pair of the group (ledger order); never one that repeats the survivor's statement.
    ``widening``: the ledger's widening MERGE decisions, when the caller asks for many groups."""
    group = {survivor.id, *absorbed_ids}
    if widening is None:
        widening = widening_merges(ledger)
    widenings = [
        d
        for d in widening
        if set(d.pair) <= group and widening_problem(d.widened_statement, [survivor], baseline) is None
    ]
    return next((d for d in widenings if survivor.id in d.pair), next(iter(widenings), None))


def widening_merges(ledger: Ledger) -> list[PairDecision]:
    """The MERGE decisions that widen a statement, in ledger order."""
    return [d for d in ledger.pairs.values() if d.decision == "MERGE" and d.widened_statement]


def chained(survivor: str, absorbed: list[str], ledger: Ledger, merged: set[frozenset] | None = None) -> bool:
    """Whether the group holds a pair no decision judged MERGE (it was closed by chaining).
    ``merged``: the ledger's MERGE pairs, when the caller asks for many groups."""
    if merged is None:
        merged = merge_pairs(ledger)
    return any(frozenset(p) not in merged for p in combinations([survivor, *absorbed], 2))


def merge_pairs(ledger: Ledger) -> set[frozenset]:
    return {frozenset(d.pair) for d in ledger.pairs.values() if d.decision == "MERGE"}


def apply_dispositions(vault: Vault, ledger: Ledger) -> DispositionReport:
    """Plan every file change from the ledger and apply it through the journal (one plan)."""
    active = active_hypotheses(vault)
    ids = [h.id for h in open_to_4a(vault)]
    baseline = read_baseline(vault.root)
    report = DispositionReport(decisions=len(ledger.pairs) + len(ledger.topics))
    drops = {t.id: t.drop_reason for t in ledger.topics.values() if t.drop and t.id in ids}
    kept = [i for i in ids if i not in drops]
    groups = merge_groups(kept, ledger, earlier_members(vault, kept), report.blocked_by_keep)
    merged = merge_pairs(ledger)
    report.groups_chained = sum(chained(s, a, ledger, merged) for s, a in groups.items())
    report.groups_direct = len(groups) - report.groups_chained
    followers = merged_into_index(vault)
    widen = widening_merges(ledger)
    steps: list[Step] = []
    touched: dict[str, tuple[Node, Path]] = {}
    for node, line in stale_notes(vault, baseline):  # what an earlier version wrote from a non-widening
        touched[node.id] = (node, node.path)
        report.amended.append(line)
    for survivor_id, absorbed_ids in groups.items():
        survivor, absorbed = vault.nodes[survivor_id], [vault.nodes[x] for x in absorbed_ids]
        # Nodes merged earlier into one being absorbed now follow it to the new survivor (one hop).
        for x in list(absorbed):
            absorbed += followers.get(x.id, [])
        widening = group_widening(survivor, absorbed_ids, ledger, baseline, widen)
        absorb(survivor, absorbed, widening)
        touched[survivor.id] = (survivor, survivor.path)
        for x in absorbed:
            x.meta["state"] = "merged"
            x.meta["merged_into"] = survivor.link
            touched[x.id] = (x, Path("hypotheses/merged") / x.path.name)
        report.merged[survivor_id] = [x.id for x in absorbed]
    for h_id, reason in drops.items():
        for node, dest in drop(vault, vault.nodes[h_id], reason, followers.get(h_id, [])):
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
    report.files_changed = vault.apply(steps)
    absorbed_now = {x for a in groups.values() for x in a}
    report.active = [h.id for h in active if h.id not in drops and h.id not in absorbed_now]
    return report
