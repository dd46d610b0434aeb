"""The case's input, as a source asset Dagster observes: ``case_package``, partitioned by
``case_revisions``, whose data version is a digest of the package's files (tool state aside).
Observing before a run, and registering inputs: ``assets/sources.py``."""

from dagster import DataVersion, DataVersionsByPartition, observable_source_asset

from assets.groups import CASE
from assets.partitions import case_revisions
from assets.sources import CASE_PACKAGE
from hypograph.case.package import CasePackage
from hypograph.errors import HypographError
from hypograph.ids import numbered_key
from hypograph.inputs import fingerprint, sub_key
from resources import Inputs

DESCRIPTION = (
    "Each registered case package at its current analysis revision (manifest, interpretation, case "
    "files). Data version: a digest of the package's files, tool state aside."
)


@observable_source_asset(key=CASE_PACKAGE, partitions_def=case_revisions, group_name=CASE, description=DESCRIPTION)
def case_package(context, inputs: Inputs) -> DataVersionsByPartition:
    """The current version of every registered case package (see DESCRIPTION); a package that
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
