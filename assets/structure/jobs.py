"""The step-4 job (proximity before and after it: ``assets/structure/next_job.py``)."""

from dagster import AssetSelection, define_asset_job

from assets.groups import RUN_TAGS, STRUCTURE
from assets.partitions import vaults

structure_job = define_asset_job(
    "structure",
    run_tags=RUN_TAGS,
    selection=AssetSelection.groups(STRUCTURE),
    partitions_def=vaults,
    description="Step 4 on a vault whose proximity is materialized: merge near-duplicates and drop the off-topic "
    "(4a), hypothesis clusters with residuals (4b), the structure map; the seven blocking checks. "
    "Launch the proximity job on the vault first, and again after (`hypograph structure VAULT` does all three, "
    "as the hypotheses_changed sensor does); launched before proximity, it ends without running and says so. "
    "Partitions: every registered vault.",
)
