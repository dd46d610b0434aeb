"""The pictures: cluster maps and the threshold figure, as plotly figures (for the interactive
HTML) and matplotlib PNG bytes (for the UI and for reading without a browser).

In: a ``MapPicture`` (points, groups, marked points, links) or a ``Sweep``. Out: a plotly
figure (a ``Figure``; for a map, its dict) or PNG bytes. PNGs carry no timestamp or software tag,
so the same input gives the same bytes and a re-run rewrites nothing.
"""

from __future__ import annotations

import io
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


def map_figure(picture: MapPicture) -> dict:
    """The interactive map, as a plotly figure dict (``plotly.io.to_html(..., validate=False)``
    writes it): one legend entry per coloured group, hover text per point. Only the layout goes
    through plotly's validation (its template filled in); the traces are plain dicts, since
    validating thousands of points and hover texts trace by trace cost most of a second."""
    import plotly.graph_objects as go

    data = []
    if picture.links:
        xs, ys = _link_lines(picture)
        data.append(
            {"type": "scatter", "x": xs, "y": ys, "mode": "lines", "line": {"color": LINK, "width": 1.5},
             "name": "duplicate pair", "hoverinfo": "skip"}
        )  # fmt: skip
    for name, colour, idx, is_group in _layers(picture):
        marker = {"color": colour, "size": 9 if is_group else 6, "line": {"width": 0}}
        data.append(_points(picture, idx, _short(name), marker))
    if picture.marked.any():
        marker = {"symbol": "diamond-open", "size": 15, "color": "black", "line": {"width": 2}}
        data.append(_points(picture, np.flatnonzero(picture.marked), picture.marked_name, marker))
    layout = go.Layout(
        title={"text": f"{picture.title}<br><sup>{picture.subtitle}</sup>"},
        width=WIDTH,
        height=HEIGHT,
        template="plotly_white",
        xaxis={"visible": False},
        yaxis={"visible": False, "scaleanchor": "x"},
        legend={"itemsizing": "constant"},
        annotations=[
            {"x": x, "y": y, "text": text, "showarrow": False, "font": {"size": 11}, "bgcolor": "rgba(255,255,255,0.7)"}
            for x, y, text in _labels(picture)
        ],
    )
    return {"data": data, "layout": layout.to_plotly_json()}


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


def _labels(picture: MapPicture) -> list[tuple[float, float, str]]:
    """Each coloured group's label at the middle of its points."""
    group = np.asarray(picture.group, dtype=object)
    out = []
    for g in picture.coloured():
        idx = np.flatnonzero(group == g)
        x, y = np.median(picture.xy[idx], axis=0)
        out.append((float(x), float(y), _short(picture.group_names[g], 32)))
    return out


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
    fig.add_trace(go.Bar(x=centres, y=sweep.counts[lo:hi], name="pairs", marker_color="#1f77b4"), row=1, col=1)
    fig.update_yaxes(type="log", title_text="pairs", row=1, col=1)
    t = sweep.thresholds
    series = [
        ("edges (graph, neighbour cap applied)", sweep.edges, 2, "#2ca02c"),
        ("pairs ≥ t (duplicate pairs at dupe threshold t)", sweep.pairs, 2, "#d62728"),
        ("clusters of 2 or more", sweep.clusters, 3, "#9467bd"),
        ("hypotheses in no edge", sweep.alone, 3, "#8c564b"),
    ]
    for name, values, row, colour in series:
        ys = [None if v is None else v for v in values]
        line = {"color": colour, "dash": "dash" if name.startswith("pairs") else "solid"}
        fig.add_trace(go.Scatter(x=t, y=ys, mode="lines+markers", name=name, line=line), row=row, col=1)
    fig.update_yaxes(type="log", title_text="count (log)", row=2, col=1)
    fig.update_yaxes(title_text="count", row=3, col=1)
    for row in (1, 2, 3):
        fig.add_vline(x=threshold, line={"color": "black", "dash": "dash"}, row=row, col=1)
        fig.add_vline(x=dupe_threshold, line={"color": LINK, "dash": "dot"}, row=row, col=1)
    fig.update_xaxes(title_text="cosine similarity", range=[min(0.0, float(BINS[lo])), 1.0])
    fig.update_layout(
        title={"text": f"Thresholds<br><sup>{headline(sweep, threshold, dupe_threshold)}</sup>"},
        width=WIDTH,
        height=1000,
        template="plotly_white",
    )
    return fig


def _histogram_range(sweep: Sweep) -> tuple[int, int]:
    filled = np.flatnonzero(sweep.counts)
    return (int(filled[0]), sweep.counts.size) if filled.size else (100, sweep.counts.size)


def headline(sweep: Sweep, threshold: float, dupe_threshold: float) -> str:
    """One line: what the threshold in force gives, and the most similar pair."""
    best = (
        f"the most similar pair, {sweep.best[0]} and {sweep.best[1]}, is at {sweep.best[2]:.2f}" if sweep.best else ""
    )
    if sweep.at_threshold == 0 and sweep.best:
        return f"none of the {sweep.total_pairs} pairs reaches the threshold {threshold:.2f}: {best}"
    edges, pairs = _count(sweep.at_threshold, "edge"), _count(sweep.total_pairs, "pair")
    said = f"threshold {threshold:.2f} (dashed): {edges} among {pairs}"
    kd = _index(sweep, dupe_threshold)
    dupes = (
        f"; dupe threshold {dupe_threshold:.2f} (dotted): {_count(round(sweep.pairs[kd]), 'pair')}"
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


def map_png(picture: MapPicture) -> bytes:
    """The map as a PNG: the same layers, the coloured groups labelled at their middle."""
    fig = _new_figure()
    ax = fig.add_axes((0.01, 0.01, 0.68, 0.9))
    if picture.links:  # one collection, not a line per pair: thousands of pairs draw in one call
        from matplotlib.collections import LineCollection

        ends = np.array([(i, j) for i, j, _ in picture.links])
        ax.add_collection(LineCollection(picture.xy[ends], colors=LINK, linewidths=1.2, zorder=1))
    for name, colour, idx, is_group in _layers(picture):
        ax.scatter(
            picture.xy[idx, 0], picture.xy[idx, 1], s=36 if is_group else 14, c=colour, label=_short(name), zorder=2
        )
    if picture.marked.any():
        idx = np.flatnonzero(picture.marked)
        ax.scatter(
            picture.xy[idx, 0], picture.xy[idx, 1], s=140, marker="D", facecolors="none", edgecolors="black",
            linewidths=1.5, label=picture.marked_name, zorder=3,
        )  # fmt: skip
    for x, y, text in _labels(picture):
        ax.text(x, y, text, fontsize=8, ha="center", va="center", zorder=4, bbox={"fc": "white", "alpha": 0.7, "lw": 0})
    if picture.links:
        ax.plot([], [], color=LINK, label="duplicate pair")
    ax.set_axis_off()
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    fig.suptitle(f"{picture.title}\n{picture.subtitle}", fontsize=11)
    return _png(fig)


def sweep_png(sweep: Sweep, threshold: float, dupe_threshold: float) -> bytes:
    """The histogram and the sweep as a PNG (counts on a symmetric log scale, so a 0 shows)."""
    fig = _new_figure(1000)
    axes = fig.subplots(3, 1)
    lo, _ = _histogram_range(sweep)
    centres = BINS[:-1] + 0.005
    axes[0].bar(centres[lo:], sweep.counts[lo:], width=0.01, color="#1f77b4")
    axes[0].set_yscale("symlog", linthresh=1)
    axes[0].set_title("Similarity of every pair of hypotheses" + ("" if sweep.exact else " (estimated)"), fontsize=10)
    axes[0].set_ylabel("pairs")
    t = sweep.thresholds
    for values, name, colour, ax in (
        (sweep.edges, "edges (graph, neighbour cap applied)", "#2ca02c", axes[1]),
        (sweep.pairs, "pairs ≥ t (duplicate pairs at dupe threshold t)", "#d62728", axes[1]),
        (sweep.clusters, "clusters of 2 or more", "#9467bd", axes[2]),
        (sweep.alone, "hypotheses in no edge", "#8c564b", axes[2]),
    ):
        ys = [np.nan if v is None else v for v in values]
        style = "--" if name.startswith("pairs") else "-"  # pairs equal edges without a cap: keep both seen
        ax.plot(t, ys, marker="o", markersize=3, color=colour, label=name, linestyle=style)
    axes[1].set_yscale("symlog", linthresh=1)
    axes[1].set_title("Edges and pairs at each threshold", fontsize=10)
    axes[2].set_title("Clusters at each threshold", fontsize=10)
    for ax in axes:
        ax.axvline(threshold, color="black", linestyle="--", linewidth=1)
        ax.axvline(dupe_threshold, color=LINK, linestyle=":", linewidth=1.5)
        ax.set_xlim(min(0.0, float(BINS[lo])), 1.0)
        ax.grid(alpha=0.3)
    for ax in axes[1:]:
        ax.legend(fontsize=8)
    axes[2].set_xlabel("cosine similarity (dashed: threshold, dotted: dupe threshold)")
    fig.suptitle(headline(sweep, threshold, dupe_threshold), fontsize=10)
    fig.subplots_adjust(hspace=0.4, top=0.93, bottom=0.06)
    return _png(fig)
