"""Proximity's values as Dagster metadata: the cluster, pair and verdict tables, the report's pictures
and its threshold sweep, as the UI renders them (a check's violations table: ``assets/metadata.py``)."""

import base64

from dagster import MetadataValue, TableColumn, TableRecord, TableSchema

from hypograph.hypotheses import Hypothesis
from hypograph.proximity.communities import Clusters, report_lines
from hypograph.report import Report

CLUSTER_SCHEMA = TableSchema(
    columns=[
        TableColumn("cluster", "string"),
        TableColumn("label", "string"),
        TableColumn("size", "int"),
        TableColumn("members", "string"),
        TableColumn("titles", "string"),
    ]
)
PAIR_SCHEMA = TableSchema(
    columns=[
        TableColumn("similarity", "float"),
        TableColumn("verdict", "string"),
        TableColumn("a", "string"),
        TableColumn("a_text", "string"),
        TableColumn("b", "string"),
        TableColumn("b_text", "string"),
    ]
)


def cluster_table(
    clusters: Clusters, labels: dict[str, str] | None = None, limit: int = 50, titles: dict[str, str] | None = None
) -> MetadataValue:
    """One row per cluster: its label, size, member ids and (``titles``: id -> title) the first members' titles."""
    labels = {**clusters.keywords, **(labels or {})}
    titles = titles or {}
    records = [
        TableRecord(
            {
                "cluster": c,
                "label": labels.get(c, ""),
                "size": len(m),
                "members": ", ".join(m[:20]),
                "titles": " · ".join(titles.get(i) or i for i in m[:8]) + (" · …" if len(m) > 8 else ""),
            }
        )
        for c, m in list(clusters.clusters.items())[:limit]
    ]
    return MetadataValue.table(records, schema=CLUSTER_SCHEMA)


def cluster_report(clusters: Clusters, labels: dict[str, str] | None = None, limit: int = 50) -> MetadataValue:
    lines = report_lines(clusters, labels)
    more = [f"… and {len(lines) - limit} more"] if len(lines) > limit else []
    return MetadataValue.md("\n".join(f"- {line}" for line in lines[:limit] + more))


def _gist(h: Hypothesis | None, width: int = 160) -> str:
    """Title and statement, cut to ``width`` characters: enough for a reviewer to recognise it."""
    if h is None:
        return ""
    text = " — ".join(t for t in (h.title, h.statement) if t)
    return text if len(text) <= width else text[: width - 1] + "…"


def pair_table(pairs: list, hypotheses: list[Hypothesis], limit: int = 25) -> MetadataValue:
    """Pairs (DuplicatePair or Decision) with both hypotheses' title and statement, and the verdict."""
    by_id = {h.id: h for h in hypotheses}
    records = []
    for p in pairs[:limit]:
        a, b = p.pair if hasattr(p, "pair") else (p.a, p.b)
        verdict = {"verdict": f"{p.verdict} [{p.decided_by}]"} if hasattr(p, "verdict") else {}
        records.append(
            TableRecord(
                {
                    "similarity": p.similarity,
                    **verdict,
                    "a": a,
                    "a_text": _gist(by_id.get(a)),
                    "b": b,
                    "b_text": _gist(by_id.get(b)),
                }
            )
        )
    if pairs and not hasattr(pairs[0], "verdict"):  # duplicate pairs, not yet judged: no empty verdict column
        schema = TableSchema(columns=[c for c in PAIR_SCHEMA.columns if c.name != "verdict"])
        return MetadataValue.table(records, schema=schema)
    return MetadataValue.table(records, schema=PAIR_SCHEMA)


def largest_clusters(clusters: Clusters, names: dict[str, dict], top: int = 20, members: int = 12) -> MetadataValue:
    """The ``top`` largest clusters as ``[id, label, size, first members]``: what a command's
    summary shows of them (read from the run's record, not from the files)."""
    labels = {**clusters.keywords, **{c: n["label"] for c, n in names.items()}}
    rows = [[c, labels.get(c) or "", len(m), m[:members]] for c, m in list(clusters.clusters.items())[:top]]
    return MetadataValue.json(rows)


def verdict_summary(pairs: list, decisions: list, hypotheses: list[Hypothesis], top: int = 10, shown: int = 20):
    """What a command's summary shows of the verdicts, from the run's record: the ``top`` duplicate
    pairs with their verdicts, a person's verdicts on other pairs, and the FLAG pairs waiting for a
    person (how many; the ``shown`` most similar with both titles)."""
    verdicts = {frozenset(d.pair): d for d in decisions}
    listed = {frozenset((p.a, p.b)) for p in pairs[:top]}

    def row(a: str, b: str, similarity: float) -> list:
        d = verdicts.get(frozenset((a, b)))
        return [a, b, float(similarity), d and d.verdict, d and d.decided_by]

    queue = sorted((d for d in decisions if d.verdict == "FLAG"), key=lambda d: -d.similarity)
    by_id = {h.id: h for h in hypotheses}
    title = lambda i: " ".join(((by_id[i].title or by_id[i].statement) if i in by_id else "").split())  # noqa: E731
    return MetadataValue.json(
        {
            "top_pairs": [row(p.a, p.b, p.similarity) for p in pairs[:top]],
            "human_verdicts": [
                row(*d.pair, d.similarity) for k, d in verdicts.items() if d.decided_by == "human" and k not in listed
            ],
            "review_waiting": len(queue),
            "review_queue": [[*row(*d.pair, d.similarity), title(d.pair[0]), title(d.pair[1])] for d in queue[:shown]],
        }
    )


def png_md(png: bytes, alt: str, caption: str = "") -> MetadataValue:
    """A PNG shown inline: Dagster's markdown renders a base64 ``data:`` image (a local path does not
    load in the browser)."""
    image = f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode()})"
    return MetadataValue.md(image + (f"\n\n{caption}" if caption else ""))


def report_metadata(report: Report, input_id: str) -> dict:
    """The pictures of ``input_id`` (the partition) inline, each captioned with the input and what
    it shows (``Report.captions``); first, a short note naming the input and the pictures (short enough for the UI to
    show in place: Dagster 1.13 has no image metadata, and shows a markdown entry of 1,000
    characters or more behind [Show Markdown]); files as paths, counts and seconds as numbers."""
    files = {f"{name}_file": MetadataValue.path(str(path)) for name, path in report.files.items()}
    shown = {"cluster_map": "cluster map", "vault_map": "hypothesis clusters", "thresholds": "threshold sweep"}
    pictures = {
        name: png_md(png, f"{shown[name]} of {input_id}", f"input `{input_id}`: {report.captions[name]}")
        for name, png in report.pngs.items()
    }
    pictures["threshold_sweep"] = pictures.pop("thresholds")
    names = ", ".join(f"`{name}`" for name in pictures)
    note = (
        f"Pictures of input **{input_id}** (this partition): {names} below (each opens with its Show Markdown); "
        f"another input's: pick it on the Partitions tab. Interactive: `{report.files['html']}`"
    )
    return {
        "pictures": MetadataValue.md(note),
        **pictures,
        "sweep": sweep_table(report.sweep.rows()),
        **{name: MetadataValue.int(n) for name, n in report.counts.items()},
        "files_written": MetadataValue.int(len(report.written)),
        "seconds": MetadataValue.float(round(report.seconds, 2)),
        "threshold": MetadataValue.text(f"{report.threshold:g}"),
        "dupe_threshold": MetadataValue.text(f"{report.dupe_threshold:g}"),
        **files,
        "headline": MetadataValue.text(report.headline),  # what `hypograph report` prints, with the files
        "files": MetadataValue.json([str(path) for path in report.files.values()]),
    }


def sweep_table(rows: list[dict]) -> MetadataValue:
    """The threshold sweep, one row per threshold (a blank cell: not computed at this size). Every
    record keeps every column (Dagster refuses records of different fields), a blank one as None."""
    kinds = {
        "threshold": "float",
        "edges": "int",
        "pairs": "float",
        "all_clusters": "int",
        "clusters": "int",
        "alone": "int",
    }
    schema = TableSchema(columns=[TableColumn(name, kind) for name, kind in kinds.items()])
    records = [TableRecord({k: row.get(k) for k in kinds}) for row in rows]
    return MetadataValue.table(records, schema=schema)
