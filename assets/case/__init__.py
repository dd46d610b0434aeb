"""Case batches (seed 004): the case package -> draft and confirmed interpretation -> frozen
context -> the published batch -> its H nodes in a vault, one partition per case revision; its
checks, jobs, the retry sensor and its settings resource."""

from dagster import Definitions

from assets.case import assets
from assets.case.checks import CHECKS
from assets.case.jobs import JOBS, case_retries_due
from assets.case.resource import CaseResource
from assets.case.source import case_package

defs = Definitions(
    assets=[
        case_package,
        assets.interpretation_draft,
        assets.case_interpretation,
        assets.case_context,
        assets.hypothesis_batch,
        assets.batch_vault_nodes,
    ],
    asset_checks=CHECKS,
    jobs=JOBS,
    sensors=[case_retries_due],
    resources={"case": CaseResource()},
)
