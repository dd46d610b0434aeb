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


def _files_read(read: dict) -> str:
    """`` (31 files read, 1 skipped: …)`` when the run skipped a file (``--skip-bad-files``), so the
    count of hypotheses is never shown without the count of files the stages read."""
    skipped = read.get("warnings") or []
    if not skipped:
        return ""
    files = read.get("files_read")
    first = skipped[0] + (f"; and {len(skipped) - 1} more" if len(skipped) > 1 else "")
    return f" ({plural(files, 'file') + ' read, ' if files is not None else ''}{len(skipped)} skipped: {first})"


def _title(hypotheses: dict, node_id: str, width: int = 70) -> str:
    title = hypotheses.get(node_id, "")
    return f'{node_id} "{title[: width - 1]}…"' if len(title) > width else f'{node_id} "{title}"'


def _of_two(clusters) -> str:
    """``6 of 2 or more, 2 of one``: the split the report's threshold table shows."""
    sizes = [len(m) for m in clusters.clusters.values()]
    return f"{sum(s >= 2 for s in sizes)} of 2 or more, {sum(s == 1 for s in sizes)} of one"


def print_proximity(root: Path, top: int = 10, top_clusters: int = 20, read: dict | None = None) -> None:
    """Counts, the ``top_clusters`` largest clusters with labels (and how many more), the ``top``
    duplicate pairs with verdicts, the review queue, files. ``read``: the ``hypothesis_texts``
    metadata of the run, whose file count and skips the first line gives beside the hypotheses."""
    from hypograph.proximity import store
    from hypograph.proximity.communities import report_lines

    graph, _ = store.load_graph(root)  # graph.npz when it is graph.json's twin: no JSON parse
    clusters = store.read_clusters(root)
    pairs = store.read_dupes(root)
    verdicts = {frozenset(d.pair): d for d in store.read_verdicts(root)}
    names = {c: n["label"] for c, n in store.read_cluster_names(root).items()}
    d = store.proximity_dir(root)
    print(
        f"{root}: {plural(len(graph.ids), 'hypothesis', 'hypotheses')}, {plural(graph.num_edges, 'edge')} "
        f">= {graph.threshold}, {plural(clusters.num_clusters, 'cluster')} ({clusters.algorithm}: "
        f"{_of_two(clusters)}), "
        f"{plural(len(pairs), 'duplicate pair')} "
        f"[{graph.embedding.get('backend', '?')}]" + _files_read(read or {})
    )
    print("clusters:")
    lines = report_lines(clusters, names)
    for line in lines[:top_clusters]:  # the largest first
        print(f"  {line}")
    if len(lines) > top_clusters:
        print(f"  … and {len(lines) - top_clusters} more, every one in {d / 'clusters.json'}")
    print("top duplicate pairs:" if pairs else "no duplicate pairs")
    for p in pairs[:top]:
        v = verdicts.get(frozenset((p.a, p.b)))
        print(
            f"  {p.similarity:.4f}  {p.a}  {p.b}  {v.verdict} [{v.decided_by}]"
            if v
            else f"  {p.similarity:.4f}  {p.a}  {p.b}"
        )
    shown = {frozenset((p.a, p.b)) for p in pairs[:top]}
    yours = [v for key, v in verdicts.items() if v.decided_by == "human" and key not in shown]
    if yours:  # a person's verdict on a pair not listed above: said, so it is never applied unseen
        print("your verdicts from proximity/review.json on other pairs:")
        for v in yours:
            print(f"  {v.similarity:.4f}  {v.pair[0]}  {v.pair[1]}  {v.verdict} [human]")
    print_review_queue(root)
    files = (
        "embeddings.npz",
        "embedding-ids.json",
        "embedding-meta.json",
        "graph.json",
        "clusters.json",
        "cluster-labels.json",
        "dupes.json",
        "verdicts.json",
    )
    print(f"files in {d}: " + ", ".join(files))
    print(f"pictures (cluster map, thresholds, report.html): hypograph report {root}")


def print_review_queue(root: Path, shown: int = 20) -> None:
    """The FLAG pairs waiting for a human verdict, the ``shown`` most similar with both titles, and
    where to record verdicts."""
    from hypograph.proximity import store
    from hypograph.titles import titles_of

    queue = [v for v in store.read_verdicts(root) if v.verdict == "FLAG"]
    if not queue:
        return
    queue.sort(key=lambda v: -v.similarity)
    titles = titles_of(root, sorted({i for v in queue[:shown] for i in v.pair}))
    print(
        f"{len(queue)} pair(s) wait for your review; record MERGE or KEEP in "
        f"{store.proximity_dir(root) / 'review.json'}:"
    )
    for v in queue[:shown]:
        print(f"  {v.similarity:.4f}  {_title(titles, v.pair[0])}  /  {_title(titles, v.pair[1])}")
    if len(queue) > shown:
        print(f"  … and {len(queue) - shown} more, every one in {store.proximity_dir(root) / 'verdicts.json'} (FLAG)")


# What step 4 mints, said where the count is shown (README says it too).
MINTED = (
    'residuals: each open cluster\'s catch-all member, "the answer is not listed here"; '
    "complements: an answer a cluster needs that no source stated"
)


def print_structure(root: Path, result, ran: tuple[tuple[str, str], ...] = ()) -> None:
    """What this run changed (``result``: step 4's; None when step 4 did not run, ``ran``: the
    jobs that did, each with the reason it ran), the vault's clusters, the six checks by name, the
    review queue."""
    a = asset_metadata(result, "hypothesis_dispositions") if result is not None else {}
    b = asset_metadata(result, "hypothesis_clusters") if result is not None else {}
    changed = [
        f"{plural(n, one, many) if one else n} {what}"
        for n, one, many, what in (
            (a.get("merged", 0), "hypothesis", "hypotheses", "merged into a survivor"),
            (a.get("dropped", 0), "", "", "dropped as off-topic"),
            (b.get("created", 0), "cluster", "clusters", "created"),
            (b.get("minted_hypotheses", 0), "hypothesis", "hypotheses", f"minted ({MINTED})"),
        )
        if n
    ]
    if result is None:  # nothing read beyond what the runs' records and the review queue need
        started = "; ".join(f"only {job} ran ({why})" for job, why in ran) or "no run started"
        print(
            f"{root}: unchanged since its last structuring with these settings: {started} "
            f"(its checks passed then; `hypograph check {root}` runs them again)"
        )
        print_review_queue(root)
        print(f"structure map: {root / MAP}")
        return
    print(f"{root}: this run: " + (", ".join(changed) if changed else "nothing to change (already structured)"))
    for line in [*(a.get("merged_by_hand") or []), *(a.get("refused_by_hand") or []), *(a.get("amended") or [])]:
        print(f"  {line}")  # a person's MERGE applied or refused; a decision amended so the vault completes
    vault = open_vault(root)
    hyps = vault.of_type("hypothesis")
    state = lambda s: sum(h.meta.get("state") == s for h in hyps)  # noqa: E731
    clusters = vault.of_type("hypothesis-cluster")
    print(
        f"vault now: {plural(state('active'), 'active hypothesis', 'active hypotheses')} in "
        f"{plural(len(clusters), 'cluster')}; "
        f"{state('merged')} merged, {state('dropped')} dropped (kept in hypotheses/merged/ and dropped/)"
    )
    for hc in clusters:
        print(f"  {hc.path.stem}")
        for link in hc.meta.get("hypotheses") or []:
            print(f"    {link}")
    _print_gone(hyps)
    print_checks(all_checks(vault, read_baseline(root)))
    print_review_queue(root)
    print(f"structure map: {root / MAP}")


def _print_gone(hyps) -> None:
    for h in (h for h in hyps if h.meta.get("state") == "merged"):
        print(f"  merged: {h.id} -> {h.meta.get('merged_into')}")
    for h in (h for h in hyps if h.meta.get("state") == "dropped"):
        print(f"  dropped: {h.id}: {h.meta.get('drop_reason')}")


def print_checks(results: dict[int, list[tuple[str, str]]]) -> None:
    """Each check by name, pass or FAIL, and every violating node with its reason."""
    print("checks:")
    for number, violations in results.items():
        name, _ = CHECK_NAMES[number]
        print(f"  {name} (check {number}): " + ("pass" if not violations else f"FAIL ({len(violations)})"))
        for node_id, reason in violations:  # as `hypograph check` names them
            print(f"    {node_id}: {reason}")
