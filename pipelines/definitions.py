"""The code location ``workspace.yaml`` loads.

The input (run directory or vault) comes from ``HYPOGRAPH_INPUT``; default: the demo vault that
``make demo`` prepares. ``build_definitions(path)`` is what the CLI and the tests use.
"""

import os
from pathlib import Path

from dagster import (
    AssetSelection, DefaultScheduleStatus, DefaultSensorStatus, Definitions, RunRequest, SensorEvaluationContext,
    SkipReason, define_asset_job, sensor, ScheduleDefinition,
)

from assets import adjudication, proximity, structure
from assets.checks import PROXIMITY_CHECKS, STRUCTURE_CHECKS
from hypograph.hypotheses import input_fingerprint
from io_managers import ProximityIOManager
from resources import HypographInput, LLMResource, ProximitySettings

DEFAULT_INPUT = Path(__file__).resolve().parent.parent / "demo" / "vault"

PROXIMITY_ASSETS = [
    proximity.hypothesis_texts, proximity.hypothesis_embeddings, proximity.similarity_graph,
    proximity.proximity_clusters, proximity.duplicate_pairs, adjudication.dedup_verdicts, adjudication.cluster_labels,
]

STRUCTURE_ASSETS = [structure.hypothesis_dispositions, structure.hypothesis_clusters, structure.structure_map]

proximity_job = define_asset_job(
    "proximity", selection=AssetSelection.groups(proximity.GROUP),
    description="Embed, graph, cluster, list and adjudicate near-duplicates of the input's hypotheses (seed 003).",
)

structure_job = define_asset_job(
    "structure", selection=AssetSelection.groups(proximity.GROUP, structure.GROUP),
    description="Proximity, then step 4 on a vault: 4a merge/drop, 4b clusters with residuals, the structure map (seed 000).",
)

nightly_proximity = ScheduleDefinition(
    name="nightly_proximity", job=proximity_job, cron_schedule="0 3 * * *",
    default_status=DefaultScheduleStatus.STOPPED,
    description="Re-run proximity every night (a no-op on disk when nothing changed).",
)


@sensor(job=proximity_job, minimum_interval_seconds=30, default_status=DefaultSensorStatus.STOPPED)
def hypotheses_changed(context: SensorEvaluationContext, hypograph_input: HypographInput):
    """Request a proximity run when any file in ``hypotheses/`` is added, removed or modified."""
    if not (hypograph_input.root / "hypotheses").is_dir():
        return SkipReason(f"{hypograph_input.root}/hypotheses does not exist")
    fingerprint = input_fingerprint(hypograph_input.root)
    if fingerprint == context.cursor:
        return SkipReason("hypotheses/ unchanged")
    context.update_cursor(fingerprint)
    return RunRequest(run_key=fingerprint)


def build_definitions(input_path: str | os.PathLike, backend: str = "tfidf", model: str | None = None,
                      graph_threshold: float = 0.30, dupe_threshold: float = 0.80, offline: bool = False) -> Definitions:
    """Definitions bound to one input directory and proximity settings."""
    root = str(Path(input_path).resolve())
    return Definitions(
        assets=PROXIMITY_ASSETS + STRUCTURE_ASSETS,
        asset_checks=PROXIMITY_CHECKS + STRUCTURE_CHECKS,
        jobs=[proximity_job, structure_job],
        schedules=[nightly_proximity],
        sensors=[hypotheses_changed],
        resources={
            "hypograph_input": HypographInput(path=root),
            "proximity": ProximitySettings(backend=backend, model=model, graph_threshold=graph_threshold,
                                           dupe_threshold=dupe_threshold),
            "proximity_io": ProximityIOManager(root=root),
            "llm": LLMResource(offline=offline),
        },
    )


defs = build_definitions(
    os.environ.get("HYPOGRAPH_INPUT", DEFAULT_INPUT),
    backend=os.environ.get("HYPOGRAPH_BACKEND", "tfidf"),
    model=os.environ.get("HYPOGRAPH_MODEL") or None,
    offline=os.environ.get("HYPOGRAPH_LLM") == "offline",
)
