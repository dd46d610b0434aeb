"""A check's result as Dagster metadata, the same for every product: its violations as a table the UI
renders (each product's own tables: ``assets/<product>/``)."""

from dagster import AssetCheckResult, MetadataValue, TableColumn, TableRecord, TableSchema


def check_result(violations: list[tuple[str, str]], **metadata) -> AssetCheckResult:
    """A check's result: passed when nothing is violated, the violations as a table."""
    return AssetCheckResult(
        passed=not violations,
        metadata={
            "violations": len(violations),
            "violation_list": violations_table(violations) if violations else MetadataValue.text("no violations"),
            **metadata,
        },
    )


def violations_table(violations: list[tuple[str, str]], limit: int = 200) -> MetadataValue:
    schema = TableSchema(columns=[TableColumn("id", "string"), TableColumn("reason", "string")])
    return MetadataValue.table([TableRecord({"id": i, "reason": r}) for i, r in violations[:limit]], schema=schema)
