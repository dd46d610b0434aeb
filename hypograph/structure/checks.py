"""The seed's six binary checks of step 4, on a vault, and a seventh of Hypograph's. Each returns
(node id, reason) violations.

Checks 1 and 5 gate 4a; 2, 3 and 4 gate 4b; 6 applies to both; 7 (no two hypotheses under one
survivor recorded KEEP) gates 4a, whose merges it checks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypograph.ids import id_number, id_sort_key
from hypograph.paths import OURS
from hypograph.vault.nodes import Node, link_target
from hypograph.vault.vault import Vault

Violation = tuple[str, str]
LINK_TEXT_RE = re.compile(r"!?\[\[[^\]|]*")  # a link's target (a node's title); an |alias is text
STATES = ("active", "merged", "dropped")
FOLDER = {"active": Path("hypotheses"), "merged": Path("hypotheses/merged"), "dropped": Path("hypotheses/dropped")}
H_FIELDS_4 = (
    "state",
    "cluster",
    "merged_into",
    "merged_from",
    "additional_sources",
    "generalization_note",
    "drop_reason",
    "residual",
    "origin",
)
NUMBERISH = re.compile(
    r"(?<![\w.-])(?:0?\.\d+|1\.0+)(?!\w|\.\d)"  # 0.35, .2, 1.0 (a full stop after is fine)
    r"|\d+(?:\.\d+)?\s?(?:%|percent\b)"  # 35%, 35 percent
    r"|\b(?:weight|rank|prior|likelihood|probability|odds)\s*[:=]\s*\S",
    re.I,
)


def _blank(value) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or value == []


def _links(value) -> list[str]:
    if isinstance(value, str):
        value = [value]
    return [t for t in (link_target(v) for v in (value or [])) if t]


def check_1_states(vault: Vault, baseline: dict | None) -> list[Violation]:
    """Exactly one state; merged -> one hop to an active H; dropped -> drop_reason; right folder;
    every step-3 hypothesis still has a file."""
    out: list[Violation] = []
    for h in vault.of_type("hypothesis"):
        state = h.meta.get("state")
        if state not in STATES:
            out.append((h.id, f"state is {state!r}, not one of active / merged / dropped"))
            continue
        if h.path.parent != FOLDER[state]:
            out.append((h.id, f"state {state} but the file is in {h.path.parent}/, not {FOLDER[state]}/"))
        if state == "merged":
            target = vault.resolve(h.meta.get("merged_into"))
            if target is None or target.type != "hypothesis":
                out.append((h.id, f"merged_into {h.meta.get('merged_into')!r} does not resolve to a hypothesis"))
            elif target.meta.get("state") != "active":
                out.append(
                    (h.id, f"merged_into {target.id}, which is {target.meta.get('state')!r}, not active (one hop)")
                )
        if state == "dropped" and _blank(h.meta.get("drop_reason")):
            out.append((h.id, "dropped without a drop_reason"))
    for missing in sorted(set(baseline or {}) - set(vault.nodes)):
        out.append((missing, "step-3 hypothesis has no file any more"))
    return out


def _clusters(vault: Vault) -> list[Node]:
    return vault.of_type("hypothesis-cluster")


def _member_order_ok(members: list[Node]) -> bool:
    residual = [m for m in members if m.meta.get("residual") is True]
    named = [m for m in members if m.meta.get("residual") is not True]
    if residual and members[-1] is not residual[-1]:
        return False
    numbers = [id_number(m.id) for m in named]
    return numbers == sorted(numbers)


def check_2_clusters(vault: Vault) -> list[Violation]:  # noqa: C901 - one flat checklist, a branch per rule
    """HC nodes in hypothesis-clusters/, filename begins with the id, >= 2 distinct active members
    ascending-id / residual-last, exclusivity and independence non-empty, keys present."""
    out: list[Violation] = []
    for hc in _clusters(vault):
        if hc.path.parent != Path("hypothesis-clusters"):
            out.append((hc.id, f"not in hypothesis-clusters/ but in {hc.path.parent}/"))
        if not hc.path.name.startswith(f"{hc.id} - ") and hc.path.stem != hc.id:
            out.append((hc.id, "filename does not begin with its id"))
        links = hc.meta.get("hypotheses")
        targets = _links(links)
        if not isinstance(links, list) or len(targets) != len(links):
            out.append((hc.id, "hypotheses is not a list of [[H-N]] links"))
        members = [vault.nodes.get(t) for t in targets]
        if len(set(targets)) != len(targets):
            out.append((hc.id, "a member is listed twice"))
        if len(set(targets)) < 2:
            out.append((hc.id, f"{len(set(targets))} distinct member(s); at least 2 required"))
        for t, m in zip(targets, members, strict=True):
            if m is None or m.type != "hypothesis":
                out.append((hc.id, f"member {t} is not a hypothesis node"))
            elif m.meta.get("state") != "active":
                out.append((hc.id, f"member {t} is {m.meta.get('state')!r}, not active"))
        real = [m for m in members if m is not None]
        if real and not _member_order_ok(real):
            out.append((hc.id, "members not in ascending-id order with the residual last"))
        for key in ("exclusivity", "independence"):
            if _blank(hc.meta.get(key)):
                out.append((hc.id, f"{key} is empty"))
        for key in ("depends_on", "exhaustive_by_construction"):
            if key not in hc.meta:
                out.append((hc.id, f"key {key} missing"))
    return out


def check_3_residuals(vault: Vault) -> list[Violation]:
    """Exactly one residual, listed last — or exhaustive_by_construction with a body that names
    an analysis-failure mode and the member it favours."""
    out: list[Violation] = []
    for hc in _clusters(vault):
        members = [vault.nodes.get(t) for t in _links(hc.meta.get("hypotheses"))]
        residuals = [m for m in members if m is not None and m.meta.get("residual") is True]
        if hc.meta.get("exhaustive_by_construction") is True:
            if residuals:
                out.append((hc.id, "exhaustive_by_construction but has a residual member"))
            prose = "\n".join(line for line in hc.body.splitlines() if not line.strip().startswith("![["))
            if not prose.strip() or not any(
                m is not None and re.search(rf"\b{re.escape(m.id)}\b", prose) for m in members
            ):
                out.append(
                    (
                        hc.id,
                        "exhaustive_by_construction without a body justification "
                        "naming the member a failure would favour",
                    )
                )
        elif len(residuals) != 1:
            out.append((hc.id, f"{len(residuals)} residual members; exactly 1 required (not exhaustive)"))
        elif members[-1] is not residuals[0]:
            out.append((hc.id, f"residual {residuals[0].id} is not listed last"))
    return out


def check_4_membership(vault: Vault) -> list[Violation]:
    """Every active H in exactly one HC, its cluster backlink naming that HC."""
    out: list[Violation] = []
    where: dict[str, list[str]] = {}
    for hc in _clusters(vault):
        for t in set(_links(hc.meta.get("hypotheses"))):
            where.setdefault(t, []).append(hc.id)
    for h_id, hcs in sorted(where.items(), key=lambda kv: id_sort_key(kv[0])):  # not in set order: same every run
        if len(hcs) > 1:
            out.append((h_id, f"in {len(hcs)} clusters: {', '.join(sorted(hcs))}"))
    for h in vault.of_type("hypothesis"):
        if h.meta.get("state") != "active":
            continue
        hcs = where.get(h.id, [])
        backlink = link_target(h.meta.get("cluster"))
        if not hcs:
            out.append((h.id, "active but in no cluster"))
        elif backlink not in hcs:
            out.append((h.id, f"cluster backlink {h.meta.get('cluster')!r} does not name {hcs[0]}"))
    return out


def check_5_survivors(vault: Vault, baseline: dict | None) -> list[Violation]:  # noqa: C901 - a branch per seed rule
    """Survivors: merged_from, single unchanged source, additional_sources = the absorbed sources
    (disjoint from source), one locator per source, generalization_note iff widened. Active H
    without a source: residual, or origin step-4-constructed with a reason."""
    out: list[Violation] = []
    absorbed_by: dict[str, list[Node]] = {}
    for h in vault.of_type("hypothesis"):
        if h.meta.get("state") == "merged":
            target = link_target(h.meta.get("merged_into"))
            if target:
                absorbed_by.setdefault(target, []).append(h)
    for h in vault.of_type("hypothesis"):
        absorbed = absorbed_by.get(h.id, [])
        merged_from = _links(h.meta.get("merged_from"))
        if h.meta.get("state") != "active" or not (absorbed or merged_from):
            continue
        if not merged_from:
            out.append((h.id, "survivor without merged_from"))
        missing = {a.id for a in absorbed} - set(merged_from)
        if missing:
            out.append((h.id, f"merged_from lacks {', '.join(sorted(missing))}"))
        source = h.meta.get("source")
        if not isinstance(source, str) or not link_target(source):
            out.append((h.id, "source is not a single [[S-N]] link"))
        elif baseline and h.id in baseline and link_target(baseline[h.id].get("source")) != link_target(source):
            out.append((h.id, "source was rewritten"))
        from_nodes = [vault.nodes[m] for m in merged_from if m in vault.nodes]
        expected = {link_target(n.meta.get("source")) for n in from_nodes} - {None}
        extra = set(_links(h.meta.get("additional_sources")))
        if extra != expected - {link_target(source)} or not expected <= extra | {link_target(source)}:
            out.append((h.id, f"additional_sources {sorted(extra)} != absorbed sources {sorted(expected)}"))
        if link_target(source) in extra:
            out.append((h.id, "additional_sources repeats the node's own source"))
        locators = h.meta.get("locator")
        wanted = ({link_target(source)} | extra) - {None}  # a source that is no link is flagged above
        prefixes = [str(loc).split(":", 1)[0].strip() for loc in locators] if isinstance(locators, list) else []
        if not isinstance(locators, list) or sorted(prefixes) != sorted(wanted):
            out.append((h.id, f"locator should be one 'S-N: where' entry per source {sorted(wanted)}"))
        if baseline and h.id in baseline:
            widened = baseline[h.id].get("statement") != h.meta.get("statement")
            if widened != (not _blank(h.meta.get("generalization_note"))):
                out.append(
                    (
                        h.id,
                        "generalization_note present without a widened statement"
                        if not widened
                        else "statement widened without a generalization_note",
                    )
                )
    for h in vault.of_type("hypothesis"):
        if h.meta.get("state") == "active" and _blank(h.meta.get("source")) and h.meta.get("residual") is not True:
            if h.meta.get("origin") != "step-4-constructed" or not h.body.strip():
                out.append((h.id, "no source, not a residual, and not origin: step-4-constructed with a reason"))
    return out


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
    for h in vault.of_type("hypothesis"):
        for key in H_FIELDS_4:
            out += [(h.id, f"{x}: step-4 fields hold no numbers") for x in _numbers(h.meta.get(key), key)]
    for hc in _clusters(vault):  # an HC node is step 4's entirely
        for key, value in hc.meta.items():
            if key not in ("type", "id"):
                out += [(hc.id, f"{x}: step-4 fields hold no numbers") for x in _numbers(value, key)]
    return out


def under_survivor(vault: Vault, survivor: Node) -> list[str]:
    """The hypotheses under ``survivor``: itself, everything in its ``merged_from`` (transitively:
    a survivor absorbed later brings its own) and every node whose ``merged_into`` names it, in id order."""
    into: dict[str, list[str]] = {}
    for h in vault.of_type("hypothesis"):
        if h.meta.get("state") == "merged":
            t = link_target(h.meta.get("merged_into"))
            if t:
                into.setdefault(t, []).append(h.id)
    return _under(vault, survivor.id, into)


def _under(vault: Vault, survivor: str, into: dict[str, list[str]]) -> list[str]:
    seen = {survivor}
    todo = [survivor]
    while todo:
        x = todo.pop()
        node = vault.nodes.get(x)
        merged_from = node.meta.get("merged_from") if node is not None else None
        for m in [*_links(merged_from if isinstance(merged_from, list) else []), *into.get(x, [])]:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return sorted(seen, key=id_sort_key)


LEDGER_FILE = Path(OURS) / "dispositions.json"  # 4a's ledger (``dispositions.ledger.LEDGER``)


def recorded_keeps(root: Path) -> dict[frozenset, str]:
    """Every pair recorded KEEP — on 4a's ledger (a model's, the offline policy's, a person's, an
    unmerge) or in ``proximity/review.json`` (a person's) — with who decided it. Read as plain JSON
    (a check reads what is there, and an unreadable file holds no KEEP to check)."""
    out: dict[frozenset, str] = {}
    for d in _json_list(Path(root) / LEDGER_FILE, lambda doc: list((doc.get("pairs") or {}).values())):
        if _is_pair(d) and d.get("decision") == "KEEP":
            out[frozenset(d["pair"])] = str(d.get("decided_by") or "?")
    for e in _json_list(Path(root) / "proximity" / "review.json", lambda doc: doc):
        if _is_pair(e) and e.get("verdict") == "KEEP":
            out.setdefault(frozenset(e["pair"]), "human")
    return out


def _json_list(path: Path, items) -> list:
    try:
        found = items(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, AttributeError, TypeError):
        return []
    return found if isinstance(found, list) else []


def _is_pair(entry) -> bool:
    pair = entry.get("pair") if isinstance(entry, dict) else None
    return isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(p, str) for p in pair)


def check_7_keep_apart(vault: Vault, keeps: dict[frozenset, str] | None = None) -> list[Violation]:
    """No two hypotheses under one survivor (itself and its merged_from, transitively) are recorded
    KEEP, by a person or a model: a merge never joins, by chaining, what a decision kept apart."""
    keeps = recorded_keeps(vault.root) if keeps is None else keeps
    if not keeps:
        return []
    into: dict[str, list[str]] = {}
    for h in vault.of_type("hypothesis"):
        if h.meta.get("state") == "merged":
            t = link_target(h.meta.get("merged_into"))
            if t:
                into.setdefault(t, []).append(h.id)
    out: list[Violation] = []
    for h in vault.of_type("hypothesis"):
        if h.meta.get("state") != "active" or not (h.meta.get("merged_from") or h.id in into):
            continue
        group = _under(vault, h.id, into)
        for k, x in enumerate(group):
            for y in group[k + 1 :]:
                who = keeps.get(frozenset((x, y)))
                if who is not None:
                    out.append(
                        (h.id, f"{x} and {y} are both under survivor {h.id} but recorded KEEP (decided by {who})")
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
