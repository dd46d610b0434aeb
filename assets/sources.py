"""The inputs themselves, as source assets Dagster observes: their data version is the content
fingerprint of what the assets downstream read (``hypograph.inputs.fingerprint``), so staleness,
the ``hypotheses_changed`` sensor and automation all work from Dagster's own data versions.

An observation writes nothing. The structure assets report a new version of ``hypotheses``
themselves when step 4 rewrites a vault's nodes, so their own writes are never taken for a
person's edit."""

import warnings

from dagster import (
    AssetExecutionContext,
    AssetObservation,
    AssetRecordsFilter,
    BetaWarning,
    DataVersion,
    DataVersionsByPartition,
    observable_source_asset,
)
from dagster._core.definitions.data_version import DATA_VERSION_TAG

from assets.groups import CASEWORK, PROXIMITY
from assets.partitions import case_revisions, hypothesis_inputs, revision_key
from hypograph.casework.package import CasePackage
from hypograph.errors import HypographError
from hypograph.inputs import WITH_HYPOTHESES, InputRecord, fingerprint, sub_key
from resources import Inputs

# Observable source assets are "beta" in Dagster 1.13; they are what a partitioned external input is.
warnings.filterwarnings("ignore", message="Function `observable_source_asset`", category=BetaWarning)


HYPOTHESES = (
    "The hypotheses of each registered input, as the user left them: hypotheses/ of a run directory "
    "or a vault, hypothesis_library.json of a library. Data version: a digest of their content. "
    "Observe it to see which inputs changed; proximity is stale until it reads the new version."
)
CASE_PACKAGE = (
    "Each registered case package at its current analysis revision (manifest, interpretation, case "
    "files). Data version: a digest of the package's files, tool state aside."
)


@observable_source_asset(partitions_def=hypothesis_inputs, group_name=PROXIMITY, description=HYPOTHESES)
def hypotheses(inputs: Inputs) -> DataVersionsByPartition:
    """The current version of every registered input with hypotheses (see HYPOTHESES)."""
    return DataVersionsByPartition(
        {
            r.id: DataVersion(fingerprint(r.path, r.kind))
            for r in inputs.registry().of_kind(*WITH_HYPOTHESES)
            if r.path.is_dir()
        }
    )


@observable_source_asset(partitions_def=case_revisions, group_name=CASEWORK, description=CASE_PACKAGE)
def case_package(context, inputs: Inputs) -> DataVersionsByPartition:
    """The current version of every registered case package (see CASE_PACKAGE); a package that
    cannot be read is skipped with one logged line."""
    versions = {}
    for r in inputs.registry().of_kind("case"):
        try:
            revision = CasePackage(r.path).manifest()["analysis_revision"]
        except (HypographError, OSError, KeyError, TypeError) as e:
            context.log.warning(f"{r.id}: {r.path}: not observed: {e}")
            continue
        versions[sub_key(r.id, revision_key(revision))] = DataVersion(fingerprint(r.path, "case"))
    return DataVersionsByPartition(versions)


def observed(input_id: str, version: str, asset=None) -> AssetObservation:
    """The observation of ``hypotheses`` (or ``asset``) at ``version`` for one partition (what a
    sensor, a command about to run, or a step that rewrote the input reports)."""
    key = (asset or hypotheses).key
    return AssetObservation(asset_key=key, partition=input_id, tags={DATA_VERSION_TAG: version})


def latest_version(instance, asset, partition: str) -> str | None:
    """The data version of ``asset``'s latest observation for ``partition`` (None if never observed)."""
    records = instance.fetch_observations(
        AssetRecordsFilter(asset_key=asset.key, asset_partitions=[partition]), limit=1
    ).records
    return records[0].asset_observation.tags.get(DATA_VERSION_TAG) if records else None


def observe(instance, record: InputRecord, partition: str | None = None) -> None:
    """Record the input's current version before a run reads it (when it differs from the last
    observed), so the run's materializations name the version they read. ``partition``: the case
    revision key for a case."""
    asset, key = (case_package, partition) if record.kind == "case" else (hypotheses, record.id)
    version = fingerprint(record.path, record.kind)
    if key is not None and latest_version(instance, asset, key) != version:
        instance.report_runless_asset_event(observed(key, version, asset))


def report_rewrite(context: AssetExecutionContext, inputs: Inputs) -> str:
    """After a step rewrote its input's hypotheses: log their new version, return it."""
    record = inputs.record(context.partition_key)
    version = fingerprint(record.path, record.kind)
    context.log_event(observed(record.id, version))
    return version
