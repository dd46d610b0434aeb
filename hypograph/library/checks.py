"""The seed's key rules as pure checks: each returns a list of ``(id, reason)`` violations.

* ``check_scored``: every behavior has an impact; every mechanism a novelty, planned data and models.
* ``check_ids``: ids unique, mechanisms numbered under their own behavior, and no id reused: an id
  the ledger minted for one batch must not carry another batch's stamp.
* ``check_distinct``: no two behavior statements (nor two mechanism hypotheses) equal after
  normalisation.
* ``check_file``: the file validates against the schema (the only check that reads the raw file).

They work offline on any library; ``run_checks(L)`` runs all four.
"""

from __future__ import annotations

from pathlib import Path

from hypograph.errors import HypographError
from hypograph.library.ledger import IdLedger, read_ledger
from hypograph.library.schema import MECHANISM_ID_RE, Library, library_path, read_library
from hypograph.text import normalise

Violation = tuple[str, str]


def check_scored(library: Library) -> list[Violation]:
    out: list[Violation] = []
    for b in library.behaviors:
        if b.impact is None:
            out.append((b.id, "behavior has no impact"))
        for m in b.mechanisms:
            if m.novelty is None:
                out.append((m.id, "mechanism has no novelty"))
            if m.data is None:
                out.append((m.id, "mechanism has no planned data"))
            if not m.model:
                out.append((m.id, "mechanism names no target model"))
    return out


def check_ids(library: Library, ledger: IdLedger | None = None) -> list[Violation]:
    out: list[Violation] = []
    seen: set[str] = set()
    for b in library.behaviors:
        nodes = [(b.id, b)] + [(m.id, m) for m in b.mechanisms]
        for node_id, node in nodes:
            if node_id in seen:
                out.append((node_id, "id used more than once"))
            seen.add(node_id)
            minted = ledger.minted.get(node_id) if ledger else None
            batch = (node.model_extra or {}).get("batch")
            if minted and batch and batch != minted:
                out.append((node_id, f"id reused: minted for batch {minted}, now on a node of batch {batch}"))
        for m in b.mechanisms:
            if MECHANISM_ID_RE.match(m.id).group(1) != b.id:
                out.append((m.id, f"mechanism id is not numbered under its behavior {b.id}"))
    return out


def check_distinct(library: Library) -> list[Violation]:
    out: list[Violation] = []
    first: dict[str, str] = {}
    nodes = [(b.id, b.statement) for b in library.behaviors] + [(m.id, m.hypothesis) for _, m in library.mechanisms()]
    for node_id, text in nodes:
        kind = "mechanism" if "-M" in node_id else "behavior"
        key = (kind, normalise(text))
        if key in first:
            out.append((node_id, f"{kind} text equals {first[key]}'s after normalisation"))
        else:
            first[key] = node_id
    return out


def check_file(root: Path) -> list[Violation]:
    try:
        loaded = read_library(root)
    except HypographError as e:
        return [("hypothesis_library.json", str(e))]
    return [] if loaded else [("hypothesis_library.json", "no library file")]


def run_checks(root: Path) -> dict[str, list[Violation]]:
    """All four checks on ``<root>/hypothesis_library.json`` (the three model checks skipped if it is invalid)."""
    out = {"file_validates": check_file(root)}
    if out["file_validates"]:
        return {**out, "scored": [], "ids_unique_never_reused": [], "statements_distinct": []}
    library = read_library(root)[0]
    return {
        **out,
        "scored": check_scored(library),
        "ids_unique_never_reused": check_ids(library, read_ledger(root)),
        "statements_distinct": check_distinct(library),
    }


def require_sound(root: Path) -> None:
    """HypographError naming the first problems when ``<root>``'s library fails its own checks
    (nothing to check when there is no file yet). Run before a round asks or writes anything."""
    results = run_checks(root)
    if results["file_validates"] and results["file_validates"][0][1] == "no library file":
        return
    bad = [(name, i, reason) for name, violations in results.items() for i, reason in violations]
    if bad:
        name, node, reason = bad[0]
        more = f" (and {len(bad) - 1} more; see hypograph library DIR --check)" if len(bad) > 1 else ""
        where = "" if node == "hypothesis_library.json" else f"{library_path(root)}: {name}: {node}: "
        raise HypographError(f"{where}{reason}{more}; no round runs until the library passes its checks")
