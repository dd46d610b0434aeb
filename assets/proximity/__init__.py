"""Proximity (seed 003): the input's hypotheses -> texts -> embeddings -> similarity graph ->
clusters and duplicate pairs -> verdicts and cluster names -> the report; its checks, its job and
the nightly schedule, and its settings resource."""

from dagster import Definitions

from assets.proximity import adjudication, assets, report, sharded
from assets.proximity.checks import CHECKS
from assets.proximity.jobs import nightly_proximity, pictures_after_proximity, proximity_job, report_job
from assets.sources import hypotheses
from resources import ProximityResource

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
    sensors=[pictures_after_proximity],
    resources={"proximity": ProximityResource()},
)
