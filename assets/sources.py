"""What every input shares, whatever product reads it: its source's observation before a run, and
its registration.

Each input kind has one source asset, observed by Dagster, whose data version is the content
fingerprint of what the assets downstream read: ``hypotheses`` (a run directory, vault or library:
``assets/proximity/source.py``) and ``case_package`` (``assets/case/source.py``). ``observe``
records an input's current version before a run reads it; an observation writes nothing.

Evaluating ``inputs_discovered`` writes nothing either (a tick the UI previews must change
nothing): it only reads the workspace and the registry. New folders are registered by the run it
requests (``register_inputs``), which writes the registry and each folder's id file and adds their
partitions; a folder's partitions are added once it is registered, never before."""

import hashlib
from pathlib import Path

from dagster import (
    AssetKey,
    AssetObservation,
    AssetRecordsFilter,
    Config,
    DefaultSensorStatus,
    OpExecutionContext,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    job,
    op,
    sensor,
)
from dagster._core.definitions.data_version import DATA_VERSION_TAG

from assets.groups import described
from assets.partitions import PARTITION_SETS, new_keys
from hypograph import environment
from hypograph.errors import HypographError
from hypograph.inputs import InputRecord, fingerprint
from hypograph.paths import KINDS, input_kind
from hypograph.scans import BAD_INPUT, registered, skip_line
from resources import Inputs

# The source asset of each input kind (its products' folders declare them under these keys): a case
# package's, else the hypotheses'. Keys, not the assets: observing before a run loads no product.
HYPOTHESES = AssetKey("hypotheses")
CASE_PACKAGE = AssetKey("case_package")


def observed(input_id: str, version: str, asset: AssetKey = HYPOTHESES) -> AssetObservation:
    """The observation of source ``asset`` at ``version`` for one partition (what a sensor, a
    command about to run, or a step that rewrote the input reports)."""
    return AssetObservation(asset_key=asset, partition=input_id, tags={DATA_VERSION_TAG: version})


def latest_version(instance, asset: AssetKey, partition: str) -> str | None:
    """The data version of source ``asset``'s latest observation for ``partition`` (None if never observed)."""
    records = instance.fetch_observations(
        AssetRecordsFilter(asset_key=asset, asset_partitions=[partition]), limit=1
    ).records
    return records[0].asset_observation.tags.get(DATA_VERSION_TAG) if records else None


def observe(instance, record: InputRecord, partition: str | None = None) -> None:
    """Record the input's current version before a run reads it (when it differs from the last
    observed), so the run's materializations name the version they read. ``partition``: the case
    revision key for a case."""
    asset, key = (CASE_PACKAGE, partition) if record.kind == "case" else (HYPOTHESES, record.id)
    version = fingerprint(record.path, record.kind)
    if key is not None and latest_version(instance, asset, key) != version:
        instance.report_runless_asset_event(observed(key, version, asset))


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
