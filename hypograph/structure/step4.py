"""Step 4 whole — 4a, 4b, the map — under one hold of the vault's structuring lock
(``hypograph.structure.session``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hypograph.llm.policy import Policy
from hypograph.proximity.adjudicate import Decision
from hypograph.proximity.embed import Embeddings
from hypograph.structure.carving import ClusterReport, run_clusters
from hypograph.structure.dispositions import DispositionReport, run_dispositions
from hypograph.structure.session import structuring
from hypograph.structure.structure_map import write_map


@dataclass
class Step4Report:
    dispositions: DispositionReport
    clusters: ClusterReport
    map_path: Path
    map_written: bool


def run_step4(
    root: Path | str,
    verdicts: list[Decision],
    embeddings: Embeddings | None,
    policy_4a: Policy,
    policy_4b: Policy,
    run: str | None = None,
    **dispositions_options,
) -> Step4Report:
    """4a, 4b and the map in one ``structuring`` block: no other structuring and no reader in
    between, and one in-memory index of the vault (read once, updated as nodes are written and
    minted). The same functions, with the same arguments, as the three assets call one by one;
    ``dispositions_options`` go to ``run_dispositions`` (``net``, ``batch_size``), ``run`` names
    this run to anyone refused meanwhile."""
    root = Path(root)
    with structuring(root, run):
        a = run_dispositions(root, verdicts, embeddings, policy_4a, **dispositions_options)
        b = run_clusters(root, policy_4b)
        path, written = write_map(root)
    return Step4Report(a, b, path, written)
