"""The seed's step-4 checks as blocking checks, with the same functions as ``hypograph check``."""

from dagster import AssetCheckExecutionContext, AssetCheckResult, asset_check

from assets.errors import project_errors
from assets.metadata import check_result as _result
from assets.partitions import vaults
from assets.structure.assets import hypothesis_clusters, hypothesis_dispositions
from hypograph.structure import checks as vault_checks
from hypograph.structure.baseline import read_baseline
from hypograph.vault.vault import open_vault
from resources import Inputs


def _blocking_check(number: int, asset):
    """A blocking check running the seed's step-4 check ``number`` on the partition's vault."""
    name, what = vault_checks.CHECK_NAMES[number]

    @asset_check(
        asset=asset, name=name, description=f"Step-4 check {number}: {what}.", blocking=True, partitions_def=vaults
    )
    @project_errors
    def _check(context: AssetCheckExecutionContext, inputs: Inputs) -> AssetCheckResult:
        vault = open_vault(inputs.root(context.partition_key))
        return _result(vault_checks.run_check(number, vault, read_baseline(vault.root)), check=str(number))

    return _check


CHECKS = [
    *(_blocking_check(n, hypothesis_dispositions) for n in (1, 5, 6, 7)),
    *(_blocking_check(n, hypothesis_clusters) for n in (2, 3, 4, 6)),
]
