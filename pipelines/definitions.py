"""The code location ``workspace.yaml`` loads: every input of a deployment, as partitions.

Nothing here is bound to one input: an asset's partition key is its input folder (see
``assets/partitions.py``). Settings are resource config, editable per run in the Launchpad.
"""

import os

from dagster import Definitions

from assets import adjudication, proximity, structure
from assets.checks import PROXIMITY_CHECKS, STRUCTURE_CHECKS
from io_managers import HypographIOManager
from pipelines.jobs import proximity_job, structure_job
from pipelines.sensors import hypotheses_changed, inputs_discovered, nightly_proximity
from resources import Inputs, LLMResource, ProximitySettings

PROXIMITY_ASSETS = [
    proximity.hypothesis_texts, proximity.hypothesis_embeddings, proximity.similarity_graph,
    proximity.proximity_clusters, proximity.duplicate_pairs, adjudication.dedup_verdicts, adjudication.cluster_labels,
]
STRUCTURE_ASSETS = [structure.hypothesis_dispositions, structure.hypothesis_clusters, structure.structure_map,
                    structure.structured_proximity]

inputs_resource = Inputs(workspace=os.environ.get("HYPOGRAPH_WORKSPACE") or None)

defs = Definitions(
    assets=PROXIMITY_ASSETS + STRUCTURE_ASSETS,
    asset_checks=PROXIMITY_CHECKS + STRUCTURE_CHECKS,
    jobs=[proximity_job, structure_job],
    schedules=[nightly_proximity],
    sensors=[inputs_discovered, hypotheses_changed],
    resources={
        "inputs": inputs_resource,
        "proximity": ProximitySettings(),
        "io_manager": HypographIOManager(inputs=inputs_resource),
        "llm": LLMResource.from_environment(),
    },
)
