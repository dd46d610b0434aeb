"""Pictures and tables that agree with each other and with the command's summary (issue 46): the
threshold table counts the clustering proximity made, as the command does; each caption names only
line styles its figure draws; the vault map's subtitle counts the points it draws; the log axes of
report.html are ticked at powers of ten; each thresholds panel has its own legend beside it."""

from __future__ import annotations

import json
import re

import pytest
from cli_helper import in_process
from conftest import EXAMPLE_RUN, SHARED_VAULTS, copy_tree, offline_env
from test_report import proximity_files

from hypograph.report import figures, map_pictures, write_report
from hypograph.report.sweep import threshold_sweep

STYLE_WORDS = {"dashed": "dash", "dotted": "dot"}  # what a caption says -> plotly's line dash


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The example run directory after ``hypograph proximity`` and ``hypograph report``, and what
    the proximity command printed."""
    tmp = tmp_path_factory.mktemp("agree")
    root = copy_tree(EXAMPLE_RUN, tmp / "run")
    env = {**offline_env(), "DAGSTER_HOME": str(tmp / "home")}
    said = in_process("proximity", root, "--llm", "offline", env=env)
    assert said.returncode == 0, said.stderr
    assert in_process("report", root, env=env).returncode == 0
    return root, said.stdout


def test_the_threshold_table_counts_the_clustering_the_command_reported(run):
    root, said = run
    clusters = json.loads((root / "proximity" / "clusters.json").read_text())
    sizes = [len(m) for m in clusters["clusters"].values()]
    several, alone = sum(s >= 2 for s in sizes), sum(s == 1 for s in sizes)
    assert several and alone  # the example has both, so the two counts can disagree
    m = re.search(r", (\d+) clusters \(louvain: (\d+) of 2 or more, (\d+) of one\),", said)
    assert m, said.splitlines()[0]
    assert [int(g) for g in m.groups()] == [clusters["num_clusters"], several, alone]
    report = json.loads((root / "proximity" / "report.json").read_text())
    [row] = [r for r in report["sweep"] if abs(r["threshold"] - 0.30) < 1e-9]
    assert (row["all_clusters"], row["clusters"], row["alone"]) == (clusters["num_clusters"], several, alone)
    page = (root / "proximity" / "report.html").read_text(encoding="utf-8")
    assert f"<td>0.30</td><td>{row['edges']}</td><td>{row['pairs']}</td><td>{clusters['num_clusters']}</td>" in page


def _dashes(figure: dict) -> set[str]:
    """The line dashes a plotly figure (as a dict) draws: its traces' lines and its shapes'."""
    lines = [t.get("line") or {} for t in figure.get("data", [])]
    lines += [s.get("line") or {} for s in figure.get("layout", {}).get("shapes", [])]
    return {line.get("dash") or "solid" for line in lines}


def test_each_caption_names_only_line_styles_its_figure_draws(run):
    root, _ = run
    report = write_report(root)
    pictures = map_pictures(root)
    specs = {name: figures.map_figure(picture) for name, picture in pictures.items()}
    specs["thresholds"] = figures.sweep_figure(report.sweep, report.threshold, report.dupe_threshold).to_dict()
    assert set(report.captions) == set(report.pngs) == set(specs)
    for name, caption in report.captions.items():
        said = {STYLE_WORDS[w] for w in STYLE_WORDS if w in caption}
        assert said <= _dashes(specs[name]), (name, caption, _dashes(specs[name]))
    assert {"dash", "dot"} <= {STYLE_WORDS[w] for w in STYLE_WORDS if w in report.captions["thresholds"]}
    assert "dashed" not in report.captions["cluster_map"]  # the map draws solid links only


def test_the_vault_map_subtitle_counts_the_points_it_draws(tmp_path):
    root = copy_tree(SHARED_VAULTS / "eggs1", tmp_path / "eggs1")
    proximity_files(root)
    picture = map_pictures(root)["vault_map"]
    residuals = int(picture.marked.sum())
    assert residuals  # drawn beside the embedded hypotheses: the counts differ
    m = re.match(r"(\d+) points: all (\d+) hypotheses and (\d+) residuals", picture.subtitle)
    assert m, picture.subtitle
    assert [int(g) for g in m.groups()] == [len(picture.ids), len(picture.ids) - residuals, residuals]
    fig, _ = figures.map_plot(picture)
    [subtitle] = [t.get_text() for t in fig.texts if "points" in t.get_text()]
    m = re.search(r"ids: (?:all|\d+ of) (\d+) points", subtitle)  # the ids line counts the same points
    assert m and int(m.group(1)) == len(picture.ids) and subtitle.startswith(f"{len(picture.ids)} points")


@pytest.fixture(scope="module")
def sweep(run):
    root, _ = run
    report = write_report(root)
    return report.sweep


def test_the_log_axes_of_the_page_are_ticked_at_powers_of_ten(sweep):
    fig = figures.sweep_figure(sweep, 0.30, 0.80)
    logs = [fig.layout[k] for k in ("yaxis", "yaxis2", "yaxis3") if fig.layout[k].type == "log"]
    assert len(logs) == 2
    assert all(axis.dtick == 1 for axis in logs)  # 1, 10, 100: never 1 2 5 10 2 5


def test_each_thresholds_panel_has_its_own_legend_beside_it_keying_the_threshold_lines(sweep):
    fig = figures.sweep_figure(sweep, 0.30, 0.80)
    axes = {"y": 0, "y2": 1, "y3": 2}
    for trace in fig.data:  # every entry in the legend of the panel it is drawn in
        assert trace.legend == figures.LEGENDS[axes[trace.yaxis]], (trace.name, trace.yaxis, trace.legend)
    for row, name in enumerate(figures.LEGENDS):
        legend = fig.layout[name]
        assert legend.x > 1 and legend.y == pytest.approx(fig.layout[f"yaxis{row + 1 if row else ''}"].domain[1])
        entries = {t.name for t in fig.data if t.legend == name}
        assert {"threshold 0.30", "dupe threshold 0.80"} <= entries, entries
    png = figures.sweep_plot(sweep, 0.30, 0.80)
    for ax in png.axes:  # the PNG: each panel's legend keys the lines drawn in it
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "threshold 0.30" in labels and "dupe threshold 0.80" in labels, labels


def test_the_sweep_without_proximitys_clusters_still_counts_each_threshold(tmp_path):
    """Called without proximity's clustering (older callers), the sweep clusters at every threshold."""
    emb, graph = proximity_files(copy_tree(EXAMPLE_RUN, tmp_path / "run"))
    rows = threshold_sweep(graph, emb.rows, "louvain", 0.80).rows()
    assert all(r["all_clusters"] == r["clusters"] + r["alone"] for r in rows if r["clusters"] is not None)
