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
from hypograph.vault.node_view import NodeView, set_active, set_dropped, set_merged, set_provenance, widen
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
        followers = merged_into_index(vault).get(h.id, [])
    for node, why in [(h, reason)] + [(x, f"Follows its merge survivor {h.id}, dropped: {reason}") for x in followers]:
        set_dropped(node, why)
        out.append((node, Path("hypotheses/dropped") / node.path.name))
    return out


def merged_into_index(vault: Vault) -> dict[str, list[Node]]:
    """Active id -> the merged hypotheses whose ``merged_into`` names it, in id order."""
    out: dict[str, list[Node]] = {}
    for x in vault.of_type("hypothesis"):
        view = NodeView(x)
        if view.merged and view.merged_into_id:
            out.setdefault(view.merged_into_id, []).append(x)
    return out


def merge_groups(
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
    group = _starting_groups(active, earlier or {})
    keep = _kept_apart(ledger)
    for d in ledger.pairs.values():
        a, b = d.pair
        if d.decision != "MERGE" or a not in group or b not in group or group[a] is group[b]:
            continue
        clash = _keep_clash(group[a], group[b], keep)
        if clash is None:
            _join(group, group[a], group[b])
        elif blocked is not None:
            x, y = clash
            blocked.append(f"MERGE {a}/{b} not applied: it would put {x} and {y}, recorded KEEP, under one survivor")
    return _survivors(group, set(active))


def _starting_groups(active: list[str], earlier: dict[str, list[str]]) -> dict[str, set[str]]:
    """Id -> its group (shared sets): each active id alone, with the nodes merged into it before."""
    group: dict[str, set[str]] = {i: {i} for i in active}
    for survivor, members in earlier.items():
        if survivor in group:
            for m in members:
                if m not in group:
                    group[survivor].add(m)
                    group[m] = group[survivor]
    return group


def _kept_apart(ledger: Ledger) -> dict[str, set[str]]:
    """Id -> the ids a KEEP decision keeps it apart from."""
    keep: dict[str, set[str]] = {}
    for d in ledger.pairs.values():
        if d.decision == "KEEP":
            a, b = d.pair
            keep.setdefault(a, set()).add(b)
            keep.setdefault(b, set()).add(a)
    return keep


def _keep_clash(one: set[str], other: set[str], keep: dict[str, set[str]]) -> tuple[str, str] | None:
    """The first KEEP pair (by id) that joining groups ``one`` and ``other`` would put under one survivor."""
    small, large = sorted((one, other), key=len)
    clashes = [tuple(sorted((x, y), key=id_sort_key)) for x in small for y in keep.get(x, ()) if y in large]
    return min(clashes, key=lambda p: (id_sort_key(p[0]), id_sort_key(p[1]))) if clashes else None


def _join(group: dict[str, set[str]], one: set[str], other: set[str]) -> None:
    small, large = sorted((one, other), key=len)
    large |= small  # the smaller group joins the larger: each node moves O(log n) times
    for x in small:
        group[x] = large


def _survivors(group: dict[str, set[str]], listed: set[str]) -> dict[str, list[str]]:
    """Survivor (lowest listed id) -> the other listed ids of its group, for groups of two or more."""
    out: dict[str, list[str]] = {}
    for members in {id(g): g for g in group.values()}.values():
        ordered = sorted((m for m in members if m in listed), key=id_sort_key)
        if len(ordered) > 1:
            out[ordered[0]] = ordered[1:]
    return out


def earlier_members(vault: Vault, ids: list[str]) -> dict[str, list[str]]:
    """Each id of ``ids`` -> the hypotheses merged into it before: by their one-hop ``merged_into``
    and by its ``merged_from``, transitively (a survivor absorbed later brings its own along)."""
    into = {t: [x.id for x in xs] for t, xs in merged_into_index(vault).items()}
    out: dict[str, list[str]] = {}
    for s in ids:
        seen = _merged_under(vault, s, into)
        if seen:
            out[s] = seen
    return out


def _merged_under(vault: Vault, s: str, into: dict[str, list[str]]) -> list[str]:
    """The hypotheses of the vault merged into ``s``, directly or through one merged into it."""
    seen: list[str] = []
    todo = [s]
    while todo:
        x = todo.pop()
        node = vault.nodes.get(x)
        links = NodeView(node).merged_from_list_ids if node is not None else []
        for m in [*into.get(x, []), *links]:
            if m != s and m not in seen and m in vault.nodes:
                seen.append(m)
                todo.append(m)
    return seen


def _locator_entries(node: Node) -> list[str]:
    view = NodeView(node)
    loc = view.locator
    if isinstance(loc, list):
        return [str(x) for x in loc]
    sid = view.source_id
    return [f"{sid}: {loc}" if loc not in (None, "") else f"{sid}: unspecified"] if sid else []


def absorb(survivor: Node, absorbed: list[Node], widening: PairDecision | None) -> None:
    """Give ``survivor`` what it takes from ``absorbed``: their links in ``merged_from``, their
    sources in ``additional_sources``, their locators; and ``widening``'s statement, if it widens."""
    view = NodeView(survivor)
    merged_from = list(view.merged_from or [])
    extra = list(view.additional_sources or [])
    entries = _locator_entries(survivor)
    for x in absorbed:
        if x.link not in merged_from and link_target(x.link) not in {link_target(m) for m in merged_from}:
            merged_from.append(x.link)
        _add_source(extra, x, view.source_id)
        for entry in _locator_entries(x):
            _add_locator(entries, entry)
    set_active(survivor)
    set_provenance(survivor, merged_from, extra or None, entries)
    if widening and widening.widened_statement:
        widen(survivor, widening.widened_statement, widening.generalization_note)


def _add_source(extra: list, x: Node, own: str | None) -> None:
    """``x``'s source joins ``extra`` unless it is the survivor's own or listed already."""
    sid = NodeView(x).source_id
    if sid and sid != own and sid not in {link_target(e) for e in extra}:
        extra.append(NodeView(x).source)


def _add_locator(entries: list[str], entry: str) -> None:
    """``entry`` (``S-N: where``) joins ``entries``: a new source's entry is appended; for a source
    cited by both, only the places the survivor's entry does not list yet are added to it."""
    prefix, _, where = (part.strip() for part in entry.partition(":"))
    same = [k for k, e in enumerate(entries) if e.partition(":")[0].strip() == prefix]
    if not same:
        entries.append(entry)
        return
    have = entries[same[0]].partition(":")[2].strip()
    new = [w.strip() for w in where.split(";") if w.strip() and w.strip() not in [h.strip() for h in have.split(";")]]
    if new:
        entries[same[0]] = f"{prefix}: " + "; ".join([have] * bool(have) + new)


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
    groups = _groups(vault, ledger, [i for i in ids if i not in drops], report)
    followers = merged_into_index(vault)
    touched: dict[str, tuple[Node, Path]] = {}
    for node, line in stale_notes(vault, baseline):  # what an earlier version wrote from a non-widening
        touched[node.id] = (node, node.path)
        report.amended.append(line)
    widen_ = widening_merges(ledger)
    for survivor_id, absorbed_ids in groups.items():
        widening = group_widening(vault.nodes[survivor_id], absorbed_ids, ledger, baseline, widen_)
        absorbed = _merge_group(vault, survivor_id, absorbed_ids, followers, widening, touched)
        report.merged[survivor_id] = [x.id for x in absorbed]
    _drop_all(vault, drops, followers, touched, report)
    _reactivate(active, touched)
    report.files_changed = vault.apply(_steps(touched))
    absorbed_now = {x for a in groups.values() for x in a}
    report.active = [h.id for h in active if h.id not in drops and h.id not in absorbed_now]
    return report


def _groups(vault: Vault, ledger: Ledger, kept: list[str], report: DispositionReport) -> dict[str, list[str]]:
    """The merge groups of ``kept`` (``merge_groups``), counted in ``report`` as judged or chained."""
    groups = merge_groups(kept, ledger, earlier_members(vault, kept), report.blocked_by_keep)
    merged = merge_pairs(ledger)
    report.groups_chained = sum(chained(s, a, ledger, merged) for s, a in groups.items())
    report.groups_direct = len(groups) - report.groups_chained
    return groups


def _drop_all(
    vault: Vault,
    drops: dict[str, str],
    followers: dict[str, list[Node]],
    touched: dict[str, tuple[Node, Path]],
    report: DispositionReport,
) -> None:
    """Drop each of ``drops`` (id -> reason) with the nodes merged into it."""
    for h_id, reason in drops.items():
        for node, dest in drop(vault, vault.nodes[h_id], reason, followers.get(h_id, [])):
            touched[node.id] = (node, dest)
            report.dropped[node.id] = NodeView(node).drop_reason


def _merge_group(
    vault: Vault,
    survivor_id: str,
    absorbed_ids: list[str],
    followers: dict[str, list[Node]],
    widening: PairDecision | None,
    touched: dict[str, tuple[Node, Path]],
) -> list[Node]:
    """Merge one group: the survivor absorbs its members (and the nodes merged earlier into them,
    which follow to the new survivor, one hop); each goes into ``touched`` with its destination.
    Returns the nodes absorbed."""
    survivor, absorbed = vault.nodes[survivor_id], [vault.nodes[x] for x in absorbed_ids]
    for x in list(absorbed):
        absorbed += followers.get(x.id, [])
    absorb(survivor, absorbed, widening)
    touched[survivor.id] = (survivor, survivor.path)
    for x in absorbed:
        set_merged(x, survivor.link)
        touched[x.id] = (x, Path("hypotheses/merged") / x.path.name)
    return absorbed


def _reactivate(active: list[Node], touched: dict[str, tuple[Node, Path]]) -> None:
    """An active hypothesis no decision touched gets ``state: active`` written, if it lacks it."""
    for h in active:
        if h.id not in touched and not NodeView(h).active:
            set_active(h)
            touched[h.id] = (h, h.path)


def _steps(touched: dict[str, tuple[Node, Path]]) -> list[Step]:
    """One journal step per node changed or moved, in the order touched (survivors before the
    nodes merged into them: a merged node never points at a survivor not yet written)."""
    return [
        Step(to=str(dest), text=node.text(), src=str(node.path))
        for node, dest in touched.values()
        if node.changed or dest != node.path
    ]
