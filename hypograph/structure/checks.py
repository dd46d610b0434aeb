"""The seed's six binary checks of step 4, on a vault, and a seventh of Hypograph's. Each returns
(node id, reason) violations.

Checks 1 and 5 gate 4a; 2, 3 and 4 gate 4b; 6 applies to both; 7 (no two hypotheses under one
survivor recorded KEEP) gates 4a, whose merges it checks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from pathlib import Path

from hypograph.atomic import STATE_MAX, read_regular
from hypograph.ids import id_number, id_sort_key
from hypograph.paths import OURS
from hypograph.proximity.adjudicate import read_reviews
from hypograph.vault.node_view import NodeView
from hypograph.vault.nodes import Node, link_target
from hypograph.vault.vault import Vault

Violation = tuple[str, str]
LINK_TEXT_RE = re.compile(r"!?\[\[[^\]|]*")  # a link's target (a node's title); an |alias is text
STATES = ("active", "merged", "dropped")
FOLDER = {"active": Path("hypotheses"), "merged": Path("hypotheses/merged"), "dropped": Path("hypotheses/dropped")}
NUMBERISH = re.compile(
    r"(?<![\w.-])(?:0?\.\d+|1\.0+)(?!\w|\.\d)"  # 0.35, .2, 1.0 (a full stop after is fine)
    r"|\d+(?:\.\d+)?\s?(?:%|percent\b)"  # 35%, 35 percent
    r"|\b(?:weight|rank|prior|likelihood|probability|odds)\s*[:=]\s*\S",
    re.I,
)


def _blank(value) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or value == []


# -- check 1: one state each -------------------------------------------------------------------------


def check_1_states(vault: Vault, baseline: dict | None) -> list[Violation]:
    """Exactly one state; merged -> one hop to an active H; dropped -> drop_reason; right folder;
    every step-3 hypothesis still has a file."""
    out = [v for h in vault.of_type("hypothesis") for v in _state_rules(vault, h)]
    return out + [
        (gone, "step-3 hypothesis has no file any more") for gone in sorted(set(baseline or {}) - set(vault.nodes))
    ]


def _state_rules(vault: Vault, h: Node) -> list[Violation]:
    state = NodeView(h).state
    if state not in STATES:
        return [(h.id, f"state is {state!r}, not one of active / merged / dropped")]
    out: list[Violation] = []
    if h.path.parent != FOLDER[state]:
        out.append((h.id, f"state {state} but the file is in {h.path.parent}/, not {FOLDER[state]}/"))
    if state == "merged":
        out += _one_hop(vault, h)
    if state == "dropped" and _blank(NodeView(h).drop_reason):
        out.append((h.id, "dropped without a drop_reason"))
    return out


def _one_hop(vault: Vault, h: Node) -> list[Violation]:
    """A merged node's ``merged_into`` names an active hypothesis."""
    into = NodeView(h).merged_into
    target = vault.resolve(into)
    if target is None or target.type != "hypothesis":
        return [(h.id, f"merged_into {into!r} does not resolve to a hypothesis")]
    if not NodeView(target).active:
        return [(h.id, f"merged_into {target.id}, which is {NodeView(target).state!r}, not active (one hop)")]
    return []


# -- check 2: well-formed clusters ---------------------------------------------------------------------


def _clusters(vault: Vault) -> list[Node]:
    return vault.of_type("hypothesis-cluster")


def _member_order_ok(members: list[Node]) -> bool:
    residual = [m for m in members if NodeView(m).residual]
    named = [m for m in members if not NodeView(m).residual]
    if residual and members[-1] is not residual[-1]:
        return False
    numbers = [id_number(m.id) for m in named]
    return numbers == sorted(numbers)


def check_2_clusters(vault: Vault) -> list[Violation]:
    """HC nodes in hypothesis-clusters/, filename begins with the id, >= 2 distinct active members
    ascending-id / residual-last, exclusivity and independence non-empty, keys present."""
    return [v for hc in _clusters(vault) for rule in CLUSTER_RULES for v in rule(vault, hc)]


def _cluster_place(_vault: Vault, hc: Node) -> list[Violation]:
    """In hypothesis-clusters/, its filename beginning with its id."""
    out: list[Violation] = []
    if hc.path.parent != Path("hypothesis-clusters"):
        out.append((hc.id, f"not in hypothesis-clusters/ but in {hc.path.parent}/"))
    if not hc.path.name.startswith(f"{hc.id} - ") and hc.path.stem != hc.id:
        out.append((hc.id, "filename does not begin with its id"))
    return out


def _cluster_member_list(_vault: Vault, hc: Node) -> list[Violation]:
    """``hypotheses``: a list of links, each once, at least two."""
    view = NodeView(hc)
    links, targets = view.hypotheses, view.member_ids
    out: list[Violation] = []
    if not isinstance(links, list) or len(targets) != len(links):
        out.append((hc.id, "hypotheses is not a list of [[H-N]] links"))
    if len(set(targets)) != len(targets):
        out.append((hc.id, "a member is listed twice"))
    if len(set(targets)) < 2:
        out.append((hc.id, f"{len(set(targets))} distinct member(s); at least 2 required"))
    return out


def _cluster_members(vault: Vault, hc: Node) -> list[Violation]:
    """Every member an active hypothesis; named members by ascending id, the residual last."""
    targets = NodeView(hc).member_ids
    members = [vault.nodes.get(t) for t in targets]
    out: list[Violation] = []
    for t, m in zip(targets, members, strict=True):
        if m is None or m.type != "hypothesis":
            out.append((hc.id, f"member {t} is not a hypothesis node"))
        elif not NodeView(m).active:
            out.append((hc.id, f"member {t} is {NodeView(m).state!r}, not active"))
    real = [m for m in members if m is not None]
    if real and not _member_order_ok(real):
        out.append((hc.id, "members not in ascending-id order with the residual last"))
    return out


def _cluster_fields(_vault: Vault, hc: Node) -> list[Violation]:
    """exclusivity and independence non-empty; depends_on and exhaustive_by_construction present."""
    view = NodeView(hc)
    out: list[Violation] = []
    for key, value in (("exclusivity", view.exclusivity), ("independence", view.independence)):
        if _blank(value):
            out.append((hc.id, f"{key} is empty"))
    for key, present in (
        ("depends_on", view.has_depends_on),
        ("exhaustive_by_construction", view.has_exhaustive_field),
    ):
        if not present:
            out.append((hc.id, f"key {key} missing"))
    return out


# check 2's rules, in the order their violations are listed for each cluster
CLUSTER_RULES = (_cluster_place, _cluster_member_list, _cluster_members, _cluster_fields)


# -- check 3: one residual, or a justified exhaustive cluster -------------------------------------------


def check_3_residuals(vault: Vault) -> list[Violation]:
    """Exactly one residual, listed last — or exhaustive_by_construction with a body that names
    an analysis-failure mode and the member it favours."""
    return [v for hc in _clusters(vault) for v in _residual_or_exhaustive(vault, hc)]


def _residual_or_exhaustive(vault: Vault, hc: Node) -> list[Violation]:
    members = [vault.nodes.get(t) for t in NodeView(hc).member_ids]
    return _exhaustive_rules(hc, members) if NodeView(hc).exhaustive else _residual_rules(hc, members)


def _exhaustive_rules(hc: Node, members: list[Node | None]) -> list[Violation]:
    """No residual member, and a body that names the member a failure would favour."""
    out: list[Violation] = []
    if any(m is not None and NodeView(m).residual for m in members):
        out.append((hc.id, "exhaustive_by_construction but has a residual member"))
    if not names_a_member(hc, [m for m in members if m is not None]):
        out.append(
            (
                hc.id,
                "exhaustive_by_construction without a body justification naming the member a failure would favour",
            )
        )
    return out


def names_a_member(hc: Node, members: list[Node]) -> bool:
    """Whether ``hc``'s body prose (its embed lines left out) names one of ``members`` by id."""
    prose = "\n".join(line for line in hc.body.splitlines() if not line.strip().startswith("![["))
    return bool(prose.strip()) and any(re.search(rf"\b{re.escape(m.id)}\b", prose) for m in members)


def _residual_rules(hc: Node, members: list[Node | None]) -> list[Violation]:
    """Exactly one residual member, listed last."""
    residuals = [m for m in members if m is not None and NodeView(m).residual]
    if len(residuals) != 1:
        return [(hc.id, f"{len(residuals)} residual members; exactly 1 required (not exhaustive)")]
    if members[-1] is not residuals[0]:
        return [(hc.id, f"residual {residuals[0].id} is not listed last")]
    return []


# -- check 4: every active hypothesis in one cluster ------------------------------------------------


def check_4_membership(vault: Vault) -> list[Violation]:
    """Every active H in exactly one HC, its cluster backlink naming that HC."""
    out: list[Violation] = []
    where: dict[str, list[str]] = {}
    for hc in _clusters(vault):
        for t in set(NodeView(hc).member_ids):
            where.setdefault(t, []).append(hc.id)
    for h_id, hcs in sorted(where.items(), key=lambda kv: id_sort_key(kv[0])):  # not in set order: same every run
        if len(hcs) > 1:
            out.append((h_id, f"in {len(hcs)} clusters: {', '.join(sorted(hcs))}"))
    for h in vault.of_type("hypothesis"):
        view = NodeView(h)
        if not view.active:
            continue
        hcs = where.get(h.id, [])
        if not hcs:
            out.append((h.id, "active but in no cluster"))
        elif view.cluster_id not in hcs:
            out.append((h.id, f"cluster backlink {view.cluster!r} does not name {hcs[0]}"))
    return out


# -- check 5: survivors keep their provenance ------------------------------------------------------------


def merged_into_ids(vault: Vault) -> dict[str, list[str]]:
    """Id -> the ids of the merged hypotheses whose ``merged_into`` names it, in id order."""
    into: dict[str, list[str]] = {}
    for h in vault.of_type("hypothesis"):
        view = NodeView(h)
        if view.merged and view.merged_into_id:
            into.setdefault(view.merged_into_id, []).append(h.id)
    return into


def check_5_survivors(vault: Vault, baseline: dict | None) -> list[Violation]:
    """Survivors: merged_from, single unchanged source, additional_sources = the absorbed sources
    (disjoint from source), one locator per source, generalization_note iff widened. Active H
    without a source: residual, or origin step-4-constructed with a reason."""
    absorbed_by = merged_into_ids(vault)
    hyps = vault.of_type("hypothesis")
    survivors = [h for h in hyps if NodeView(h).active and (h.id in absorbed_by or NodeView(h).merged_from_ids)]
    out = [v for h in survivors for v in _survivor_rules(vault, h, absorbed_by.get(h.id, []), baseline)]
    return out + [v for h in hyps for v in _sourceless_rule(h)]


def _survivor_rules(vault: Vault, h: Node, absorbed: list[str], baseline: dict | None) -> list[Violation]:
    step3 = (baseline or {}).get(h.id)
    return [
        *_merged_from_rule(h, absorbed),
        *_source_rule(h, step3),
        *_additional_sources_rule(vault, h),
        *_locator_rule(h),
        *_generalization_rule(h, step3),
    ]


def _merged_from_rule(h: Node, absorbed: list[str]) -> list[Violation]:
    """``merged_from`` lists every node merged into the survivor."""
    merged_from = NodeView(h).merged_from_ids
    out: list[Violation] = []
    if not merged_from:
        out.append((h.id, "survivor without merged_from"))
    missing = set(absorbed) - set(merged_from)
    if missing:
        out.append((h.id, f"merged_from lacks {', '.join(sorted(missing))}"))
    return out


def _source_rule(h: Node, step3: dict | None) -> list[Violation]:
    """One ``source`` link, the step-3 one."""
    source = NodeView(h).source
    if not isinstance(source, str) or not link_target(source):
        return [(h.id, "source is not a single [[S-N]] link")]
    if step3 is not None and link_target(step3.get("source")) != link_target(source):
        return [(h.id, "source was rewritten")]
    return []


def _additional_sources_rule(vault: Vault, h: Node) -> list[Violation]:
    """``additional_sources``: the absorbed nodes' sources, without the survivor's own."""
    view = NodeView(h)
    own = view.source_id
    from_nodes = [vault.nodes[m] for m in view.merged_from_ids if m in vault.nodes]
    expected = {NodeView(n).source_id for n in from_nodes} - {None}
    extra = set(view.additional_source_ids)
    out: list[Violation] = []
    if extra != expected - {own} or not expected <= extra | {own}:
        out.append((h.id, f"additional_sources {sorted(extra)} != absorbed sources {sorted(expected)}"))
    if own in extra:
        out.append((h.id, "additional_sources repeats the node's own source"))
    return out


def _locator_rule(h: Node) -> list[Violation]:
    """One ``S-N: where`` locator entry per source."""
    view = NodeView(h)
    locators = view.locator
    wanted = ({view.source_id} | set(view.additional_source_ids)) - {None}  # a source that is no link is flagged above
    prefixes = [str(loc).split(":", 1)[0].strip() for loc in locators] if isinstance(locators, list) else []
    if not isinstance(locators, list) or sorted(prefixes) != sorted(wanted):
        return [(h.id, f"locator should be one 'S-N: where' entry per source {sorted(wanted)}")]
    return []


def _generalization_rule(h: Node, step3: dict | None) -> list[Violation]:
    """A ``generalization_note`` exactly when the statement was widened from step 3's."""
    if step3 is None:
        return []
    view = NodeView(h)
    widened = step3.get("statement") != view.statement
    if widened == (not _blank(view.generalization_note)):
        return []
    if widened:
        return [(h.id, "statement widened without a generalization_note")]
    return [(h.id, "generalization_note present without a widened statement")]


def _sourceless_rule(h: Node) -> list[Violation]:
    """An active hypothesis without a source is a residual, or constructed at step 4 with a reason."""
    view = NodeView(h)
    if not view.active or not _blank(view.source) or view.residual:
        return []
    if view.constructed and h.body.strip():
        return []
    return [(h.id, "no source, not a residual, and not origin: step-4-constructed with a reason")]


def _numbers(value, path: str) -> list[str]:
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        return [f"{path} = {value}"]
    if isinstance(value, str):
        m = NUMBERISH.search(LINK_TEXT_RE.sub(" ", value))  # a linked node's title is not a step-4 value
        return [f"{path} contains {m.group(0)!r}"] if m else []
    if isinstance(value, list):
        return [x for k, v in enumerate(value) for x in _numbers(v, f"{path}[{k}]")]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _numbers(v, f"{path}.{k}")]
    return []


def check_6_no_numbers(vault: Vault) -> list[Violation]:
    """No step-4-owned field (H disposition fields, every HC field) holds a number or weight."""
    out: list[Violation] = []
    for node in [*vault.of_type("hypothesis"), *_clusters(vault)]:  # an HC node is step 4's entirely
        for key, value in NodeView(node).step4_values():
            out += [(node.id, f"{x}: step-4 fields hold no numbers") for x in _numbers(value, key)]
    return out


def _under(vault: Vault, survivor: str, into: dict[str, list[str]]) -> list[str]:
    seen = {survivor}
    todo = [survivor]
    while todo:
        x = todo.pop()
        node = vault.nodes.get(x)
        merged_from = NodeView(node).merged_from_list_ids if node is not None else []
        for m in [*merged_from, *into.get(x, [])]:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return sorted(seen, key=id_sort_key)


LEDGER_FILE = Path(OURS) / "dispositions.json"  # 4a's ledger (``dispositions.ledger.LEDGER``)


def recorded_keeps(root: Path, current: Collection[str] = ()) -> dict[frozenset, str]:
    """Every pair recorded KEEP — on 4a's ledger (a model's, the offline policy's, a person's, an
    unmerge) or in ``proximity/review.json`` (a person's) — with who decided it. The ledger is read
    as plain JSON, bounded (a check reads what is there, and an unreadable ledger holds no KEEP to
    check); review.json through its one reader, ``read_reviews``, which refuses a file that cannot
    be applied as a whole in one line (``current``: the ids of the vault's nodes)."""
    out: dict[frozenset, str] = {}
    for d in _json_list(Path(root) / LEDGER_FILE, lambda doc: list((doc.get("pairs") or {}).values())):
        if _is_pair(d) and d.get("decision") == "KEEP":
            out[frozenset(d["pair"])] = str(d.get("decided_by") or "?")
    for key, review in read_reviews(Path(root), current).items():
        if review.verdict == "KEEP":
            out.setdefault(key, "human")
    return out


def _json_list(path: Path, items) -> list:
    """``items(doc)`` of the JSON file ``path`` if it is a list, else []; a FIFO, a device or a file
    over ``STATE_MAX`` is a HypographError line (never waited on, never read whole)."""
    try:
        found = items(json.loads(read_regular(path, STATE_MAX, follow=True)))
    except (OSError, ValueError, AttributeError, TypeError):
        return []
    return found if isinstance(found, list) else []


def _is_pair(entry) -> bool:
    pair = entry.get("pair") if isinstance(entry, dict) else None
    return isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(p, str) for p in pair)


def check_7_keep_apart(vault: Vault, keeps: dict[frozenset, str] | None = None) -> list[Violation]:
    """No two hypotheses under one survivor (itself and its merged_from, transitively) are recorded
    KEEP, by a person or a model: a merge never joins, by chaining, what a decision kept apart."""
    keeps = recorded_keeps(vault.root, vault.nodes) if keeps is None else keeps
    if not keeps:
        return []
    into = merged_into_ids(vault)
    survivors = [
        h for h in vault.of_type("hypothesis") if NodeView(h).active and (NodeView(h).merged_from or h.id in into)
    ]
    return [v for h in survivors for v in _keeps_under(h.id, _under(vault, h.id, into), keeps)]


def _keeps_under(survivor: str, group: list[str], keeps: dict[frozenset, str]) -> list[Violation]:
    """One violation per pair of ``group`` (the hypotheses under ``survivor``) recorded KEEP."""
    out: list[Violation] = []
    for k, x in enumerate(group):
        for y in group[k + 1 :]:
            who = keeps.get(frozenset((x, y)))
            if who is not None:
                out.append(
                    (survivor, f"{x} and {y} are both under survivor {survivor} but recorded KEEP (decided by {who})")
                )
    return out


def run_check(number: int, vault: Vault, baseline: dict | None) -> list[Violation]:
    """Check ``number``: 1-6 of the seed, 7 Hypograph's (``CHECK_NAMES``)."""
    if number == 1:
        return check_1_states(vault, baseline)
    if number == 5:
        return check_5_survivors(vault, baseline)
    return {
        2: check_2_clusters,
        3: check_3_residuals,
        4: check_4_membership,
        6: check_6_no_numbers,
        7: check_7_keep_apart,
    }[number](vault)


def all_checks(vault: Vault, baseline: dict | None) -> dict[int, list[Violation]]:
    """Run checks 1-7; {check number: violations}."""
    return {n: run_check(n, vault, baseline) for n in CHECK_NAMES}


# check number -> (predicate name, what it asserts): the names the asset checks and the CLI show.
CHECK_NAMES: dict[int, tuple[str, str]] = {
    1: (
        "every_hypothesis_has_one_state",
        "every H has one state; merged resolves in one hop; drops have reasons; folders match; nothing deleted",
    ),
    2: ("clusters_are_well_formed", "HC nodes well-formed: folder, id, >= 2 active members in order, required keys"),
    3: ("each_cluster_has_one_residual", "exactly one residual listed last, or a justified exhaustive cluster"),
    4: ("every_active_hypothesis_in_one_cluster", "every active H in exactly one HC, its backlink naming it"),
    5: (
        "survivors_keep_their_provenance",
        "survivors' merged_from, sources, locators and generalization notes; sourceless H are residual or constructed",
    ),
    6: ("no_numbers_in_step4_fields", "no step-4 field holds a number, probability, weight or rank"),
    7: (
        "no_keep_pair_under_one_survivor",
        "no two hypotheses under one survivor (it and its merged_from, transitively) are recorded KEEP",
    ),
}
