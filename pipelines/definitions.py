"""The code location ``workspace.yaml`` loads: every registered input of a deployment, as partitions.

Nothing here is bound to one input: a partition key is an input's id, or ``<id>/r0001`` for a
library round or a case revision (see ``assets/partitions.py``). Settings are resource config,
editable per run in the Launchpad.
"""

import logging
import os
import time

from dagster import Definitions, default_loggers, logger

from assets import adjudication, casework, library, proximity, report, sharded, sources, structure
from assets.checks import CASE_CHECKS, LIBRARY_CHECKS, PROXIMITY_CHECKS, STRUCTURE_CHECKS
from io_managers import HypographIOManager
from pipelines.executor import EXECUTOR, shard_io_manager
from pipelines.jobs import JOBS
from pipelines.sensors import SCHEDULES, SENSORS
from resources import Inputs, LLMResource, ProximitySettings
from resources.casework import CaseSettings
from resources.library import LibrarySettings

PROXIMITY_ASSETS = [
    sources.hypotheses,
    proximity.hypothesis_texts,
    sharded.hypothesis_embeddings,
    sharded.similarity_graph,
    proximity.proximity_clusters,
    proximity.duplicate_pairs,
    adjudication.dedup_verdicts,
    adjudication.cluster_labels,
    report.proximity_report,
]
STRUCTURE_ASSETS = [structure.hypothesis_dispositions, structure.hypothesis_clusters, structure.structure_map]
LIBRARY_ASSETS = [library.round_candidates, library.round_dedup, library.round_scores, library.hypothesis_library]
CASE_ASSETS = [
    sources.case_package,
    casework.interpretation_draft,
    casework.case_interpretation,
    casework.case_context,
    casework.hypothesis_batch,
    casework.batch_vault_nodes,
]


class _StepStages(logging.Handler):
    """Each step's start and end as a ``hypograph.progress`` stage (for the CLI's sinks only: the
    run's log has Dagster's own step events)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.started: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        from hypograph import progress

        event = getattr(record, "dagster_event", None)
        kind = getattr(event, "event_type_value", None)
        step = getattr(event, "step_key", None)
        if step is None or kind not in ("STEP_START", "STEP_SUCCESS"):
            return
        if kind == "STEP_START":
            self.started[step] = time.perf_counter()
            progress.notify(progress.Event("start", step))
        else:
            seconds = time.perf_counter() - self.started.pop(step, time.perf_counter())
            progress.notify(progress.Event("end", step, seconds=seconds))


@logger(description="Step starts and ends as hypograph progress stages (what `hypograph` prints on a terminal).")
def step_stages(_init_context) -> logging.Logger:
    out = logging.getLogger("hypograph.steps")
    out.propagate = False
    out.setLevel(logging.DEBUG)
    if not out.handlers:
        out.addHandler(_StepStages())
    return out


inputs_resource = Inputs(workspace=os.environ.get("HYPOGRAPH_WORKSPACE") or None)

defs = Definitions(
    assets=PROXIMITY_ASSETS + STRUCTURE_ASSETS + LIBRARY_ASSETS + CASE_ASSETS,
    asset_checks=PROXIMITY_CHECKS + STRUCTURE_CHECKS + LIBRARY_CHECKS + CASE_CHECKS,
    jobs=JOBS,
    schedules=SCHEDULES,
    sensors=SENSORS,
    executor=EXECUTOR,
    loggers={**default_loggers(), "step_stages": step_stages},
    resources={
        "inputs": inputs_resource,
        "proximity": ProximitySettings(),
        "library": LibrarySettings(),
        "case": CaseSettings(),
        "io_manager": HypographIOManager(inputs=inputs_resource),
        "shard_io_manager": shard_io_manager(),  # row ranges between the steps of a sharded asset
        "llm": LLMResource.from_environment(),
    },
)
