"""4a's decisions checked against the vault before they are recorded or applied, so that no valid
model answer can leave a vault that the next run cannot complete.

The one way a valid answer wedged a vault: a MERGE whose ``widened_statement`` is the survivor's
statement as it stands (or as step 3 wrote it) plus a ``generalization_note``. Written as given,
check 5 ("a generalization_note iff the statement was widened") fails, 4b never runs, and the stored
decision is reused by every later run. Here:

* ``amend_widening``: a decision whose widening widens nothing loses its widened statement and note,
  and says so in its ``amended`` field (the ledger keeps the model's rationale as given);
* ``repair_ledger``: the same for decisions already on record (written by an earlier version),
  against the step-3 statements (a stored widening may have been applied since);
* ``stale_notes``: survivors whose files carry a note although their statement is their step-3
  one (what an earlier version wrote from such a decision) lose the note, said in the run's report.
"""

from __future__ import annotations

from hypograph.structure.dispositions.ledger import Ledger, PairDecision
from hypograph.vault.node_view import NodeView, remove_fields
from hypograph.vault.nodes import Node
from hypograph.vault.vault import Vault

NOT_A_WIDENING = (
    "widened statement identical to the {which} statement of {node}: not a widening, "
    "so the widened statement and the generalization_note were dropped"
)


def _same(a: object, b: object) -> bool:
    return isinstance(a, str) and isinstance(b, str) and " ".join(a.split()) == " ".join(b.split())


def widening_problem(widened: str | None, nodes: list[Node], baseline: dict | None, current: bool = True) -> str | None:
    """Why ``widened`` is no widening of any of ``nodes`` (it repeats a step-3 statement, or with
    ``current`` a statement as it stands), or None when it is a widening or there is none."""
    if not widened:
        return None
    for n in nodes:
        if current and _same(widened, NodeView(n).statement):
            return NOT_A_WIDENING.format(which="current", node=n.id)
        if baseline and n.id in baseline and _same(widened, baseline[n.id].get("statement")):
            return NOT_A_WIDENING.format(which="step-3", node=n.id)
    return None


def amend_widening(
    d: PairDecision, nodes: dict[str, Node], baseline: dict | None, current: bool = True
) -> PairDecision:
    """``d`` as it may be recorded: without a widening that widens nothing (said in ``amended``).
    ``current``: compare with the statements as they stand too (a new decision; a stored one's
    widening may have been applied since, so it is compared with the step-3 statements only)."""
    problem = widening_problem(d.widened_statement, [nodes[i] for i in d.pair if i in nodes], baseline, current)
    if problem is None:
        return d
    return d.model_copy(
        update={
            "widened_statement": None,
            "generalization_note": None,
            "amended": f"{d.amended}; {problem}" if d.amended else problem,
        }
    )


def repair_ledger(ledger: Ledger, vault: Vault, baseline: dict | None) -> list[str]:
    """Amend every stored decision that would wedge the vault; returns one line per amendment."""
    nodes = {h.id: h for h in vault.of_type("hypothesis")}
    out = []
    for key, d in ledger.pairs.items():
        amended = amend_widening(d, nodes, baseline, current=False)
        if amended is not d:
            ledger.pairs[key] = amended
            out.append(f"{'/'.join(d.pair)}: stored decision amended: {amended.amended.rsplit('; ', 1)[-1]}")
    return out


def stale_notes(vault: Vault, baseline: dict | None) -> list[tuple[Node, str]]:
    """Active hypotheses carrying a generalization_note although their statement is the step-3 one:
    each with the note removed (in memory) and the line that says so."""
    out = []
    for h in vault.of_type("hypothesis"):
        if (
            NodeView(h).active
            and NodeView(h).generalization_note
            and baseline
            and h.id in baseline
            and _same(NodeView(h).statement, baseline[h.id].get("statement"))
        ):
            remove_fields(h, "generalization_note")
            out.append((h, f"{h.id}: generalization_note removed: its statement is the step-3 one, not widened"))
    return out
