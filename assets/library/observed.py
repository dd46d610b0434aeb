"""The library file as it is on disk, one partition per registered library (``libraries``):
observed, never written, with the library's key rules as checks and its behaviors and mechanisms
in the observation's metadata. What a library shows before any round (a library written by the
seed tool, the example) and after them; the ``library_observe`` job runs it (``hypograph library
DIR --report`` and ``--check``, the UI's Observe), offline."""

import warnings

from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetSpec,
    BetaWarning,
    DataVersion,
    MetadataValue,
    ObserveResult,
    TableColumn,
    TableRecord,
    TableSchema,
    multi_observable_source_asset,
)

from assets.errors import project_errors
from assets.groups import LIBRARY
from assets.library.checks import RULES
from assets.metadata import check_result
from assets.partitions import libraries
from hypograph.inputs import fingerprint
from resources import Inputs

# Observable assets are "beta" in Dagster 1.13; a file watched, never written, is what they are for.
warnings.filterwarnings("ignore", message="Function `multi_observable_source_asset`", category=BetaWarning)

LIBRARY_FILE = AssetKey("library_file")
DESCRIPTION = (
    "Each registered library's hypothesis_library.json as it is on disk: its topic, behaviors and "
    "mechanisms (the `tree` table) and the library's key rules as checks. Observed offline, no model, "
    "nothing written (`hypograph library DIR --report` or `--check`, or Observe here). Data version: "
    "a digest of the file. New rounds (round_candidates … hypothesis_library, the library_round job) "
    "need a model; a library none has run for has no round partitions yet."
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
    """The partition's library file: its version, what it holds, and its checks' results."""
    from hypograph.library.checks import run_checks

    root = inputs.root(context.partition_key)
    results = run_checks(root)
    yield ObserveResult(
        asset_key=LIBRARY_FILE,
        data_version=DataVersion(fingerprint(root, "library")),
        metadata=_contents(root, results["file_validates"]),
        check_results=[
            AssetCheckResult(check_name=name, asset_key=LIBRARY_FILE, passed=r.passed, metadata=r.metadata)
            for name, r in ((name, check_result(results[name])) for name in RULES)  # the checks declared
        ],
    )


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
