"""Proximity (seed 003): the input's hypotheses -> texts -> embeddings -> similarity graph ->
clusters and duplicate pairs -> verdicts and cluster names -> the report; its checks, its job and
the nightly schedule, its source asset, its settings resource and its IO managers (the seed formats,
the shards between steps)."""

from dagster import Definitions

from assets.proximity import adjudication, assets, report, sharded
from assets.proximity.checks import CHECKS
from assets.proximity.io_manager import HypographIOManager
from assets.proximity.jobs import nightly_proximity, pictures_after_proximity, proximity_job, report_job
from assets.proximity.resource import ProximityResource
from assets.proximity.shard_files import shard_files_removed
from assets.proximity.shard_io import shard_io_manager
from assets.proximity.source import hypotheses
from hypograph import environment
from resources import Inputs

defs = Definitions(
    assets=[
        hypotheses,
        assets.hypothesis_texts,
        sharded.hypothesis_embeddings,
        sharded.similarity_graph,
        assets.proximity_clusters,
        assets.duplicate_pairs,
        adjudication.dedup_verdicts,
        adjudication.cluster_labels,
        report.proximity_report,
    ],
    asset_checks=CHECKS,
    jobs=[proximity_job, report_job],
    schedules=[nightly_proximity],
    sensors=[pictures_after_proximity, shard_files_removed],
    resources={
        "proximity": ProximityResource(),
        # its values in the seed formats, in the input's folder (step 4 reads them through it too)
        "io_manager": HypographIOManager(inputs=Inputs(workspace=environment.current().workspace)),
        "shard_io_manager": shard_io_manager(),  # row ranges between the steps of a sharded asset
    },
)
