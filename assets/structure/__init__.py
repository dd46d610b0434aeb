"""Structure step 4 (seed 000): 4a dispositions -> 4b hypothesis clusters -> the structure map,
gated by the seed's checks; its job, and the flow (proximity -> step 4 -> proximity) with the
sensor that keeps a vault's results current."""

from dagster import Definitions

from assets.structure.assets import hypothesis_clusters, hypothesis_dispositions, structure_map
from assets.structure.checks import CHECKS
from assets.structure.flow import hypotheses_changed
from assets.structure.jobs import structure_job

defs = Definitions(
    assets=[hypothesis_dispositions, hypothesis_clusters, structure_map],
    asset_checks=CHECKS,
    jobs=[structure_job],
    sensors=[hypotheses_changed],
)
