"""The library file as it is on disk, one partition per registered library (``libraries``):
observed, never written, with the library's key rules as checks and its behaviors and mechanisms
in the observation's metadata. What a library shows before any round (a library written by the
seed tool, the example) and after them; the ``library_observe`` job runs it (``hypograph library
DIR --report`` and ``--check``, the UI's Observe), offline.

A run of one partition (the command's, a backfill's, the Launchpad's) observes that library. A run
of none (the Observe button of the job's or the asset's page: Dagster launches it without a
partition) observes every registered library, one observation and one result per check for each,
as ``hypotheses`` does; a library that cannot be read is skipped with one logged line, and a run
with no library to observe fails in one line saying how to register one."""

import warnings

from dagster import (
    AssetCheckEvaluation,
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetObservation,
    AssetSpec,
    BetaWarning,
    DataVersion,
    MetadataValue,
    ObserveResult,
    Output,
    TableColumn,
    TableRecord,
    TableSchema,
    multi_observable_source_asset,
)
from dagster._core.definitions.data_version import DATA_VERSION_TAG
from dagster._core.definitions.source_asset import SYSTEM_METADATA_KEY_SOURCE_ASSET_OBSERVATION

from assets.errors import project_errors
from assets.groups import LIBRARY
from assets.library.checks import RULES
from assets.metadata import check_result
from assets.partitions import LIBRARIES, libraries
from hypograph.errors import HypographError
from hypograph.inputs import fingerprint
from hypograph.scans import BAD_INPUT, registered, skip_line
from resources import Inputs

# Observable assets are "beta" in Dagster 1.13; a file watched, never written, is what they are for.
warnings.filterwarnings("ignore", message="Function `multi_observable_source_asset`", category=BetaWarning)

LIBRARY_FILE = AssetKey("library_file")
DESCRIPTION = (
    "Each registered library's hypothesis_library.json as it is on disk: its topic, behaviors and "
    "mechanisms (the `tree` table) and the library's key rules as checks. Observed offline, no model, "
    "nothing written (`hypograph library DIR --report` or `--check`, or Observe here). Data version: "
    'a digest of the file. Observed, never materialized: the Partitions page\'s "0% filled" counts '
    "materializations only; each library's observation and its checks are on its partition's page. "
    "Partitions: every registered library. New rounds (round_candidates … hypothesis_library, the "
    "library_round job) need a model: with one configured, each library's next round is offered there."
)
TREE = TableSchema(
    columns=[
        TableColumn("id", "string"),
        TableColumn("kind", "string"),
        TableColumn("text", "string"),
        TableColumn("score", "int", description="impact of a behavior, novelty of a mechanism"),
        TableColumn("status", "string", description="a behavior's recommendation, a mechanism's status"),
    ]
)


@multi_observable_source_asset(
    name="library_file",
    specs=[
        AssetSpec(LIBRARY_FILE, group_name=LIBRARY, partitions_def=libraries, description=DESCRIPTION, kinds={"json"})
    ],
    check_specs=[
        AssetCheckSpec(name, asset=LIBRARY_FILE, partitions_def=libraries, description=description)
        for name, description in RULES.items()
    ],
    partitions_def=libraries,
)
@project_errors
def library_file(context: AssetExecutionContext, inputs: Inputs):
    """The partition's library file: its version, what it holds, and its checks' results; with no
    partition (the UI's Observe), every registered library's (see the module docstring)."""
    if not context.has_partition_key:
        yield from _every_library(context, inputs)
        return
    root = inputs.root(context.partition_key)
    version, metadata, results = _observed(root)
    yield ObserveResult(
        asset_key=LIBRARY_FILE,
        data_version=DataVersion(version),
        metadata=metadata,
        check_results=[
            AssetCheckResult(check_name=name, asset_key=LIBRARY_FILE, passed=r.passed, metadata=r.metadata)
            for name, r in results.items()
        ],
    )


def _observed(root) -> tuple[str, dict, dict]:
    """(data version, metadata, {check name: result of the checks declared}) of the library at ``root``."""
    from hypograph.library.checks import run_checks

    results = run_checks(root)
    checks = {name: check_result(results[name]) for name in RULES}  # the checks declared
    metadata = _contents(root, results["file_validates"])
    # every rule's violations, in order, as `hypograph library --check` prints them from this record
    metadata["key_rules"] = MetadataValue.json([[name, [list(v) for v in found]] for name, found in results.items()])
    return fingerprint(root, "library"), metadata, checks


def _every_library(context: AssetExecutionContext, inputs: Inputs):
    """An unpartitioned run: an observation and the checks' results for each registered library,
    each event naming its partition (Dagster's own ``DataVersionsByPartition``, with metadata and
    checks), then the step's outputs, empty (no observation without a partition)."""
    known = set(context.instance.get_dynamic_partitions(LIBRARIES))
    records = [r for r in registered(inputs.registry(), ("library",), context.log.warning) if r.id in known]
    if not records:
        raise HypographError("no library registered to observe: `hypograph add DIR` one, then Observe again")
    for r in records:
        try:
            version, metadata, results = _observed(r.path)
        except BAD_INPUT as e:  # one library that cannot be read: the others are still observed
            context.log.warning(skip_line(f"{r.id}: {r.path}", e))
            continue
        yield AssetObservation(
            asset_key=LIBRARY_FILE, partition=r.id, tags={DATA_VERSION_TAG: version}, metadata=metadata
        )
        for name, result in results.items():
            yield AssetCheckEvaluation(
                asset_key=LIBRARY_FILE,
                check_name=name,
                passed=result.passed,
                metadata=result.metadata,
                blocking=False,
                partition=r.id,
            )
    assets_def = context.assets_def
    output = assets_def.get_output_name_for_asset_key(LIBRARY_FILE)
    yield Output(None, output_name=output, metadata={SYSTEM_METADATA_KEY_SOURCE_ASSET_OBSERVATION: True})
    for name in assets_def.check_specs_by_output_name:
        yield Output(None, output_name=name)


def _contents(root, invalid: list) -> dict:
    """Topic, counts and the behavior -> mechanism tree of a valid file; the problem of an invalid one."""
    from hypograph.library.schema import library_path, read_library
    from hypograph.library.state import round_keys

    path = {"path": MetadataValue.path(str(library_path(root)))}
    if invalid:
        return {**path, "problem": MetadataValue.text(invalid[0][1])}
    library = read_library(root)[0]
    rows = []
    for b in library.behaviors:
        impact = b.impact
        rows.append(_row(b.id, "behavior", b.statement, impact and impact.score, impact and impact.recommendation))
        rows += [_row(m.id, "mechanism", m.hypothesis, m.novelty and m.novelty.score, m.status) for m in b.mechanisms]
    return {
        **path,
        "topic": MetadataValue.text(library.topic),
        "behaviors": MetadataValue.int(len(library.behaviors)),
        "mechanisms": MetadataValue.int(sum(len(b.mechanisms) for b in library.behaviors)),
        "rounds_in_tool_state": MetadataValue.int(len(round_keys(root))),
        "tree": MetadataValue.table(rows, schema=TREE),
    }


def _row(node_id: str, kind: str, text: str, score: int | None, status: str | None) -> TableRecord:
    return TableRecord({"id": node_id, "kind": kind, "text": text, "score": score, "status": status or ""})
