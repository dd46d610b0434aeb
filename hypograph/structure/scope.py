"""What step 4 looks at in a vault: the active hypotheses, those 4a may still change, and the
observations in scope; and how much of the run's question a prompt carries."""

from __future__ import annotations

from pathlib import Path

from hypograph.vault.node_view import NodeView
from hypograph.vault.nodes import Node
from hypograph.vault.vault import Vault

QUESTION_CHARS = 6000  # of initial_prompt.md, in every step-4 prompt


def active_hypotheses(vault: Vault) -> list[Node]:
    """Hypotheses in ``hypotheses/`` that are active or not yet dispositioned."""
    return [h for h in vault.of_type("hypothesis") if h.path.parent == Path("hypotheses") and NodeView(h).open]


def open_to_4a(vault: Vault) -> list[Node]:
    """Active hypotheses 4a may still merge or drop: from a paper, and in no cluster yet."""
    clustered = {t for hc in vault.of_type("hypothesis-cluster") for t in NodeView(hc).listed_ids}
    return [
        h
        for h in active_hypotheses(vault)
        if not NodeView(h).minted and h.id not in clustered and not NodeView(h).cluster
    ]


def observations(vault: Vault) -> list[Node]:
    """In-scope observations: those directly in ``observations-and-facts/``."""
    return [o for o in vault.of_type("observation") if o.path.parent == Path("observations-and-facts")]
