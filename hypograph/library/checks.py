"""The seed's key rules as pure checks: each returns a list of ``(id, reason)`` violations.

* ``check_scored``: every behavior has an impact; every mechanism a novelty, planned data and models.
* ``check_ids``: ids unique, mechanisms numbered under their own behavior, and no id reused: an id
  the ledger minted for one batch must not carry another batch's stamp.
* ``check_distinct``: no two behavior statements (nor two mechanism hypotheses) equal after
  normalisation.
* ``check_file``: the file validates against the schema (the only check that reads the raw file).
* ``check_web_grounded``: a ``+web`` stamp only where retrieved papers were shown: a mechanism's
  ``llm-chat+web`` novelty names, in ``closest``, the id or URL of a paper its round's searches
  retrieved (tool state: ``rounds/*/scores.json`` through ``persist.json``'s ids); a behavior's
  ``llm-chat+web`` impact needs a paper its round retrieved. A node no round of this tool wrote
  (a file from elsewhere, edited by hand) has no record of a search: its ``closest`` must carry a
  paper's id (arXiv, DOI, OpenAlex) or URL, and its behavior's impact such a mechanism.

They work offline on any library; ``run_checks(L)`` runs all five. A round is refused on a library
failing the first four (``require_sound``), not on a stamp it did not write.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypograph.errors import HypographError
from hypograph.library.ledger import IdLedger, read_ledger
from hypograph.library.rounds import PersistPlan, RoundScores
from hypograph.library.schema import MECHANISM_ID_RE, Library, library_path, read_library
from hypograph.library.state import read_model, round_dir, round_keys
from hypograph.text import normalise

Violation = tuple[str, str]
WEB = "llm-chat+web"
# A paper's id or address in a hand-written ``closest``: arXiv, DOI, OpenAlex, or a URL.
PAPER_ID_RE = re.compile(
    r"arxiv:\s*\d{4}\.\d{4,5}|\b\d{4}\.\d{4,5}(v\d+)?\b|\b10\.\d{4,9}/\S+|openalex:W\d+|https?://\S+", re.I
)
# The checks a round requires to pass first (require_sound): a stamp it did not write does not stop it.
ROUND_GATES = ("file_validates", "scored", "ids_unique_never_reused", "statements_distinct")


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


def retrieved_papers(root: Path) -> dict[str, set[str]]:
    """Node id -> the ids and URLs of the papers its round's searches retrieved (empty: searched,
    or scored, with none), for every node a persisted round of this tool wrote or re-scored."""
    out: dict[str, set[str]] = {}
    for key in round_keys(root):
        plan = read_model(round_dir(root, key) / "persist.json", PersistPlan)
        scores = read_model(round_dir(root, key) / "scores.json", RoundScores)
        if plan is None or scores is None:
            continue
        nodes = {**plan.ids, **plan.targets}
        for b in scores.behaviors:
            found = {x for p in b.papers for x in (p.id, p.url) if x}
            for ckey, node_id in nodes.items():
                if ckey == b.key or ckey.startswith(f"{b.key}."):
                    out.setdefault(node_id, set()).update(found)
    return out


def check_web_grounded(library: Library, retrieved: dict[str, set[str]]) -> list[Violation]:
    """``+web`` stamps without a retrieved paper behind them (``retrieved``: ``retrieved_papers``)."""
    out: list[Violation] = []
    for b in library.behaviors:
        cited = False
        for m in b.mechanisms:
            if m.novelty is None or m.novelty.method != WEB:
                continue
            ok = _names_retrieved(m.novelty.closest, retrieved.get(m.id))
            cited |= ok
            if not ok:
                out.append(
                    (m.id, f"novelty stamped {WEB}, but its closest prior work is not a retrieved paper with its id")
                )
        if b.impact is not None and b.impact.method == WEB:
            papers = retrieved.get(b.id)
            if not (papers if papers is not None else cited):
                out.append((b.id, f"impact stamped {WEB}, but no paper was retrieved for it"))
    return out


def _names_retrieved(closest: str, papers: set[str] | None) -> bool:
    """``closest`` names one of ``papers`` (None: no record of a search: names any paper by id)."""
    if papers is None:
        return bool(PAPER_ID_RE.search(closest))
    return any(p in closest for p in papers)


def check_file(root: Path) -> list[Violation]:
    try:
        loaded = read_library(root)
    except HypographError as e:
        return [("hypothesis_library.json", str(e))]
    return [] if loaded else [("hypothesis_library.json", "no library file")]


def run_checks(root: Path) -> dict[str, list[Violation]]:
    """All five checks on ``<root>/hypothesis_library.json`` (the others skipped if it is invalid)."""
    out = {"file_validates": check_file(root)}
    if out["file_validates"]:
        return {**out, "scored": [], "ids_unique_never_reused": [], "statements_distinct": [], "web_grounded": []}
    library = read_library(root)[0]
    return {
        **out,
        "scored": check_scored(library),
        "ids_unique_never_reused": check_ids(library, read_ledger(root)),
        "statements_distinct": check_distinct(library),
        "web_grounded": check_web_grounded(library, retrieved_papers(root)),
    }


def require_sound(root: Path) -> None:
    """HypographError naming the first problems when ``<root>``'s library fails its own checks
    (nothing to check when there is no file yet). Run before a round asks or writes anything."""
    results = run_checks(root)
    if results["file_validates"] and results["file_validates"][0][1] == "no library file":
        return
    bad = [(name, i, reason) for name in ROUND_GATES for i, reason in results[name]]
    if bad:
        name, node, reason = bad[0]
        more = f" (and {len(bad) - 1} more; see hypograph library DIR --check)" if len(bad) > 1 else ""
        where = "" if node == "hypothesis_library.json" else f"{library_path(root)}: {name}: {node}: "
        raise HypographError(f"{where}{reason}{more}; no round runs until the library passes its checks")
