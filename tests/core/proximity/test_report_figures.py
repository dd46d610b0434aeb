"""hypograph.report.figures: pictures a person can read, checked on the matplotlib figures themselves
(the artists' text and their boxes as drawn), on the example run directory, a vault with hypothesis
clusters, and a crowded map: ids drawn where they fit and never over each other, full cluster names
in the legend, titles and legends inside the figure, every curve of the thresholds figure seen."""

from __future__ import annotations

import html

import numpy as np
import pytest
from conftest import SHARED_VAULTS, copy_tree
from test_report import EXAMPLE_RUN, proximity_files

from hypograph.report import figures, map_pictures, write_report
from hypograph.report.sweep import threshold_sweep


def _draw(fig):
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _inside(inner, outer) -> bool:
    return inner.x0 >= outer.x0 and inner.y0 >= outer.y0 and inner.x1 <= outer.x1 and inner.y1 <= outer.y1


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.fixture(scope="module")
def run_map(tmp_path_factory):
    root = copy_tree(EXAMPLE_RUN, tmp_path_factory.mktemp("run") / "run")
    proximity_files(root)
    return map_pictures(root)["cluster_map"]


@pytest.fixture(scope="module")
def vault_map(tmp_path_factory):
    root = copy_tree(SHARED_VAULTS / "eggs1", tmp_path_factory.mktemp("vault") / "eggs1")
    proximity_files(root)
    return map_pictures(root)["vault_map"]


def _labels(fig) -> tuple[list, dict]:
    """The map's labels as drawn: [(text, box)], and the figure's texts (title, subtitle) by text."""
    renderer = _draw(fig)
    ax = fig.axes[0]
    labels = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts]
    return labels, {t.get_text(): t.get_window_extent(renderer) for t in fig.texts}


def test_every_id_of_the_example_run_is_drawn_and_none_over_another(run_map):
    fig, placed = figures.map_plot(run_map)
    labels, texts = _labels(fig)
    drawn = [text for text, _ in labels]
    assert set(run_map.ids) <= set(drawn), set(run_map.ids) - set(drawn)
    assert any("ids: all 30 points" in t for t in texts), texts
    boxes = [box for _, box in labels]
    for i, a in enumerate(boxes):
        assert not any(_overlap(a, b) for b in boxes[i + 1 :]), labels[i]
    # no label covers a point: each point's centre lies outside every label's box
    centres = fig.axes[0].transData.transform(run_map.xy)
    for text, box in labels:
        assert not any(box.contains(x, y) for x, y in centres), text
    assert [p.text for p in placed if not p.group] == [t for t in drawn if t in set(run_map.ids)]


def test_the_vault_map_keys_every_cluster_by_its_full_name(vault_map):
    fig, placed = figures.map_plot(vault_map)
    renderer = _draw(fig)
    [legend] = fig.legends
    entries = [" ".join(t.get_text().split()) for t in legend.get_texts()]
    for name in vault_map.group_names.values():
        assert name in entries, (name, entries)  # whole, unwrapped: never cut to a shared prefix
    assert not any("…" in e for e in entries)
    on_map = {p.text for p in placed if p.group}
    for key, name in vault_map.group_names.items():
        assert (name if len(name) <= figures.MAP_NAME else key) in on_map
    figure_box = fig.bbox
    assert _inside(legend.get_window_extent(renderer), figure_box)
    for text in fig.texts:  # the title and the subtitle
        assert _inside(text.get_window_extent(renderer), figure_box), text.get_text()
    assert not _overlap(legend.get_window_extent(renderer), fig.axes[0].get_window_extent(renderer))


def test_a_crowded_map_draws_the_ids_that_fit_says_how_many_and_names_every_cluster():
    rng = np.random.default_rng(3)
    n, groups = 1500, 8
    g = rng.integers(0, groups, size=n)
    xy = rng.uniform(-1, 1, size=(groups, 2))[g] + rng.normal(0, 0.05, size=(n, 2))
    xy[-60:] = rng.uniform(-1, 1, size=(60, 2))  # some points on their own, where an id fits
    g[-60:] = -1
    names = {
        f"C-{k}": f"C-{k} a cluster whose name is long enough to be keyed in the legend, number {k}"
        for k in range(groups)
    }
    ids = [f"H-{k}" for k in range(n)]
    picture = figures.MapPicture(
        "Crowded", "a test", xy, ids, ids, [f"C-{k}" if k >= 0 else "" for k in g], names, "none"
    )
    fig, placed = figures.map_plot(picture)
    labels, texts = _labels(fig)
    ids_drawn = sum(not p.group for p in placed)
    assert 0 < ids_drawn < n
    assert any(f"ids: {ids_drawn} of {n} points" in t for t in texts), texts
    assert {p.text for p in placed if p.group} == set(names)  # keys on the map, every cluster named
    boxes = [box for _, box in labels]
    for i, a in enumerate(boxes):
        assert not any(_overlap(a, b) for b in boxes[i + 1 :]), labels[i]
    axes_box = fig.axes[0].get_window_extent()
    assert all(_inside(box, axes_box) for box in boxes)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = copy_tree(EXAMPLE_RUN, tmp_path_factory.mktemp("sweep") / "run")
    emb, graph = proximity_files(root)
    return threshold_sweep(graph, emb.rows, "louvain", 0.80)


def _pixels(fig) -> np.ndarray:
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).astype(np.int16)


def _changed(a: np.ndarray, b: np.ndarray) -> int:
    """Pixels that differ clearly (not an antialiased edge) between two renderings."""
    return int((np.abs(a - b).max(axis=2) > 60).sum())


def test_every_curve_of_the_thresholds_figure_is_seen(sweep):
    """Each curve shows at least half of what it draws on its own: none sits under another curve
    or a legend (edges and pairs are equal in the example, no neighbour cap: the case that hid one)."""
    assert sweep.edges == [int(p) for p in sweep.pairs]
    fig = figures.sweep_plot(sweep, 0.30, 0.80)
    curves = [line for ax in fig.axes for line in ax.get_lines() if len(line.get_xdata()) > 2]
    assert len(curves) == 4
    whole = _pixels(fig)
    for line in curves:
        line.set_visible(False)
        seen = _changed(whole, _pixels(fig))
        others = [c for c in curves if c is not line]
        for c in others:
            c.set_visible(False)
        alone = _changed(_pixels(fig), _pixels_with(fig, line))
        for c in others:
            c.set_visible(True)
        assert seen >= 0.5 * alone > 0, f"{line.get_label()}: {seen} of its {alone} pixels seen"


def _pixels_with(fig, line) -> np.ndarray:
    line.set_visible(True)
    return _pixels(fig)


def test_the_thresholds_title_and_legends_are_inside_the_figure_and_beside_the_panels(sweep):
    fig = figures.sweep_plot(sweep, 0.30, 0.80)
    renderer = _draw(fig)
    title = fig._suptitle
    assert "\n" in title.get_text()  # the headline wrapped, not one line running off both edges
    assert _inside(title.get_window_extent(renderer), fig.bbox)
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None and _inside(legend.get_window_extent(renderer), fig.bbox)
        for other in fig.axes:
            assert not _overlap(legend.get_window_extent(renderer), other.get_window_extent(renderer))
        assert not _overlap(ax.title.get_window_extent(renderer), title.get_window_extent(renderer))


def test_the_interactive_map_shows_the_labels_and_the_full_names(tmp_path):
    root = copy_tree(SHARED_VAULTS / "eggs1", tmp_path / "eggs1")
    proximity_files(root)
    report = write_report(root)
    page = (root / "proximity" / "report.html").read_text(encoding="utf-8")
    picture = map_pictures(root)["vault_map"]
    _, placed = figures.map_png(picture)
    ids = [p.text for p in placed if not p.group]
    assert report.counts["ids_on_vault_map"] == len(ids) > 0
    for text in ids:
        assert f'"text":"{text}"' in page, text  # an annotation beside its point, as in the PNG
    unwrapped = page.replace("\\u003cbr\\u003e", " ")  # the legend's names wrapped with <br>
    for name in picture.group_names.values():
        assert f'"name":"{html.escape(name)}"' in unwrapped, name  # whole, never cut
