"""The inputs themselves, as source assets Dagster observes: their data version is the content
fingerprint of what the assets downstream read (``hypograph.inputs.fingerprint``), so staleness,
the ``hypotheses_changed`` sensor and automation all work from Dagster's own data versions.

An observation writes nothing. The structure assets report a new version of ``hypotheses``
themselves when step 4 rewrites a vault's nodes, so their own writes are never taken for a
person's edit.

Evaluating ``inputs_discovered`` writes nothing either (a tick the UI previews must change
nothing): it only reads the workspace and the registry. New folders are registered by the run it
requests (``register_inputs``), which writes the registry and each folder's id file and adds their
partitions; a folder's partitions are added once it is registered, never before."""

import hashlib
import warnings
from pathlib import Path

from dagster import (
    AssetExecutionContext,
    AssetObservation,
    AssetRecordsFilter,
    BetaWarning,
    Config,
    DataVersion,
    DataVersionsByPartition,
    DefaultSensorStatus,
    OpExecutionContext,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    job,
    observable_source_asset,
    op,
    sensor,
)
from dagster._core.definitions.data_version import DATA_VERSION_TAG

from assets.groups import CASEWORK, PROXIMITY, described
from assets.partitions import (
    PARTITION_SETS,
    case_revisions,
    hypothesis_inputs,
    new_keys,
)
from hypograph import environment
from hypograph.casework.package import CasePackage
from hypograph.errors import HypographError
from hypograph.ids import numbered_key
from hypograph.inputs import InputRecord, fingerprint, sub_key
from hypograph.paths import KINDS, WITH_HYPOTHESES, input_kind
from hypograph.skips import BAD_INPUT, registered, skip_line
from resources import Inputs

# Observable source assets are "beta" in Dagster 1.13; they are what a partitioned external input is.
warnings.filterwarnings("ignore", message="Function `observable_source_asset`", category=BetaWarning)


HYPOTHESES = (
    "The hypotheses of each registered input, as the user left them: hypotheses/ of a run directory "
    "or a vault, hypothesis_library.json of a library. Data version: a digest of their content. "
    "A person's proximity/review.json counts too. Observe it to see which inputs changed; proximity is "
    "stale until it reads the new version."
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
        versions[sub_key(r.id, numbered_key(revision))] = DataVersion(fingerprint(r.path, "case"))
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
    """After a step that may have rewritten its input's hypotheses: their version, logged as a new
    observation when it differs from the last one (proximity is then stale, and only then)."""
    record = inputs.record(context.partition_key)
    version = fingerprint(record.path, record.kind)
    if latest_version(context.instance, hypotheses, record.id) != version:
        context.log_event(observed(record.id, version))
    return version


def partition_requests(instance, records: list[InputRecord], log=None) -> list:
    """The add requests that would put each record's keys in the partition sets it belongs to
    (``assets.partitions.new_keys``), for those not there yet."""
    return [PARTITION_SETS[name].build_add_request(keys) for name, keys in new_keys(instance, records, log).items()]


class DiscoveredFolders(Config):
    """The folders ``inputs_discovered`` found unregistered (absolute paths)."""

    paths: list[str]


@op(description="Registers each folder given (its id file, the registry) and adds its partitions.")
def register_discovered(context: OpExecutionContext, config: DiscoveredFolders, inputs: Inputs) -> None:
    """``hypograph add`` for each folder the discovery sensor found; one that cannot be registered
    (a symlinked ``.hypograph/``, gone meanwhile, ...) is skipped with one logged line."""
    registry, records = inputs.registry(), []
    for path in config.paths:
        try:
            records += registry.add_all([(Path(path), None)])
        except HypographError as e:
            context.log.warning(f"{path}: not registered: {e}")
    for record in records:
        context.log.info(f"{record.id}: {record.kind} {record.path}" + (f" ({record.note})" if record.note else ""))
    for request in partition_requests(context.instance, records, context.log.warning):
        context.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))


@job(description="Registers the input folders inputs_discovered found in the workspace (what `hypograph add` does).")
def register_inputs():
    register_discovered()


def _workspace_inputs(workspace: Path, log=None) -> list[Path]:
    """The input folders directly under ``workspace`` (read only; other folders passed over)."""
    found = []
    for path in sorted(p for p in workspace.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            input_kind(path)
        except HypographError:
            continue  # not an input: an unrelated folder in the workspace
        except BAD_INPUT as e:  # a folder that cannot be read: the others are still found
            (log or print)(skip_line(path, e))
            continue
        found.append(path.resolve())
    return found


# On by default only where a workspace is configured: without one there is nothing to discover,
# and a running sensor would log its skip every 30 s in the `make ui` terminal.
DISCOVERY = DefaultSensorStatus.RUNNING if environment.current().workspace else DefaultSensorStatus.STOPPED


@described(sensor, job=register_inputs, minimum_interval_seconds=30, default_status=DISCOVERY)
def inputs_discovered(context: SensorEvaluationContext, inputs: Inputs):
    """Registers each input folder under the workspace folder (``HYPOGRAPH_WORKSPACE``) and adds its
    partitions: run directories, vaults, libraries, case packages and their revisions. On by
    default when ``HYPOGRAPH_WORKSPACE`` is set, off (never evaluated) when it is not; started by
    hand without a workspace, it skips, saying so. Evaluating it writes nothing: new folders are
    registered by the ``register_inputs`` run it requests."""
    if not inputs.workspace:
        return SkipReason("no workspace folder configured (set HYPOGRAPH_WORKSPACE to discover inputs)")
    workspace = Path(inputs.workspace)
    if not workspace.is_dir():
        return SkipReason(f"workspace folder {workspace} does not exist (HYPOGRAPH_WORKSPACE)")
    found = _workspace_inputs(workspace, context.log.warning)
    registry = inputs.registry()
    new = registry.new_folders(found)
    here = {str(p) for p in found}
    records = [r for r in registered(registry, KINDS, context.log.warning) if str(r.path) in here]
    requests = partition_requests(context.instance, records, context.log.warning)
    runs = []
    if new:
        paths = [str(p) for p in new]
        key = hashlib.sha256(("\0".join(paths) + "\0" + _registry_digest(registry)).encode()).hexdigest()[:16]
        config = {"ops": {"register_discovered": {"config": {"paths": paths}}}}
        runs.append(RunRequest(run_key=f"register-{key}", run_config=config))
    if not requests and not runs:
        return SkipReason(f"no new input under {workspace}")
    return SensorResult(run_requests=runs, dynamic_partitions_requests=requests)


def _registry_digest(registry) -> str:
    """A digest of the registry's records: a run key changes when the registry does (so a failed
    registration is requested again once something changed, and never twice meanwhile)."""
    return hashlib.sha256(repr([(r.id, str(r.path), r.kind) for r in registry.records()]).encode()).hexdigest()
