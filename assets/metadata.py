"""Turn domain values into Dagster metadata: tables and markdown the UI renders."""

from dagster import MetadataValue, TableColumn, TableRecord, TableSchema

from hypograph.proximity.communities import Clusters, report_lines
from hypograph.proximity.dupes import DuplicatePair

CLUSTER_SCHEMA = TableSchema(columns=[
    TableColumn("cluster", "string"), TableColumn("label", "string"),
    TableColumn("size", "int"), TableColumn("members", "string"),
])
PAIR_SCHEMA = TableSchema(columns=[
    TableColumn("a", "string"), TableColumn("b", "string"), TableColumn("similarity", "float"),
])


def cluster_table(clusters: Clusters, labels: dict[str, str] | None = None, limit: int = 50) -> MetadataValue:
    labels = {**clusters.keywords, **(labels or {})}
    records = [
        TableRecord({"cluster": c, "label": labels.get(c, ""), "size": len(m), "members": ", ".join(m[:20])})
        for c, m in list(clusters.clusters.items())[:limit]
    ]
    return MetadataValue.table(records, schema=CLUSTER_SCHEMA)


def cluster_report(clusters: Clusters, labels: dict[str, str] | None = None, limit: int = 50) -> MetadataValue:
    lines = report_lines(clusters, labels)
    more = [f"… and {len(lines) - limit} more"] if len(lines) > limit else []
    return MetadataValue.md("\n".join(f"- {line}" for line in lines[:limit] + more))


def pair_table(pairs: list[DuplicatePair], limit: int = 25) -> MetadataValue:
    return MetadataValue.table(
        [TableRecord(p.model_dump()) for p in pairs[:limit]], schema=PAIR_SCHEMA
    )


def violations_table(violations: list[tuple[str, str]], limit: int = 200) -> MetadataValue:
    schema = TableSchema(columns=[TableColumn("id", "string"), TableColumn("reason", "string")])
    return MetadataValue.table([TableRecord({"id": i, "reason": r}) for i, r in violations[:limit]], schema=schema)
