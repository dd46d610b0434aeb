"""The case-batch rules as blocking checks on ``hypothesis_batch``."""

from dagster import AssetCheckExecutionContext, AssetCheckResult, asset_check

from assets.case.assets import hypothesis_batch
from assets.errors import project_errors
from assets.metadata import check_result as _result
from assets.partitions import case_revisions
from hypograph.case import checks as case_checks
from hypograph.case.package import CasePackage
from hypograph.ids import key_number
from resources import Inputs


def _case_check(name: str, description: str):
    """A blocking check running the case-batch rule ``name`` on the partition's published batch."""

    @asset_check(
        asset=hypothesis_batch, name=name, description=description, blocking=True, partitions_def=case_revisions
    )
    @project_errors
    def _check(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
        root, revision = inputs.sub_root(context.partition_key)
        return _result(case_checks.run_checks(CasePackage(root), key_number(revision))[name])

    return _check


CHECKS = [_case_check(name, description) for name, description in case_checks.CHECKS.items()]
