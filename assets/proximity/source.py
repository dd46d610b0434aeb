"""Proximity's input, as a source asset Dagster observes: ``hypotheses``, partitioned by
``hypothesis_inputs``, whose data version is the content fingerprint of what the proximity assets
read (``hypograph.inputs.fingerprint``), so staleness, the ``hypotheses_changed`` sensor and
automation all work from Dagster's own data versions.

An observation writes nothing. The structure assets report a new version of ``hypotheses``
themselves when step 4 rewrites a vault's nodes (``report_rewrite``), so their own writes are never
taken for a person's edit. Observing before a run, and registering inputs: ``assets/sources.py``."""

from dagster import AssetExecutionContext, DataVersion, DataVersionsByPartition, observable_source_asset

from assets.groups import PROXIMITY
from assets.partitions import hypothesis_inputs
from assets.sources import HYPOTHESES, latest_version, observed
from hypograph.inputs import fingerprint
from hypograph.paths import WITH_HYPOTHESES
from resources import Inputs

DESCRIPTION = (
    "The hypotheses of each registered input, as the user left them: hypotheses/ of a run directory "
    "or a vault, hypothesis_library.json of a library. Data version: a digest of their content. "
    "A person's proximity/review.json counts too. Observe it to see which inputs changed; proximity is "
    "stale until it reads the new version."
)


@observable_source_asset(
    key=HYPOTHESES, partitions_def=hypothesis_inputs, group_name=PROXIMITY, description=DESCRIPTION
)
def hypotheses(inputs: Inputs) -> DataVersionsByPartition:
    """The current version of every registered input with hypotheses (see DESCRIPTION)."""
    return DataVersionsByPartition(
        {
            r.id: DataVersion(fingerprint(r.path, r.kind))
            for r in inputs.registry().of_kind(*WITH_HYPOTHESES)
            if r.path.is_dir()
        }
    )


def report_rewrite(context: AssetExecutionContext, inputs: Inputs) -> str:
    """After a step that may have rewritten its input's hypotheses: their version, logged as a new
    observation when it differs from the last one (proximity is then stale, and only then)."""
    record = inputs.record(context.partition_key)
    version = fingerprint(record.path, record.kind)
    if latest_version(context.instance, HYPOTHESES, record.id) != version:
        context.log_event(observed(record.id, version))
    return version
