"""The Dagster code location (pipelines/, assets/): the ``proximity`` job on real
temporary inputs, its blocking checks, metadata, idempotence, the sensor and the ``hypograph`` CLI."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_helper import hypograph, in_process, prox, prox_main
from conftest import EXAMPLE_RUN, RUN_DUPLICATES, RUN_IDS, copy_tree, execute, offline_env, snapshot
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from hypograph.inputs import stored_id
from hypograph.proximity import checks
from hypograph.proximity.graph import DEFAULT_MAX_NEIGHBOURS

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
SEED_FILES = (
    "embeddings.npz",
    "embedding-ids.json",
    "embedding-meta.json",
    "graph.json",
    "clusters.json",
    "dupes.json",
)
PROXIMITY_ASSETS = {
    "hypothesis_texts",
    "hypothesis_embeddings",
    "similarity_graph",
    "proximity_clusters",
    "duplicate_pairs",
}
PROXIMITY_CHECKS = {
    "graph_covers_embedded_ids",
    "graph_is_symmetric",
    "clusters_partition_nodes",
    "duplicate_pairs_are_valid",
}


def run_proximity_job(root: Path, **settings):
    """Execute the ``proximity`` job on ``root``'s partition on a throwaway instance; never raises."""
    return execute(root, "proximity", offline=None, **settings)


def materialized(result) -> set[str]:
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def metadata(result, asset: str) -> dict:
    """The materialization metadata of ``asset`` as plain values."""
    event = next(e for e in result.get_asset_materialization_events() if e.asset_key.to_user_string() == asset)
    return {k: v.value for k, v in event.materialization.metadata.items()}


def check_results(result) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def read_json(root: Path, name: str):
    return json.loads((root / "proximity" / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def job_run(tmp_path_factory, make_run_dir):
    """The small run directory after one ``proximity`` job run."""
    root = make_run_dir(tmp_path_factory.mktemp("job") / "run")
    return root, run_proximity_job(root)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, make_run_dir):
    """Snapshots of proximity/ after a first and after a second run on unchanged input."""
    root = make_run_dir(tmp_path_factory.mktemp("rerun") / "run")
    first = run_proximity_job(root)
    after_first = snapshot(root / "proximity")
    second = run_proximity_job(root)
    return first, second, after_first, snapshot(root / "proximity")


# -- one run ------------------------------------------------------------------------------------


def test_job_succeeds_and_materializes_every_proximity_asset(job_run):
    _, result = job_run
    assert result.success
    assert materialized(result) >= PROXIMITY_ASSETS


def test_job_writes_the_seed_files(job_run):
    root, _ = job_run
    for name in SEED_FILES:
        assert (root / "proximity" / name).is_file(), name
    assert read_json(root, "embedding-ids.json") == RUN_IDS
    assert read_json(root, "graph.json")["threshold"] == 0.3
    assert read_json(root, "clusters.json")["num_clusters"] == 3
    assert {(p["a"], p["b"]) for p in read_json(root, "dupes.json")} == RUN_DUPLICATES


def test_every_asset_check_runs_and_passes(job_run):
    _, result = job_run
    outcomes = check_results(result)
    assert outcomes.keys() >= PROXIMITY_CHECKS
    assert all(outcomes.values()), outcomes


def test_metadata_has_counts(job_run):
    root, result = job_run
    graph = read_json(root, "graph.json")
    edges = sum(len(n["edges"]) for n in graph["nodes"].values()) // 2
    assert metadata(result, "hypothesis_texts")["hypotheses"] == len(RUN_IDS)
    assert metadata(result, "hypothesis_embeddings")["hypotheses"] == len(RUN_IDS)
    assert metadata(result, "similarity_graph")["nodes"] == len(RUN_IDS)
    assert metadata(result, "similarity_graph")["edges"] == edges == 4
    assert metadata(result, "proximity_clusters")["clusters"] == read_json(root, "clusters.json")["num_clusters"]
    assert metadata(result, "proximity_clusters")["singletons"] == 1
    assert metadata(result, "duplicate_pairs")["pairs"] == len(read_json(root, "dupes.json")) == 2


def test_metadata_has_a_cluster_table(job_run):
    root, result = job_run
    table = metadata(result, "proximity_clusters")["cluster_table"]
    clusters = read_json(root, "clusters.json")
    rows = [r.data for r in table.records]
    assert [(r["cluster"], r["label"], r["members"]) for r in rows] == [
        (label, clusters["labels"][label], ", ".join(members)) for label, members in clusters["clusters"].items()
    ]


def test_pair_tables_show_both_hypotheses_and_the_verdict(job_run):
    root, result = job_run
    rows = [r.data for r in metadata(result, "dedup_verdicts")["verdicts"].records]
    titles = {h["id"]: h["title"] for h in (json.loads(p.read_text()) for p in (root / "hypotheses").glob("H-*.json"))}
    assert {(r["a"], r["b"]) for r in rows} == {tuple(p) for p in RUN_DUPLICATES}
    for r in rows:
        assert r["a_text"].startswith(titles[r["a"]]) and r["b_text"].startswith(titles[r["b"]])
        assert r["verdict"].split()[0] in ("MERGE", "KEEP", "FLAG")


def test_an_edgeless_graph_says_the_highest_similarity_and_what_to_try(run_dir):
    result = run_proximity_job(run_dir, graph_threshold=0.99)
    hint = metadata(result, "similarity_graph")["hint"]
    assert "only 0 edge(s) for 6 hypotheses at threshold 0.99" in hint
    assert "the highest similarity between two hypotheses is 0.9" in hint and "--backend sbert" in hint


def test_job_output_matches_the_prox_cli(job_run, run_dir):
    root, _ = job_run
    for command in ("embed", "graph", "clusters", "dupes"):
        # the assets cap the neighbours by default (prox graph does not): the same K on both sides
        cap = ["--max-neighbours", str(DEFAULT_MAX_NEIGHBOURS)] if command == "graph" else []
        assert prox_main([command, "--run-dir", str(run_dir), *cap]) == 0
    for name in SEED_FILES:
        assert (run_dir / "proximity" / name).read_bytes() == (root / "proximity" / name).read_bytes(), name


def test_settings_change_the_thresholds(run_dir):
    result = run_proximity_job(run_dir, graph_threshold=0.5, dupe_threshold=0.95)
    assert result.success
    assert read_json(run_dir, "graph.json")["threshold"] == 0.5
    assert [(p["a"], p["b"]) for p in read_json(run_dir, "dupes.json")] == [("H-4", "H-5")]
    assert metadata(result, "similarity_graph")["edges"] == 2


# -- re-runs ------------------------------------------------------------------------------------


def test_second_run_on_unchanged_input_writes_identical_bytes(two_runs):
    first, second, after_first, after_second = two_runs
    assert first.success and second.success
    assert after_first.keys() == after_second.keys()
    assert {f: data for f, (data, _) in after_second.items()} == {f: data for f, (data, _) in after_first.items()}


def test_second_run_on_unchanged_input_leaves_mtimes_alone(two_runs):
    _, _, after_first, after_second = two_runs
    changed = [f for f in after_first if after_first[f][1] != after_second[f][1]]
    assert changed == []


# -- failures -----------------------------------------------------------------------------------


def test_failing_blocking_check_stops_downstream_assets(run_dir, monkeypatch):
    monkeypatch.setattr(checks, "graph_edges_valid", lambda graph: [("H-1", "planted violation")])
    result = run_proximity_job(run_dir)
    assert not result.success
    assert check_results(result)["graph_is_symmetric"] is False
    done = materialized(result)
    assert {"hypothesis_texts", "hypothesis_embeddings", "similarity_graph"} <= done
    assert not {"proximity_clusters", "duplicate_pairs"} & done
    assert not (run_dir / "proximity" / "clusters.json").exists()
    assert not (run_dir / "proximity" / "dupes.json").exists()


def test_bad_vault_node_fails_the_run_before_any_output(vault):
    (vault / "hypotheses" / "H-9 - Broken.md").write_text("---\nid: [unclosed\n---\n")
    result = run_proximity_job(vault)
    assert not result.success
    assert materialized(result) == set()
    assert not (vault / "proximity").exists()


# -- bundled examples ---------------------------------------------------------------------------


@pytest.mark.parametrize("example", ["example_run", "example_vault"])
def test_job_on_bundled_example(request, example):
    root = request.getfixturevalue(example)
    result = run_proximity_job(root)
    assert result.success
    assert all(check_results(result).values())
    ids = read_json(root, "embedding-ids.json")
    assert metadata(result, "hypothesis_texts")["hypotheses"] == len(ids) > 0
    assert sorted(m for ms in read_json(root, "clusters.json")["clusters"].values() for m in ms) == sorted(ids)


# -- sensor -------------------------------------------------------------------------------------

# -- the hypograph CLI --------------------------------------------------------------------------
# What a command prints and records: its main, in this process; its one-line errors as a process
# shows them: the console script (tests/support/cli_helper.py).


def test_hypograph_proximity_prints_summary_and_records_the_run(run_dir):
    result = in_process("proximity", run_dir)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    clusters = "3 clusters (louvain: 2 of 2 or more, 1 of one)"  # as the report's threshold table splits them
    assert f"{run_dir.resolve()}: 6 hypotheses, 4 edges >= 0.3, {clusters}, 2 duplicate pairs" in out
    assert "\nclusters:\n  C-01: " in out
    assert "  C-03: " in out
    assert "0.9" in out and "H-4  H-5" in out and "H-1  H-2" in out

    home = Path(os.environ["DAGSTER_HOME"])  # the one shared instance (a throwaway one in tests)
    assert not (run_dir / ".hypograph" / "dagster").exists()
    key = stored_id(run_dir)
    assert key.startswith(run_dir.name)  # the folder's name, plus a suffix when another input took it
    with DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs(filters=RunsFilter(tags={"dagster/partition": key}))
        assert key in instance.get_dynamic_partitions("hypothesis_inputs")
    assert [(r.job_name, r.status) for r in runs] == [("proximity", DagsterRunStatus.SUCCESS)]


def test_hypograph_proximity_on_missing_path_is_a_one_line_error(tmp_path):
    result = hypograph("proximity", tmp_path / "nowhere")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"hypograph proximity: {tmp_path / 'nowhere'}: no such directory"]


@pytest.fixture(scope="module")
def failed_hypograph_run(tmp_path_factory):
    """``hypograph proximity`` on a directory whose hypotheses/ is empty: (root, completed process)."""
    root = tmp_path_factory.mktemp("empty")
    (root / "hypotheses").mkdir()
    return root, hypograph("proximity", root)


def test_hypograph_proximity_on_bad_input_fails_with_a_final_error_line(failed_hypograph_run):
    root, result = failed_hypograph_run
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()  # one line: the cause first, then the run to look at
    assert line.startswith("hypograph proximity: hypothesis_texts: ") and "proximity run " in line
    assert line.endswith("failed: its events in `make ui`)")
    assert not (root / "proximity").exists()


def test_hypograph_proximity_error_line_names_the_problem(failed_hypograph_run):
    _, result = failed_hypograph_run
    assert "no hypotheses found" in result.stderr.strip().splitlines()[-1]


def test_hypograph_proximity_skips_each_bad_file_only_when_told_and_counts_it(run_dir):
    for n in (21, 22, 23):  # no "id": skipped, each named
        (run_dir / "hypotheses" / f"H-{n}.json").write_text(json.dumps({"title": f"orphan {n}"}))
    result = in_process("proximity", run_dir, "--skip-bad-files")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 3 and all(f"H-{n}.json" in w for n, w in zip((21, 22, 23), warnings, strict=True))
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"{run_dir.resolve()}: 6 hypotheses")  # the count the summary gives ...
    assert first.endswith("(9 files read, 3 skipped: hypotheses/H-21.json: skipped: field 'id': missing; and 2 more)")


def test_a_bad_hypothesis_file_is_a_bad_input_exit_1_named_first_nothing_written(tmp_path):
    """Issue 46: a malformed hypotheses/H-0031.json beside the example's 30 was exit 0 and "30
    hypotheses" beside "read hypotheses: 31 files". Now exit 1, the file named in stderr's first
    line with what to do, no proximity/ written; prox (the seed's drop-in) still skips it."""
    run = copy_tree(EXAMPLE_RUN, tmp_path / "run")
    bad = run / "hypotheses" / "H-0031.json"
    bad.write_text('{"id": "H-0031", "title": "cut off', encoding="utf-8")
    env = {**offline_env(), "DAGSTER_HOME": str(tmp_path / "home")}
    result = hypograph("proximity", run, env=env)
    assert result.returncode == 1, result.stderr
    first = result.stderr.splitlines()[0]
    assert str(bad) in first and "--skip-bad-files" in first and "nothing written" in first, first
    assert "Traceback" not in result.stderr
    assert not (run / "proximity").exists()

    skipped = in_process("proximity", run, "--skip-bad-files", env=env)  # what it prints
    assert skipped.returncode == 0, skipped.stderr
    assert skipped.stdout.splitlines()[0].startswith(f"{run}: 30 hypotheses")
    assert "(31 files read, 1 skipped: hypotheses/H-0031.json: skipped: " in skipped.stdout.splitlines()[0]
    assert "warning: hypotheses/H-0031.json: skipped:" in skipped.stderr

    shutil.rmtree(run / "proximity")
    seed = prox("embed", "--run-dir", run)  # prox keeps the seed's behaviour: skip, warn, exit 0
    assert seed.returncode == 0 and "hypotheses/H-0031.json: skipped:" in seed.stderr


def test_graph_checks_read_the_npz_twin_and_graph_json_once_it_is_edited(run_dir):
    """The checks read what clusters and dupes read: graph.npz while it is graph.json's digest twin;
    once graph.json is edited (or written by another tool) they parse graph.json and catch its fault."""
    from assets.proximity.checks import _stored_graph

    assert execute(run_dir, "proximity").success
    nodes, _, violations, source = _stored_graph(run_dir)
    assert (source, violations) == ("graph.npz", []) and sorted(nodes) == sorted(RUN_IDS)
    doc = read_json(run_dir, "graph.json")
    a = next(i for i, n in doc["nodes"].items() if n["edges"])
    doc["nodes"][a]["edges"].pop()  # the edge is now listed on one endpoint only
    (run_dir / "proximity" / "graph.json").write_text(json.dumps(doc), encoding="utf-8")
    _, _, violations, source = _stored_graph(run_dir)
    assert source == "graph.json"
    assert any("is not listed on" in reason for _, reason in violations)


def test_one_hypothesis_runs_the_whole_job_and_its_report(tmp_path):
    """The smallest input: no pair, no threshold sweep below the graph threshold (blank sweep cells,
    as above ``sweep.EXACT_MAX`` hypotheses), every asset and check still succeeds, and the report."""
    from conftest import write_json_hypothesis
    from dagster import DagsterInstance

    write_json_hypothesis(tmp_path / "one", "H-1", title="Mites spread virus", statement="Varroa mites spread DWV.")
    instance = DagsterInstance.ephemeral()
    assert execute(tmp_path / "one", instance=instance).success
    assert json.loads((tmp_path / "one" / "proximity" / "dupes.json").read_text()) == []
    assert execute(tmp_path / "one", "report", instance=instance).success
    assert (tmp_path / "one" / "proximity" / "report.html").is_file()


def test_the_report_job_above_the_exact_sweep_size(run_dir, monkeypatch):
    """Above ``sweep.EXACT_MAX`` hypotheses (5,200 in the issue; 3 here) the sweep is estimated and
    its cells below the graph threshold blank: the report job still succeeds, and says so."""
    from dagster import DagsterInstance

    from hypograph.report import sweep

    monkeypatch.setattr(sweep, "EXACT_MAX", 3)
    instance = DagsterInstance.ephemeral()
    assert execute(run_dir, instance=instance).success
    assert execute(run_dir, "report", instance=instance).success
    doc = json.loads((run_dir / "proximity" / "report.json").read_text(encoding="utf-8"))
    assert doc["sweep_exact"] is False and any(row["edges"] is None for row in doc["sweep"])


def test_a_sweep_with_blank_cells_is_one_table_of_whole_records():
    """Above ``sweep.EXACT_MAX`` hypotheses the sweep leaves the levels below the graph threshold blank: every
    record still has every column (Dagster refuses records of different fields)."""
    from assets.proximity.metadata import sweep_table

    rows = [
        {"threshold": 0.2, "edges": None, "pairs": 12.5, "all_clusters": None, "clusters": None, "alone": None},
        {"threshold": 0.3, "edges": 4, "pairs": 4.0, "all_clusters": 3, "clusters": 2, "alone": 1},
    ]
    table = sweep_table(rows)
    assert [r.data for r in table.records] == rows


def test_a_run_parses_the_texts_snapshot_at_most_once_and_holds_no_corpus_after(run_dir, monkeypatch):
    """Five steps take the texts: the IO manager hands them the corpus it wrote (or parsed once)
    while the snapshot file is unchanged, and forgets it when the run ends. An edit of the snapshot
    between steps is read, not served stale."""
    from assets.proximity import io_manager

    parsed = []
    real = io_manager.corpus_from_json
    monkeypatch.setattr(io_manager, "corpus_from_json", lambda raw: parsed.append(len(raw)) or real(raw))
    result = run_proximity_job(run_dir)
    assert result.success
    assert parsed == []  # the writer's own corpus served every reader
    assert io_manager._LAST_TEXTS == {}
    path = run_dir / io_manager.TEXTS
    first = io_manager._read_texts(run_dir)
    assert len(parsed) == 1 and io_manager._read_texts(run_dir) is first
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["hypotheses"] = doc["hypotheses"][:1]
    path.write_text(json.dumps(doc), encoding="utf-8")  # a new inode, size and mtime
    assert len(io_manager._read_texts(run_dir).hypotheses) == 1 and len(parsed) == 2


def test_the_summary_lists_the_twenty_largest_clusters_and_says_how_many_more(tmp_path, capsys):
    """At scale a run has hundreds of clusters: `hypograph proximity`'s summary shows the 20 largest
    and says where the rest are (prox clusters, the seed's drop-in, still prints every one)."""
    from conftest import write_json_hypothesis

    from hypograph.proximity import store
    from hypograph_cli.summaries import print_proximity, proximity_record

    root = tmp_path / "run"
    for i in range(26):  # no word shared: every hypothesis its own cluster
        write_json_hypothesis(root, f"H-{i + 1}", title=f"w{i}a w{i}b", statement=f"w{i}c w{i}d w{i}e.")
    result = run_proximity_job(root)
    assert result.success
    assert store.read_clusters(root).num_clusters == 26
    print_proximity(proximity_record(root, result))  # from the run's record
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("clusters:")
    assert [line.split(":")[0].strip() for line in lines[at + 1 : at + 21]] == [f"C-{k:02d}" for k in range(1, 21)]
    assert lines[at + 21] == f"  … and 6 more, every one in {root / 'proximity' / 'clusters.json'}"
    assert lines[at + 22] in ("top duplicate pairs:", "no duplicate pairs")
