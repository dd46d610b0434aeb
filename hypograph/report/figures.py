"""The pictures: cluster maps and the threshold figure, as plotly figures (for the interactive
HTML) and matplotlib PNG bytes (for the UI and for reading without a browser).

In: a ``MapPicture`` (points, groups, marked points, links) or a ``Sweep``. Out: a plotly
figure (a ``Figure``; for a map, its dict) or PNG bytes. PNGs carry no timestamp or software tag,
so the same input gives the same bytes and a re-run rewrites nothing.
"""

from __future__ import annotations

import html
import io
import textwrap
from dataclasses import dataclass, field

import numpy as np

from hypograph.report.sweep import BINS, Sweep

COLOURS = [  # matplotlib's tab20, strong shades first
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
]  # fmt: skip
OTHER, NONE = "#9a9a9a", "#d0d0d0"
LINK = "#c0392b"
WIDTH, HEIGHT = 1000, 720  # pixels of the PNGs (dpi 100)


@dataclass
class MapPicture:
    """Points ``xy`` (ids, hover text, group key per point, "" for none), the groups' shown names in
    drawing order, points to mark (residuals), and links (i, j, similarity) between points."""

    title: str
    subtitle: str
    xy: np.ndarray
    ids: list[str]
    hover: list[str]
    group: list[str]
    group_names: dict[str, str]
    none_name: str
    marked: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    marked_name: str = ""
    links: list[tuple[int, int, float]] = field(default_factory=list)

    def coloured(self) -> list[str]:
        """The groups drawn in a colour of their own: the first 20 with 2 or more points."""
        sizes = {g: 0 for g in self.group_names}
        for g in self.group:
            if g in sizes:
                sizes[g] += 1
        return [g for g in self.group_names if sizes[g] >= 2][: len(COLOURS)]


def _html_lines(text: str, width: int) -> str:
    """``text`` escaped for plotly, wrapped at ``width`` characters with ``<br>``."""
    return "<br>".join(html.escape(line) for line in textwrap.wrap(text, width, break_on_hyphens=False))


def _short(text: str, width: int = 48) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _layers(picture: MapPicture):
    """(name, colour, point indices, is_group) per drawn layer: others and no group first (underneath)."""
    coloured = picture.coloured()
    colour_of = {g: COLOURS[k] for k, g in enumerate(coloured)}
    group = np.asarray(picture.group, dtype=object)
    known = np.isin(group, list(picture.group_names)) & (group != "")
    layers = [
        (picture.none_name, NONE, np.flatnonzero(~known | np.isin(group, [""])), False),
        ("other clusters", OTHER, np.flatnonzero(known & ~np.isin(group, coloured)), False),
    ]
    layers += [(picture.group_names[g], colour_of[g], np.flatnonzero(group == g), True) for g in coloured]
    return [layer for layer in layers if layer[2].size]


# -- plotly ----------------------------------------------------------------------------------------


def map_figure(picture: MapPicture, placed: list | None = None) -> dict:
    """The interactive map, as a plotly figure dict (``plotly.io.to_html(..., validate=False)``
    writes it): one legend entry per layer with the group's full name (wrapped), hover text per
    point, and the labels the PNG drew (``placed``: ``map_png``'s; an id joined to its point by a
    thin line). Only the layout goes through plotly's validation (its template filled in); the
    traces are plain dicts, since validating thousands of points and hover texts trace by trace
    cost most of a second."""
    import plotly.graph_objects as go

    data = []
    for name, colour, idx, is_group in _layers(picture):
        marker = {"color": colour, "size": 9 if is_group else 6, "line": {"width": 0}}
        data.append(_points(picture, idx, _html_lines(name, LEGEND_WRAP), marker))
    if picture.marked.any():
        marker = {"symbol": "diamond-open", "size": 15, "color": "black", "line": {"width": 2}}
        data.append(_points(picture, np.flatnonzero(picture.marked), picture.marked_name, marker))
    if picture.links:
        xs, ys = _link_lines(picture)
        data.append(
            {"type": "scatter", "x": xs, "y": ys, "mode": "lines", "line": {"color": LINK, "width": 1.5},
             "name": "duplicate pair", "hoverinfo": "skip"}
        )  # fmt: skip
    layout = go.Layout(
        title={"text": f"{html.escape(picture.title)}<br><sup>{_html_lines(picture.subtitle, TITLE_WRAP)}</sup>"},
        width=WIDTH,
        height=HEIGHT,
        margin={"t": 110},
        template="plotly_white",
        xaxis={"visible": False},
        yaxis={"visible": False, "scaleanchor": "x"},
        legend={"itemsizing": "constant", "font": {"size": 10}},
        annotations=[_annotation(picture, p) for p in placed or []],
    )
    return {"data": data, "layout": layout.to_plotly_json()}


def _annotation(picture: MapPicture, p) -> dict:
    """A label the PNG drew, on the same side of the same point: a group's name in bold, an id."""
    dx, dy, ha, va = SIDES[p.side]
    gap = 9
    x, y = (float(v) for v in picture.xy[p.point])
    text = f"<b>{html.escape(p.text)}</b>" if p.group else html.escape(p.text)
    return {
        "x": x, "y": y, "text": text, "showarrow": False, "font": {"size": 11 if p.group else 9},
        "xanchor": ha, "yanchor": {"center": "middle"}.get(va, va), "xshift": dx * gap, "yshift": dy * gap,
    }  # fmt: skip


def _points(picture: MapPicture, idx: np.ndarray, name: str, marker: dict) -> dict:
    return {
        "type": "scatter",
        "x": _typed(picture.xy[idx, 0]),
        "y": _typed(picture.xy[idx, 1]),
        "mode": "markers",
        "marker": marker,
        "name": name,
        "text": [picture.hover[i] for i in idx.tolist()],
        "hoverinfo": "text",
    }


def _typed(values: np.ndarray) -> dict:
    """A float array as plotly.js reads a typed array (base64 of little-endian doubles), as plotly's
    own validation would have written it."""
    import base64

    return {"dtype": "f8", "bdata": base64.b64encode(np.ascontiguousarray(values, dtype="<f8").tobytes()).decode()}


def _link_lines(picture: MapPicture) -> tuple[list, list]:
    xs: list = []
    ys: list = []
    for i, j, _ in picture.links:
        xs += [float(picture.xy[i, 0]), float(picture.xy[j, 0]), None]
        ys += [float(picture.xy[i, 1]), float(picture.xy[j, 1]), None]
    return xs, ys


def sweep_figure(sweep: Sweep, threshold: float, dupe_threshold: float):
    """The similarity histogram and the threshold sweep, the thresholds in force marked."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    estimated = "" if sweep.exact else " (estimated from sample rows)"
    fig = make_subplots(
        rows=3,
        cols=1,
        vertical_spacing=0.09,
        subplot_titles=(
            f"Similarity of every pair of hypotheses{estimated}",
            "Edges and pairs at each threshold",
            "Clusters at each threshold",
        ),
    )
    lo, hi = _histogram_range(sweep)
    centres = (BINS[:-1] + 0.005)[lo:hi]
    bars = go.Bar(x=centres, y=sweep.counts[lo:hi], name="pairs in each 0.01 of similarity", marker_color="#1f77b4")
    fig.add_trace(bars.update(legend="legend"), row=1, col=1)
    # log axes ticked at each power of ten only (1, 10, 100), not plotly's 1 2 5 10 2 5
    fig.update_yaxes(type="log", dtick=1, title_text="pairs", row=1, col=1)
    plotly_style = [
        {"color": "#2ca02c", "width": 8},
        {"color": "#d62728", "dash": "dash", "width": 2},
        {"color": "#9467bd"},
        {"color": "#8c564b"},
    ]  # edges wide and pale under the pairs, as in the PNG
    for (values, name, row), line in zip(sweep_curves(sweep), plotly_style, strict=True):
        ys = [None if v is None else v for v in values]
        mode, opacity = ("lines", 0.4) if line.get("width") == 8 else ("lines+markers", 1.0)
        trace = go.Scatter(
            x=sweep.thresholds, y=ys, mode=mode, name=_html_lines(name, 30), line=line, opacity=opacity,
            legend=LEGENDS[row],
        )  # fmt: skip
        fig.add_trace(trace, row=row + 1, col=1)
    fig.update_yaxes(type="log", dtick=1, title_text="count (log)", row=2, col=1)
    fig.update_yaxes(title_text="count", row=3, col=1)
    marks = ((threshold, "black", "dash", "threshold"), (dupe_threshold, LINK, "dot", "dupe threshold"))
    for row in (1, 2, 3):
        for x, colour, dash, name in marks:
            fig.add_vline(x=x, line={"color": colour, "dash": dash}, row=row, col=1)
            key = {"color": colour, "dash": dash}  # a shape has no legend entry: a line of no points keys it
            fig.add_trace(
                go.Scatter(x=[None], y=[None], mode="lines", line=key, name=f"{name} {x:.2f}", legend=LEGENDS[row - 1]),
                row=row, col=1,
            )  # fmt: skip
    fig.update_xaxes(title_text="cosine similarity", range=[min(0.0, float(BINS[lo])), 1.0])
    styled = headline(sweep, threshold, dupe_threshold, styles=True)
    for row, legend in enumerate(LEGENDS):  # each panel's legend beside it, at its top
        top = fig.layout[f"yaxis{row + 1 if row else ''}"].domain[1]
        fig.update_layout({legend: {"x": 1.02, "xanchor": "left", "y": top, "yanchor": "top", "font": {"size": 10}}})
    fig.update_layout(
        title={"text": f"Thresholds<br><sup>{_html_lines(styled, TITLE_WRAP)}</sup>"},
        width=WIDTH,
        height=1000,
        margin={"t": 150},
        template="plotly_white",
    )
    return fig


LEGENDS = ("legend", "legend2", "legend3")  # the thresholds figure's panels, top to bottom


def _histogram_range(sweep: Sweep) -> tuple[int, int]:
    filled = np.flatnonzero(sweep.counts)
    return (int(filled[0]), sweep.counts.size) if filled.size else (100, sweep.counts.size)


def headline(sweep: Sweep, threshold: float, dupe_threshold: float, styles: bool = False) -> str:
    """One line: what the threshold in force gives, and the most similar pair; with ``styles``,
    the line style that marks each threshold in the thresholds figure (only there are they drawn)."""
    best = (
        f"the most similar pair, {sweep.best[0]} and {sweep.best[1]}, is at {sweep.best[2]:.2f}" if sweep.best else ""
    )
    if sweep.at_threshold == 0 and sweep.best:
        return f"none of the {sweep.total_pairs} pairs reaches the threshold {threshold:.2f}: {best}"
    edges, pairs = _count(sweep.at_threshold, "edge"), _count(sweep.total_pairs, "pair")
    said = f"threshold {threshold:.2f}{' (dashed)' if styles else ''}: {edges} among {pairs}"
    kd = _index(sweep, dupe_threshold)
    dotted = " (dotted)" if styles else ""
    dupes = (
        f"; dupe threshold {dupe_threshold:.2f}{dotted}: {_count(round(sweep.pairs[kd]), 'pair')}"
        if kd is not None
        else ""
    )
    return said + dupes + (f"; {best}" if best else "")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _index(sweep: Sweep, value: float) -> int | None:
    for k, t in enumerate(sweep.thresholds):
        if abs(t - value) < 1e-9:
            return k
    return None


# -- matplotlib ------------------------------------------------------------------------------------

LEGEND_WRAP = 44  # characters per line of a legend entry: full names, wrapped, never cut
TITLE_WRAP = 110  # characters per line of a title or subtitle in a WIDTH-pixel figure
GROUP_TRY = 30  # members of a group tried, most central first, for a free side for its name
LABEL_TRY = 3000  # points offered an id label, the most central of each cluster first (MAP_MAX: every drawn point)
PAD = 8  # pixels between the figure's edge, its title, its legend and its axes
_IDS = "ids: …"  # the subtitle's last line until the ids are placed (same height as what replaces it)


@dataclass
class Placed:
    """A label drawn on a map: its text, the point it sits by (an index into the picture's points),
    the side of it (a key of ``SIDES``), and whether it names a group (else it is the point's id)."""

    text: str
    point: int
    side: str
    group: bool


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) or text


def _new_figure(height: int = HEIGHT):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH / 100, height / 100), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


def map_png(picture: MapPicture) -> tuple[bytes, list[Placed]]:
    """The map as PNG bytes, and the labels drawn on it (the interactive map shows the same)."""
    fig, placed = map_plot(picture)
    return _png(fig), placed


def map_plot(picture: MapPicture):
    """The map as a matplotlib figure, and the labels it draws. Out: the title and subtitle wrapped
    above the points; a legend on the right keying each colour to its group's full name (wrapped);
    each coloured group's name beside its most central point (its key, ``HC-4``, when the name is
    longer than ``MAP_NAME``); the ids of as many points as fit without overlapping anything, which
    the subtitle says. The figure grows taller when the legend needs it."""
    height = HEIGHT
    fig, ax, subtitle, need = _map_frame(picture, height)
    if need > height:
        fig, ax, subtitle, _ = _map_frame(picture, need)
    _draw_points(ax, picture)
    placed = _place_labels(ax, picture)
    ids, n = sum(not p.group for p in placed), len(picture.ids)
    said = f"ids: all {n} points" if ids == n else f"ids: {ids} of {n} points (those that fit; every id in report.html)"
    subtitle.set_text(subtitle.get_text().replace(_IDS, said))
    return fig, placed


def _map_frame(picture: MapPicture, height: int):
    """The figure ``height`` pixels tall with the points, the title and the legend, the axes in the
    room they leave. Returns (figure, axes, the subtitle's text, the height the legend needs)."""
    fig = _new_figure(height)
    renderer = fig.canvas.get_renderer()
    ax = fig.add_axes((0, 0, 1, 1))
    handles = _legend_entries(picture)
    title = fig.text(0.5, 1 - PAD / height, _wrap(picture.title, TITLE_WRAP), ha="center", va="top", fontsize=11)
    below = title.get_window_extent(renderer).y0 - PAD / 2
    subtitle = fig.text(
        0.5, below / height, _wrap(picture.subtitle, TITLE_WRAP) + "\n" + _IDS, ha="center", va="top", fontsize=9,
        color="#333333",
    )  # fmt: skip
    top = subtitle.get_window_extent(renderer).y0 - PAD  # pixels from the bottom
    legend = fig.legend(
        [h for h, _ in handles], [_wrap(name, LEGEND_WRAP) for _, name in handles], loc="upper right",
        bbox_to_anchor=(1 - PAD / WIDTH, top / height), fontsize=7.5, frameon=False, labelspacing=0.7,
    )  # fmt: skip
    box = legend.get_window_extent(renderer)
    need = int(np.ceil(height - top + box.height + 2 * PAD))
    ax.set_position((PAD / WIDTH, PAD / height, (box.x0 - 2 * PAD) / WIDTH, (top - 2 * PAD) / height))
    return fig, ax, subtitle, need


def _draw_points(ax, picture: MapPicture) -> None:
    """The links, the layers and the marked points on ``ax``, its limits a little wider than them."""
    if picture.links:  # one collection, not a line per pair: thousands of pairs draw in one call
        from matplotlib.collections import LineCollection

        ends = np.array([(i, j) for i, j, _ in picture.links])
        ax.add_collection(LineCollection(picture.xy[ends], colors=LINK, linewidths=1.2, zorder=1))
    for _, colour, idx, is_group in _layers(picture):
        ax.scatter(picture.xy[idx, 0], picture.xy[idx, 1], s=36 if is_group else 14, c=colour, zorder=2)
    if picture.marked.any():
        idx = np.flatnonzero(picture.marked)
        ax.scatter(
            picture.xy[idx, 0], picture.xy[idx, 1], s=140, marker="D", facecolors="none", edgecolors="black",
            linewidths=1.5, zorder=3,
        )  # fmt: skip
    ax.set_axis_off()
    ax.set_aspect("equal", adjustable="box")
    if picture.xy.size:
        lo, hi = picture.xy.min(axis=0), picture.xy.max(axis=0)
        pad = np.maximum((hi - lo) * 0.08, 0.05)
        ax.set_xlim(lo[0] - pad[0], hi[0] + pad[0])
        ax.set_ylim(lo[1] - pad[1], hi[1] + pad[1])


def _legend_entries(picture: MapPicture) -> list[tuple[object, str]]:
    """(a handle drawn as the map draws it, the full name) of each layer, the marked points and links."""
    from matplotlib.lines import Line2D

    dot = {"linestyle": "", "marker": "o", "markeredgewidth": 0}
    entries = [
        (Line2D([], [], color=colour, markersize=6 if is_group else 3.7, **dot), name)
        for name, colour, _, is_group in _layers(picture)
    ]
    if picture.marked.any():
        diamond = Line2D([], [], linestyle="", marker="D", markersize=11, markerfacecolor="none", color="black")
        entries.append((diamond, picture.marked_name))
    if picture.links:
        entries.append((Line2D([], [], color=LINK), "duplicate pair"))
    return entries


SIDES = {  # where a label sits from its point: (x direction, y direction, ha, va)
    "right": (1, 0, "left", "center"),
    "left": (-1, 0, "right", "center"),
    "above": (0, 1, "center", "bottom"),
    "below": (0, -1, "center", "top"),
    "above right": (1, 1, "left", "bottom"),
    "above left": (-1, 1, "right", "bottom"),
    "below right": (1, -1, "left", "top"),
    "below left": (-1, -1, "right", "top"),
}
CROWD = 14  # marks in a point's 3 x 3 cells past which its id is not tried (no side would be free)
CELL = 32  # pixels: the side of the buckets that ``_Room`` keeps its boxes in


class _Room:
    """Boxes taken on the map (pixels: x0, y0, x1, y1) within ``bounds``, bucketed by ``CELL``-pixel
    cells so testing a box looks only at the boxes near it, not at every point. A mark (a point, a
    piece of a link: at most ``MARK`` pixels from its centre) is kept in its centre's cell only;
    a label in every cell it covers."""

    MARK = 9.0

    def __init__(self, bounds: tuple[float, float, float, float]):
        self.bounds = bounds
        self.marks: dict[tuple[int, int], list[tuple[float, float, float, float]]] = {}
        self.labels: dict[tuple[int, int], list[tuple[float, float, float, float]]] = {}

    @staticmethod
    def _keys(box, reach: float = 0.0):
        x0, y0, x1, y1 = box
        xs = range(int((x0 - reach) // CELL), int((x1 + reach) // CELL) + 1)
        return [(i, j) for i in xs for j in range(int((y0 - reach) // CELL), int((y1 + reach) // CELL) + 1)]

    def free(self, box, marks: bool = True) -> bool:
        """Whether ``box`` is inside the bounds and overlaps no label (and, with ``marks``, no mark)."""
        bx0, by0, bx1, by1 = self.bounds
        if box[0] < bx0 or box[1] < by0 or box[2] > bx1 or box[3] > by1:
            return False
        near = [o for key in self._keys(box, self.MARK) for o in self.marks.get(key, ())] if marks else []
        near += [o for key in self._keys(box) for o in self.labels.get(key, ())]
        return not any(box[0] < o[2] and o[0] < box[2] and box[1] < o[3] and o[1] < box[3] for o in near)

    def crowded(self, x: float, y: float) -> bool:
        """More than ``CROWD`` marks in the 3 x 3 cells around (x, y)."""
        i, j = int(x // CELL), int(y // CELL)
        return sum(len(self.marks.get((i + a, j + b), ())) for a in (-1, 0, 1) for b in (-1, 0, 1)) > CROWD

    def mark(self, x: float, y: float, r: float) -> None:
        self.marks.setdefault((int(x // CELL), int(y // CELL)), []).append((x - r, y - r, x + r, y + r))

    def take(self, box) -> None:
        for key in self._keys(box):
            self.labels.setdefault(key, []).append(box)


def _place_labels(ax, picture: MapPicture) -> list[Placed]:
    """Write the groups' names (bold), then the ids of the points in ``label_order``, each on the
    first side of its point (``SIDES``) where it overlaps no point, link or label and stays inside
    the axes; a label with no such side is left out. Greedy, in pixels. Returns what was drawn."""
    ax.apply_aspect()
    pixels = ax.transData.transform(picture.xy) if len(picture.ids) else np.zeros((0, 2))
    radii = _radii(picture)
    room = _Room(tuple(ax.bbox.extents))
    for (x, y), r in zip(pixels.tolist(), radii.tolist(), strict=True):
        room.mark(x, y, r)
    for i, j, _ in picture.links:  # a link taken as small boxes along it, every 6 pixels
        (x0, y0), (x1, y1) = pixels[i], pixels[j]
        steps = max(2, int(np.hypot(x1 - x0, y1 - y0) // 6))
        for t in np.linspace(0.0, 1.0, steps)[1:-1].tolist():
            x, y = x0 + (x1 - x0) * t, y0 + (y1 - y0) * t
            room.mark(x, y, 1.5)
    measure = _measurer(ax)
    placed = []
    for text, members in group_names_at(picture):  # a group is always named, over its points if it must
        w, h = measure(text, 8, "bold")
        spot = _first_free(room, pixels, radii, members[:GROUP_TRY], (w, h))
        point = int(members[0])
        side = spot[1] if spot else _free_side(room, pixels[point], radii[point] + 2, (w, h), marks=False, force=True)
        placed.append(_write(ax, picture, Placed(text, spot[0] if spot else point, side, True), radii))
    for i in label_order(picture).tolist():
        if room.crowded(*pixels[i]):
            continue  # no side of a point in a crowd is free: not worth trying
        side = _free_side(room, pixels[i], radii[i] + 2, measure(picture.ids[i], 7, "normal"), marks=True)
        if side is not None:
            placed.append(_write(ax, picture, Placed(picture.ids[i], i, side, False), radii))
    return placed


def _first_free(room: _Room, pixels, radii, points, size: tuple[float, float]) -> tuple[int, str] | None:
    """The first of ``points`` with a free side (of points, links, labels) for a label of ``size``
    (w, h): (point, side), or None."""
    for point in points.tolist():
        side = _free_side(room, pixels[point], radii[point] + 2, size, marks=True)
        if side is not None:
            return point, side
    return None


def _write(ax, picture: MapPicture, label: Placed, radii: np.ndarray) -> Placed:
    """Draw ``label`` beside its point (a group's name bold, on a white ground)."""
    dx, dy, ha, va = SIDES[label.side]
    gap = radii[label.point] + 2
    ax.annotate(
        label.text, picture.xy[label.point], xytext=(dx * gap, dy * gap), textcoords="offset pixels", ha=ha, va=va,
        fontsize=8 if label.group else 7, fontweight="bold" if label.group else "normal", zorder=5,
        bbox={"fc": "white", "alpha": 0.8, "lw": 0, "pad": 1} if label.group else None,
    )  # fmt: skip
    return label


def _free_side(room: _Room, at, gap: float, size: tuple[float, float], marks: bool, force: bool = False) -> str | None:
    """The first side of ``SIDES`` where a box of ``size`` (w, h) ``gap`` pixels from ``at`` is
    free (taken for it then); ``marks``: points and links count, else only labels. None if no side
    is, or with ``force`` "above", taken all the same."""
    x, y = float(at[0]), float(at[1])
    w, h = size
    boxes = {}
    for side, (dx, dy, ha, va) in SIDES.items():
        x0 = x + dx * gap - {"left": 0.0, "center": w / 2, "right": w}[ha]
        y0 = y + dy * gap - {"bottom": 0.0, "center": h / 2, "top": h}[va]
        boxes[side] = (x0 - 1, y0 - 1, x0 + w + 1, y0 + h + 1)
        if room.free(boxes[side], marks):
            room.take(boxes[side])
            return side
    if force:
        room.take(boxes["above"])
        return "above"
    return None


def _measurer(ax):
    """``(text, size, weight) -> (width, height)`` in pixels of the text as matplotlib lays it out
    (its line height, not its glyphs'), cached by the text with its digits as 0 (the font's digits
    are all one width: ids of the same shape measure once)."""
    import re

    renderer = ax.figure.canvas.get_renderer()
    cache: dict = {}

    def measure(text: str, size: float, weight: str) -> tuple[float, float]:
        key = (re.sub(r"[0-9]", "0", text), size, weight)
        if key not in cache:
            probe = ax.text(0, 0, key[0], fontsize=size, fontweight=weight)
            box = probe.get_window_extent(renderer)
            probe.remove()
            cache[key] = (box.width, box.height)
        return cache[key]

    return measure


def _radii(picture: MapPicture) -> np.ndarray:
    """Each point's marker radius in pixels (a marked point's diamond is wider)."""
    radius = np.full(len(picture.ids), 4.5)
    if picture.marked.any():
        radius[picture.marked] = 8.5
    return radius


MAP_NAME = 40  # a group name up to this long is written on the map, a longer one by its key


def group_names_at(picture: MapPicture) -> list[tuple[str, np.ndarray]]:
    """(what to write, the members it may sit by, most central first) for each coloured group: its
    name, or its key when the name is longer than ``MAP_NAME`` (the legend has it whole)."""
    group = np.asarray(picture.group, dtype=object)
    out = []
    for g in picture.coloured():
        name = picture.group_names[g]
        out.append((name if len(name) <= MAP_NAME else g, _by_centrality(picture.xy, np.flatnonzero(group == g))))
    return out


def _by_centrality(xy: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``idx`` ordered by distance to their median point, nearest first (ties by index)."""
    return idx[np.argsort(((xy[idx] - np.median(xy[idx], axis=0)) ** 2).sum(axis=1), kind="stable")]


def label_order(picture: MapPicture, limit: int = LABEL_TRY) -> np.ndarray:
    """The points offered an id label, best first: each coloured group's members from its middle
    outwards, taken in turn across the groups, then the other points from the map's middle out;
    at most ``limit``."""
    group = np.asarray(picture.group, dtype=object)
    queues = [_by_centrality(picture.xy, np.flatnonzero(group == g)) for g in picture.coloured()]
    taken = np.zeros(len(picture.ids), dtype=bool)
    order: list[int] = []
    for rank in range(max((q.size for q in queues), default=0)):
        order += [int(q[rank]) for q in queues if rank < q.size]
    taken[order] = True
    if not taken.all():
        order += _by_centrality(picture.xy, np.flatnonzero(~taken)).tolist()
    return np.asarray(order[:limit], dtype=np.int64)


def sweep_png(sweep: Sweep, threshold: float, dupe_threshold: float) -> bytes:
    """The histogram and the sweep as PNG bytes."""
    return _png(sweep_plot(sweep, threshold, dupe_threshold))


def sweep_plot(sweep: Sweep, threshold: float, dupe_threshold: float):
    """The histogram and the sweep as a matplotlib figure: counts on a symmetric log scale (so a 0
    shows), the thresholds in force marked, each panel's legend beside it (never over a curve),
    the headline wrapped above it all, every text inside the figure."""
    height = 1000
    fig = _new_figure(height)
    title = fig.suptitle(
        _wrap(headline(sweep, threshold, dupe_threshold, True), TITLE_WRAP), fontsize=10, y=1 - PAD / height, va="top"
    )
    below = title.get_window_extent(fig.canvas.get_renderer()).y0
    # the legends in the right quarter, beside their panels; the first panel's title under the headline
    fig.subplots_adjust(left=0.08, right=0.74, bottom=0.06, top=(below - 32) / height, hspace=0.4)
    axes = fig.subplots(3, 1)
    lo, _ = _histogram_range(sweep)
    centres = BINS[:-1] + 0.005
    axes[0].bar(centres[lo:], sweep.counts[lo:], width=0.01, color="#1f77b4", label="pairs in each 0.01 of similarity")
    axes[0].set_yscale("symlog", linthresh=1)
    axes[0].set_title("Similarity of every pair of hypotheses" + ("" if sweep.exact else " (estimated)"), fontsize=10)
    axes[0].set_ylabel("pairs")
    for (values, name, row), style in zip(sweep_curves(sweep), CURVE_STYLES, strict=True):
        axes[row].plot(sweep.thresholds, [np.nan if v is None else v for v in values], label=name, **style)
    axes[1].set_yscale("symlog", linthresh=1)
    axes[1].set_ylabel("count")
    axes[2].set_ylabel("count")
    axes[1].set_title("Edges and pairs at each threshold", fontsize=10)
    axes[2].set_title("Clusters at each threshold", fontsize=10)
    for ax in axes:
        ax.axvline(
            threshold,
            color="black",
            linestyle="--",
            linewidth=1,
            label=f"threshold {threshold:.2f}",
        )
        ax.axvline(
            dupe_threshold, color=LINK, linestyle=":", linewidth=1.5, label=f"dupe threshold {dupe_threshold:.2f}",
        )  # fmt: skip
        ax.set_xlim(min(0.0, float(BINS[lo])), 1.0)
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(
            handles,
            [_wrap(t, 30) for t in labels],
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize=8,
            frameon=False,
        )
    axes[2].set_xlabel("cosine similarity")
    return fig


CURVE_STYLES = [  # edges wide and pale under a thin dashed pairs line: equal counts keep both seen
    {"color": "#2ca02c", "linewidth": 6, "alpha": 0.4, "solid_capstyle": "round"},
    {"color": "#d62728", "linestyle": "--", "marker": "o", "markersize": 3},
    {"color": "#9467bd", "marker": "o", "markersize": 3},
    {"color": "#8c564b", "marker": "s", "markersize": 3},
]


def sweep_curves(sweep: Sweep) -> list[tuple[list, str, int]]:
    """(values, legend name, panel: 1 edges and pairs, 2 clusters) of each curve of the sweep."""
    same = all(e is None or e == p for e, p in zip(sweep.edges, sweep.pairs, strict=True))
    pairs = "pairs ≥ t (the duplicate pairs at dupe threshold t)" + ("; here the same as edges" if same else "")
    return [
        (sweep.edges, "edges of the graph (neighbour cap applied)", 1),
        (sweep.pairs, pairs, 1),
        (sweep.clusters, "clusters of 2 or more", 2),
        (sweep.alone, "hypotheses in no edge", 2),
    ]
