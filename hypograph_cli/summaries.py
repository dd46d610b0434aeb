"""What ``hypograph proximity`` and ``hypograph structure`` print: what the run did and what waits
for the user, in words a user knows (read from the files written and the run's metadata)."""

from __future__ import annotations

import sys
from pathlib import Path

from hypograph.structure.baseline import read_baseline
from hypograph.structure.checks import CHECK_NAMES, all_checks
from hypograph.structure.structure_map import MAP
from hypograph.vault.vault import open_vault, require_vault


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 edge``, ``2 edges``; ``many`` where the plural is not ``word + s``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def vault_checks(root: Path) -> dict[int, list[tuple[str, str]]]:
    """The step-4 checks on the vault at ``root`` (nothing written: no roll-forward), by number."""
    require_vault(root)
    return all_checks(open_vault(root, roll_forward=False), read_baseline(root))


def check_lines(results: dict[int, list[tuple[str, str]]], indent: str = "") -> list[str]:
    """``check N: pass|FAIL (k)  name: what``, then ``  node: reason`` for every violation."""
    lines = []
    for number, violations in results.items():
        name, what = CHECK_NAMES[number]
        lines.append(
            f"{indent}check {number}: {'pass' if not violations else f'FAIL ({len(violations)})'}  {name}: {what}"
        )
        lines += [f"{indent}  {node_id}: {reason}" for node_id, reason in violations]
    return lines


def asset_metadata(result, asset: str) -> dict:
    """The plain metadata values of ``asset``'s materialization in this run ({} if none)."""
    for event in result.get_asset_materialization_events():
        if event.asset_key.to_user_string() == asset:
            return {k: v.value for k, v in event.materialization.metadata.items()}
    return {}


def print_model_usage(result) -> None:
    """One line per task that could ask a model: calls, cached, rejected, fallbacks, the
    structured-output mode (``hypograph.llm.client.usage_line``), on stderr."""
    from hypograph.llm.client import usage_line

    for event in result.get_asset_materialization_events():
        metadata = {k: v.value for k, v in event.materialization.metadata.items()}
        if "llm_task" in metadata and metadata.get("llm") != "offline":
            print(f"model: {usage_line(metadata)}", file=sys.stderr)


def print_warnings(result) -> None:
    """Each skipped input file and each hint, one line each on stderr."""
    for line in asset_metadata(result, "hypothesis_texts").get("warnings") or []:
        print(f"warning: {line}", file=sys.stderr)
    for line in asset_metadata(result, "dedup_verdicts").get("reviews_not_applied") or []:
        print(f"warning: {line}", file=sys.stderr)
    hint = asset_metadata(result, "similarity_graph").get("hint")
    if hint:
        print(f"hint: {hint}", file=sys.stderr)


def _files_read(rec) -> str:
    """`` (31 files read, 1 skipped: …)`` when the run skipped a file (``--skip-bad-files``), so the
    count of hypotheses is never shown without the count of files the stages read."""
    skipped = rec.skipped
    if not skipped:
        return ""
    files = rec.files_read
    first = skipped[0] + (f"; and {len(skipped) - 1} more" if len(skipped) > 1 else "")
    return f" ({plural(files, 'file') + ' read, ' if files is not None else ''}{len(skipped)} skipped: {first})"


def _title(node_id: str, title: str, width: int = 70) -> str:
    return f'{node_id} "{title[: width - 1]}…"' if len(title) > width else f'{node_id} "{title}"'


PROXIMITY_FILES = (
    "embeddings.npz",
    "embedding-ids.json",
    "embedding-meta.json",
    "graph.json",
    "clusters.json",
    "cluster-labels.json",
    "dupes.json",
    "verdicts.json",
)


def proximity_record(root: Path, result):
    """What ``hypograph proximity`` reports of ``root``'s proximity run ``result``, from the run's
    own record (its assets' metadata; no file is read again): counts, the largest clusters with
    labels, the top duplicate pairs with verdicts, a person's other verdicts, the review queue."""
    from hypograph_cli import records

    read = asset_metadata(result, "hypothesis_texts")
    graph = asset_metadata(result, "similarity_graph")
    clusters = asset_metadata(result, "proximity_clusters")
    return records.Proximity(
        path=str(root),
        hypotheses=graph["nodes"],
        files_read=read.get("files_read"),
        skipped=read.get("warnings") or [],
        edges=graph["edges"],
        threshold=graph["graph_threshold"]["value"],
        algorithm=clusters["algorithm"],
        clusters_total=clusters["clusters"],
        clusters_of_two_or_more=clusters["clusters"] - clusters["singletons"],
        singletons=clusters["singletons"],
        clusters=[
            records.Cluster(id=c, label=label, size=size, members=members)
            for c, label, size, members in asset_metadata(result, "cluster_labels")["largest"]
        ],
        backend=graph["backend"],
        duplicate_pairs=asset_metadata(result, "duplicate_pairs")["pairs"],
        **verdicts(asset_metadata(result, "dedup_verdicts")["summary"]),
        directory=str(root / "proximity"),
        files=list(PROXIMITY_FILES),
    )


def verdicts(summary: dict) -> dict:
    """The ``summary`` metadata of a run's ``dedup_verdicts`` as the record's fields."""
    from hypograph_cli import records

    def pair(row: list) -> records.Pair:
        a, b, similarity, verdict, decided_by, *titles = row
        named = dict(zip(("a_title", "b_title"), titles, strict=False))
        return records.Pair(a=a, b=b, similarity=similarity, verdict=verdict, decided_by=decided_by, **named)

    return {
        "top_pairs": [pair(r) for r in summary["top_pairs"]],
        "human_verdicts": [pair(r) for r in summary["human_verdicts"]],
        "review_waiting": summary["review_waiting"],
        "review_queue": [pair(r) for r in summary["review_queue"]],
    }


def print_proximity(rec) -> None:
    """``rec`` (``proximity_record``) as the lines ``hypograph proximity`` prints."""
    root, d = rec.path, Path(rec.directory)
    print(
        f"{root}: {plural(rec.hypotheses, 'hypothesis', 'hypotheses')}, {plural(rec.edges, 'edge')} "
        f">= {rec.threshold}, {plural(rec.clusters_total, 'cluster')} ({rec.algorithm}: "
        f"{rec.clusters_of_two_or_more} of 2 or more, {rec.singletons} of one), "
        f"{plural(rec.duplicate_pairs, 'duplicate pair')} "
        f"[{rec.backend}]" + _files_read(rec)
    )
    print("clusters:")
    for c in rec.clusters:  # the largest first
        members = ", ".join(c.members) + (", …" if c.size > len(c.members) else "")
        print(f"  {c.id}: {c.label or '(no label)'} ({members})")
    if rec.clusters_total > len(rec.clusters):
        print(f"  … and {rec.clusters_total - len(rec.clusters)} more, every one in {d / 'clusters.json'}")
    print("top duplicate pairs:" if rec.duplicate_pairs else "no duplicate pairs")
    for p in rec.top_pairs:
        verdict = f"  {p.verdict} [{p.decided_by}]" if p.verdict else ""
        print(f"  {p.similarity:.4f}  {p.a}  {p.b}{verdict}")
    if rec.human_verdicts:  # a person's verdict on a pair not listed above: said, so it is never applied unseen
        print("your verdicts from proximity/review.json on other pairs:")
        for v in rec.human_verdicts:
            print(f"  {v.similarity:.4f}  {v.a}  {v.b}  {v.verdict} [human]")
    print_review_queue(rec)
    print(f"files in {d}: " + ", ".join(rec.files))
    print(f"pictures (cluster map, thresholds, report.html): hypograph report {root}")


def print_review_queue(rec) -> None:
    """The FLAG pairs of ``rec`` (a record with ``review_queue``) waiting for a human verdict, with
    both titles, and where to record verdicts."""
    if not rec.review_waiting:
        return
    d = Path(rec.path) / "proximity"
    print(f"{rec.review_waiting} pair(s) wait for your review; record MERGE or KEEP in {d / 'review.json'}:")
    for v in rec.review_queue:
        print(f"  {v.similarity:.4f}  {_title(v.a, v.a_title)}  /  {_title(v.b, v.b_title)}")
    if rec.review_waiting > len(rec.review_queue):
        print(f"  … and {rec.review_waiting - len(rec.review_queue)} more, every one in {d / 'verdicts.json'} (FLAG)")


# What step 4 mints, said where the count is shown (README says it too).
MINTED = (
    'residuals: each open cluster\'s catch-all member, "the answer is not listed here"; '
    "complements: an answer a cluster needs that no source stated"
)


def structure_record(root: Path, runs: list, queue: dict):
    """What ``hypograph structure`` reports, from the runs' own records (``runs``: (job, result,
    why) of each run, in order; ``queue``: the ``dedup_verdicts`` summary of the vault's latest
    proximity run): what step 4 changed, the vault after it and its checks (the blocking checks the
    run evaluated), the review queue. Nothing of the vault is read again."""
    from hypograph_cli import records

    structure = next((result for job, result, _ in runs if job == "structure"), None)
    a = asset_metadata(structure, "hypothesis_dispositions") if structure is not None else {}
    b = asset_metadata(structure, "hypothesis_clusters") if structure is not None else {}
    rec = records.Structure(
        path=str(root),
        ran=[records.Step(job=job, why=why) for job, _, why in runs],
        merged=a.get("merged", 0),
        dropped=a.get("dropped", 0),
        clusters_created=b.get("created", 0),
        minted=b.get("minted_hypotheses", 0),
        by_hand=[*(a.get("merged_by_hand") or []), *(a.get("refused_by_hand") or []), *(a.get("amended") or [])],
        **(verdicts(queue) if queue else {"top_pairs": [], "review_waiting": 0, "review_queue": []}),
        structure_map=str(root / MAP),
    )
    if structure is None:
        return rec
    now = asset_metadata(structure, "structure_map")["vault_now"]
    rec.active = now["active"]
    rec.vault_clusters = dict(now["clusters"])
    rec.merged_into = dict(now["merged"])
    rec.dropped_why = dict(now["dropped"])
    rec.checks = run_checks(structure)
    return rec


def run_checks(result) -> list:
    """The step-4 checks ``result`` evaluated (the latest of each: check 6 runs after 4a and 4b), by number."""
    from hypograph_cli import records

    latest = {}
    for check in result.get_asset_check_evaluations():
        latest[int(check.metadata["check"].value)] = check
    out = []
    for number in sorted(latest):
        check = latest[number]
        table = check.metadata.get("violation_list")
        rows = [r.data for r in getattr(table, "records", None) or []]
        violations = [records.Violation(id=str(r.get("id")), reason=str(r.get("reason"))) for r in rows]
        out.append(records.Check(number=number, name=check.check_name, passed=check.passed, violations=violations))
    return out


def check_records(results: dict[int, list[tuple[str, str]]]) -> list:
    """The step-4 checks' results (number -> violations) as the record's ``Check`` list."""
    from hypograph_cli import records

    return [
        records.Check(
            number=number,
            name=CHECK_NAMES[number][0],
            passed=not violations,
            violations=[records.Violation(id=i, reason=r) for i, r in violations],
        )
        for number, violations in results.items()
    ]


def print_structure(rec) -> None:
    """``rec`` (``structure_record``) as the lines ``hypograph structure`` prints."""
    root = rec.path
    if rec.checks is None:
        started = "; ".join(f"only {s.job} ran ({s.why})" for s in rec.ran) or "no run started"
        print(
            f"{root}: unchanged since its last structuring with these settings: {started} "
            f"(its checks passed then; `hypograph check {root}` runs them again)"
        )
        print_review_queue(rec)
        print(f"structure map: {rec.structure_map}")
        return
    changed = [
        f"{plural(n, one, many) if one else n} {what}"
        for n, one, many, what in (
            (rec.merged, "hypothesis", "hypotheses", "merged into a survivor"),
            (rec.dropped, "", "", "dropped as off-topic"),
            (rec.clusters_created, "cluster", "clusters", "created"),
            (rec.minted, "hypothesis", "hypotheses", f"minted ({MINTED})"),
        )
        if n
    ]
    print(f"{root}: this run: " + (", ".join(changed) if changed else "nothing to change (already structured)"))
    for line in rec.by_hand:
        print(f"  {line}")  # a person's MERGE applied or refused; a decision amended so the vault completes
    print(
        f"vault now: {plural(rec.active, 'active hypothesis', 'active hypotheses')} in "
        f"{plural(len(rec.vault_clusters), 'cluster')}; "
        f"{len(rec.merged_into)} merged, {len(rec.dropped_why)} dropped (kept in hypotheses/merged/ and dropped/)"
    )
    for stem, links in rec.vault_clusters.items():
        print(f"  {stem}")
        for link in links:
            print(f"    {link}")
    for node_id, survivor in rec.merged_into.items():
        print(f"  merged: {node_id} -> {survivor}")
    for node_id, why in rec.dropped_why.items():
        print(f"  dropped: {node_id}: {why}")
    print_checks(rec.checks)
    print_review_queue(rec)
    print(f"structure map: {rec.structure_map}")


def print_checks(checks: list) -> None:
    """Each check (``check_records``) by name, pass or FAIL, and every violating node with its reason."""
    print("checks:")
    for c in checks:
        print(f"  {c.name} (check {c.number}): " + ("pass" if c.passed else f"FAIL ({len(c.violations)})"))
        for v in c.violations:  # as `hypograph check` names them
            print(f"    {v.id}: {v.reason}")
