"""The code location ``workspace.yaml`` loads: every input of a deployment, as partitions.

Nothing here is bound to one input: an asset's partition key is its input folder (see
``assets/partitions.py``). Settings are resource config, editable per run in the Launchpad.
"""

import os

from dagster import Definitions

from assets import adjudication, casework, library, proximity, sharded, structure
from assets.checks import CASE_CHECKS, LIBRARY_CHECKS, PROXIMITY_CHECKS, STRUCTURE_CHECKS
from io_managers import HypographIOManager
from pipelines.executor import EXECUTOR, shard_io_manager
from pipelines.jobs import (
                           case_batch_job,
                           case_into_vault_job,
                           library_job,
                           library_round_job,
                           proximity_job,
                           rescore_job,
                           structure_job,
)
from pipelines.sensors import (
                           case_retries_due,
                           hypotheses_changed,
                           inputs_discovered,
                           next_library_round,
                           nightly_proximity,
)
from resources import Inputs, LLMResource, ProximitySettings
from resources.casework import CaseSettings
from resources.library import LibrarySettings

PROXIMITY_ASSETS = [
    proximity.hypothesis_texts, sharded.hypothesis_embeddings, sharded.similarity_graph,
    proximity.proximity_clusters, proximity.duplicate_pairs, adjudication.dedup_verdicts, adjudication.cluster_labels,
]
STRUCTURE_ASSETS = [structure.hypothesis_dispositions, structure.hypothesis_clusters, structure.structure_map,
                    structure.structured_proximity]
LIBRARY_ASSETS = [library.round_candidates, library.round_dedup, library.round_scores, library.round_persisted,
                  library.hypothesis_library]
CASE_ASSETS = [casework.case_interpretation, casework.case_context, casework.hypothesis_batch,
               casework.batch_vault_nodes]

inputs_resource = Inputs(workspace=os.environ.get("HYPOGRAPH_WORKSPACE") or None)

defs = Definitions(
    assets=PROXIMITY_ASSETS + STRUCTURE_ASSETS + LIBRARY_ASSETS + CASE_ASSETS,
    asset_checks=PROXIMITY_CHECKS + STRUCTURE_CHECKS + LIBRARY_CHECKS + CASE_CHECKS,
    jobs=[proximity_job, structure_job, library_round_job, rescore_job, library_job, case_batch_job,
          case_into_vault_job],
    schedules=[nightly_proximity, next_library_round],
    sensors=[inputs_discovered, hypotheses_changed, case_retries_due],
    executor=EXECUTOR,
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
