"""The library's key rules as blocking checks on ``hypothesis_library``."""

from dagster import AssetCheckExecutionContext, AssetCheckResult, asset_check

from assets.errors import project_errors
from assets.library.assets import hypothesis_library
from assets.metadata import check_result as _result
from assets.partitions import library_rounds
from hypograph.library import checks as library_checks
from resources import Inputs


def _library_check(name: str, description: str):
    """A blocking check running the library key rule ``name`` on the partition's hypothesis_library.json."""

    @asset_check(
        asset=hypothesis_library, name=name, description=description, blocking=True, partitions_def=library_rounds
    )
    @project_errors
    def _check(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
        root, _ = inputs.sub_root(context.partition_key)
        return _result(library_checks.run_checks(root)[name])

    return _check


# The library's key rules: name -> what the UI says of it (checked on each round's merge and on the
# file as it is on disk, ``library_file``).
RULES = {
    "file_validates": "hypothesis_library.json validates against the library schema.",
    "scored": "Every behavior has an impact; every mechanism a novelty, planned data and models.",
    "ids_unique_never_reused": "Ids unique, and none reused after a node was deleted (high-water mark).",
    "statements_distinct": "No two statements equal after normalisation.",
}

CHECKS = [_library_check(name, description) for name, description in RULES.items()]
