"""The pictures of an input's proximity: ``proximity_report`` writes the cluster map, the vault's
map by hypothesis cluster, the similarity histogram and the threshold sweep beside the proximity
files (``hypograph.report``), and shows the PNGs inline in the metadata of the input's partition.

Not part of the proximity job (a person looks at pictures after a run; step 4 never waits for
them): the report job builds them on request (``hypograph report``, the UI), and the default
automation sensor, when on, builds them once after each proximity run that changed their inputs."""

from dagster import AssetExecutionContext, AutomationCondition, MaterializeResult, asset

from assets.errors import Skip, step
from assets.groups import PROXIMITY
from assets.partitions import hypothesis_inputs
from assets.proximity.adjudication import cluster_labels
from assets.proximity.assets import duplicate_pairs
from assets.proximity.io_manager import never_made
from assets.proximity.metadata import report_metadata
from assets.proximity.resource import ProximityResource
from hypograph.report import write_report
from resources import Inputs


@asset(
    group_name=PROXIMITY,
    partitions_def=hypothesis_inputs,
    deps=[cluster_labels, duplicate_pairs],
    kinds={"plotly"},
    automation_condition=AutomationCondition.eager(),
    output_required=False,
)
@step
def proximity_report(context: AssetExecutionContext, inputs: Inputs, proximity: ProximityResource) -> MaterializeResult:
    """proximity/report.html (interactive, offline), cluster-map.png, vault-map.png (vaults),
    thresholds.png and report.json: what the clusters look like and what each threshold would give.
    Each input's pictures are in its own partition's materialization: pick the input on the
    Partitions tab (the Overview shows whichever input was drawn last)."""
    root = inputs.root(context.partition_key)
    missing = never_made(root, context.partition_key, "similarity_graph")  # launched before proximity
    if missing is not None:
        raise Skip(missing.line)
    report = write_report(root, proximity.settings().dupe_threshold)
    return MaterializeResult(metadata=report_metadata(report, context.partition_key))
