"""Pictures of a proximity run: the cluster map, the similarity histogram and the threshold sweep.

``write_report(root)`` reads what proximity wrote in ``<root>/proximity/`` (embeddings, graph,
clusters, cluster labels, dupes) and writes beside those files:

* ``report.html`` — one interactive page (plotly; its script, ``plotly.min.js``, written beside
  it once, so the page opens offline and stays small at any size: the points of at most ``MAP_MAX``
  hypotheses): the cluster map, for a vault the map by hypothesis cluster, and the thresholds
  figure, with the sweep as a table;
* ``cluster-map.png`` — the map coloured by proximity cluster, keyed to the clusters' labels in
  the legend, the ids of the points that fit written beside them, duplicate pairs drawn as links;
* ``vault-map.png`` (vaults with HC nodes) — the same points coloured by HC cluster, residuals marked;
* ``thresholds.png`` — the similarity histogram and the sweep, the threshold and the dupe
  threshold marked;
* ``report.json`` — the numbers behind them (sweep, histogram, the most similar pair).

Every file is written atomically and only when its bytes change (the layout and sample are
seeded), so a re-run on unchanged input changes nothing. No dagster here; the report asset
(``assets/proximity/report.py``, which ``hypograph report`` runs) calls it.
"""

from __future__ import annotations

import html
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hypograph.atomic import write_atomic
from hypograph.errors import HypographError
from hypograph.paths import check_folder
from hypograph.proximity import store
from hypograph.proximity.forks import available_cpus, fork_map
from hypograph.proximity.graph import DEFAULT_DUPE_THRESHOLD
from hypograph.report import figures
from hypograph.report.layout import MAP_MAX, induced_edges, layout, sample_points
from hypograph.report.sweep import BINS, Sweep, threshold_sweep
from hypograph.titles import titles_of

REPORT_HTML = "report.html"
CLUSTER_MAP_PNG = "cluster-map.png"
VAULT_MAP_PNG = "vault-map.png"
THRESHOLDS_PNG = "thresholds.png"
REPORT_JSON = "report.json"
PLOTLY_JS = "plotly.min.js"


@dataclass
class Report:
    """What ``write_report`` wrote (``files``: name -> path; ``written``: those whose bytes changed),
    the PNG bytes by name (for showing inline), the sweep and the counts of the drawing."""

    root: Path
    files: dict[str, Path]
    written: list[Path]
    pngs: dict[str, bytes]
    sweep: Sweep
    threshold: float
    dupe_threshold: float
    counts: dict[str, int] = field(default_factory=dict)
    headline: str = ""
    seconds: float = 0.0
    captions: dict[str, str] = field(default_factory=dict)  # by picture name: what it shows, in words


@dataclass
class _Inputs:
    ids: list[str]
    matrix: object
    graph: object
    clusters: object
    names: dict[str, str]
    dupes: list
    titles: dict[str, str]


def write_report(root: Path | str, dupe_threshold: float = DEFAULT_DUPE_THRESHOLD) -> Report:
    """Write the pictures of ``root``'s proximity files (see the module docstring). Raises
    HypographError naming the file when one is missing or does not match the others."""
    started = time.perf_counter()
    root = Path(root)
    check_folder(root, "proximity")  # the pictures are written there: never through a link out
    data = _read(root)
    graph = data.graph
    sweep = threshold_sweep(graph, data.matrix, data.clusters.algorithm, dupe_threshold, data.clusters)
    maps = _maps(root, data)
    vault = maps.get("vault_map")
    jobs = [("map", picture) for picture in maps.values()] + [("sweep", (sweep, graph.threshold, dupe_threshold))]
    drawn = dict(zip([*maps, "thresholds"], _render_all(jobs), strict=True))
    pngs = {name: png for name, (png, _) in drawn.items()}
    labels = {name: placed for name, (_, placed) in drawn.items() if name in maps}
    headline = figures.headline(sweep, graph.threshold, dupe_threshold)
    # each picture's caption names only what it draws: the threshold lines' styles are the sweep's
    captions = {name: headline for name in maps}
    captions["thresholds"] = figures.headline(sweep, graph.threshold, dupe_threshold, styles=True)
    d = store.proximity_dir(root)
    files = {"cluster_map": d / CLUSTER_MAP_PNG, "thresholds": d / THRESHOLDS_PNG}
    if vault is not None:
        files["vault_map"] = d / VAULT_MAP_PNG
    counts = {
        "hypotheses": len(data.ids),
        "points_drawn": len(maps["cluster_map"].ids),
        "edges": graph.num_edges,
        "duplicate_links_drawn": len(maps["cluster_map"].links),
        "clusters": data.clusters.num_clusters,
    }
    if vault is not None:
        counts["hc_clusters"] = len(vault.group_names)
        counts["residuals"] = int(vault.marked.sum())
    for name, placed in labels.items():  # how many points carry their id on each map
        counts[f"ids_on_{name}"] = sum(not label.group for label in placed)
    texts = {
        REPORT_HTML: _html(root, maps, labels, sweep, graph.threshold, dupe_threshold).encode(),
        REPORT_JSON: _json(sweep, graph.threshold, dupe_threshold, headline, counts).encode(),
    }
    files["html"], files["json"] = d / REPORT_HTML, d / REPORT_JSON
    content = {files[name]: png for name, png in pngs.items()}
    content.update({d / name: text for name, text in texts.items()})
    content[d / PLOTLY_JS] = _plotly_js()
    written = [path for path, payload in content.items() if write_atomic(path, lambda fh, p=payload: fh.write(p))]
    seconds = time.perf_counter() - started
    return Report(
        root, files, written, pngs, sweep, graph.threshold, dupe_threshold, counts, headline, seconds, captions
    )


def _render_all(jobs: list[tuple[str, object]]) -> list[tuple[bytes, list]]:
    """The PNG of each picture in ``jobs`` (``_render``), drawn side by side in forked workers: the
    pictures are independent and matplotlib draws each on one core."""
    # imported once here, not in each worker
    from matplotlib import figure  # noqa: F401
    from matplotlib.backends import backend_agg  # noqa: F401

    return list(fork_map(_render, jobs, min(available_cpus(), len(jobs))))


def _render(job: tuple[str, object]) -> tuple[bytes, list]:
    """One picture: ``("map", MapPicture)`` -> (PNG bytes, the labels drawn); ``("sweep", (sweep,
    threshold, dupe threshold))`` -> (PNG bytes, [])."""
    kind, what = job
    if kind == "map":
        return figures.map_png(what)
    return figures.sweep_png(*what), []


def map_pictures(root: Path | str) -> dict[str, figures.MapPicture]:
    """The maps ``write_report`` draws of ``root``'s proximity files, by name (``cluster_map``, and
    ``vault_map`` for a vault with HC nodes), not drawn."""
    root = Path(root)
    return _maps(root, _read(root))


def _maps(root: Path, data: _Inputs) -> dict[str, figures.MapPicture]:
    graph = data.graph
    picked = sample_points(data.ids, data.clusters.membership())
    data.titles = titles_of(root, [data.ids[i] for i in picked.tolist()])  # hover text: the drawn points only
    xy = layout(data.matrix[picked], *induced_edges(picked, len(data.ids), graph.src, graph.dst, graph.sim))
    maps = {"cluster_map": _cluster_picture(root, data, picked, xy)}
    vault = _vault_picture(root, data, picked, xy)
    if vault is not None:
        maps["vault_map"] = vault
    return maps


def _read(root: Path) -> _Inputs:
    """The proximity files of ``root``, the embedding rows in the graph's node order."""
    d = store.proximity_dir(root)
    if not (d / "graph.json").exists():
        raise HypographError(f"{d / 'graph.json'}: missing — run `hypograph proximity {root}` first")
    graph, _ = store.load_graph(root)
    emb = store.read_embeddings(root)
    row = {i: k for k, i in enumerate(emb.ids)}
    missing = [i for i in graph.ids if i not in row]
    if missing:
        raise HypographError(
            f"{d / 'embedding-ids.json'}: {len(missing)} graph node(s) not embedded (e.g. {missing[0]}) — "
            f"run `hypograph proximity {root}` again"
        )
    matrix = emb.rows if emb.ids == graph.ids else emb.rows[np.asarray([row[i] for i in graph.ids])]
    clusters = store.read_clusters(root)
    names = {c: v.get("label", "") for c, v in _cluster_names(root).items()}
    dupes = store.read_dupes(root) if (d / "dupes.json").exists() else []
    return _Inputs(graph.ids, matrix, graph, clusters, names, dupes, {})


def _cluster_names(root: Path) -> dict[str, dict]:
    if not (store.proximity_dir(root) / "cluster-labels.json").exists():
        return {}
    return store.read_cluster_names(root)


def _hover(ids: list[str], titles: dict[str, str], picked: np.ndarray, where: dict[str, str]) -> list[str]:
    out = []
    for i in picked.tolist():
        node = ids[i]
        title = html.escape(figures._short(titles.get(node, ""), 90))
        out.append(f"<b>{html.escape(node)}</b> {title}<br>{html.escape(where.get(node, ''))}")
    return out


def _subtitle(data: _Inputs, picked: np.ndarray, residuals: int = 0) -> str:
    """What the map draws: its points (every embedded hypothesis or a sample, and the residuals
    drawn beside them: the count of points the map's ids line counts too), graph and layout."""
    n = len(data.ids)
    drawn = f"all {n} hypotheses" if picked.size == n else f"{picked.size} of {n} hypotheses (a sample by cluster)"
    if residuals:
        drawn = (
            f"{picked.size + residuals} points: {drawn} and {residuals} residual{'s' if residuals != 1 else ''} "
            "(◇; not embedded: each drawn at its cluster's middle)"
        )
    return f"{drawn}; graph threshold {data.graph.threshold:g}, {data.graph.num_edges} edges; layout: graph (igraph)"


def _cluster_picture(root: Path, data: _Inputs, picked: np.ndarray, xy: np.ndarray) -> figures.MapPicture:
    membership = data.clusters.membership()
    sizes = {c: len(m) for c, m in data.clusters.clusters.items()}
    label = {c: data.names.get(c) or data.clusters.keywords.get(c, "") for c in data.clusters.clusters}
    group_names = {c: f"{c} {label[c]}".strip() for c in data.clusters.clusters if sizes[c] >= 2}
    ids = [data.ids[i] for i in picked.tolist()]
    where = {i: group_names.get(membership.get(i, ""), "alone (no edge)") for i in ids}
    return figures.MapPicture(
        title=f"Clusters of {root.name}",
        subtitle=_subtitle(data, picked),
        xy=xy,
        ids=ids,
        hover=_hover(data.ids, data.titles, picked, where),
        group=[membership.get(i, "") if membership.get(i, "") in group_names else "" for i in ids],
        group_names=group_names,
        none_name="alone (a cluster of one)",
        links=_links(ids, data.dupes),
    )


def _links(ids: list[str], dupes: list) -> list[tuple[int, int, float]]:
    at = {node: k for k, node in enumerate(ids)}
    return [(at[p.a], at[p.b], p.similarity) for p in dupes if p.a in at and p.b in at]


def _vault_picture(root: Path, data: _Inputs, picked: np.ndarray, xy: np.ndarray) -> figures.MapPicture | None:
    """The map by hypothesis cluster (HC nodes), residuals marked; None for an input with no HC node."""
    from hypograph.paths import HYPOTHESIS_FOLDERS, input_kind

    try:
        if input_kind(root, HYPOTHESIS_FOLDERS) != "vault":
            return None
    except HypographError:
        return None
    membership, group_names, residuals = hc_groups(root, set(data.ids))
    if not group_names:
        return None
    ids = [data.ids[i] for i in picked.tolist()]
    where = {i: group_names.get(membership.get(i, ""), "in no hypothesis cluster") for i in ids}
    hover = _hover(data.ids, data.titles, picked, where)
    extra_ids, extra_xy = _unembedded_residuals(ids, xy, membership, residuals)
    hover += [f"<b>{html.escape(r)}</b> residual of {html.escape(group_names[membership[r]])}" for r in extra_ids]
    ids = ids + extra_ids
    return figures.MapPicture(
        title=f"Hypothesis clusters of {root.name}",
        subtitle=_subtitle(data, picked, len(extra_ids)),
        xy=np.vstack([xy, extra_xy]) if extra_ids else xy,
        ids=ids,
        hover=hover,
        group=[membership.get(i, "") for i in ids],
        group_names=group_names,
        none_name="in no hypothesis cluster",
        marked=np.asarray([i in residuals for i in ids], dtype=bool),
        marked_name="residual",
        links=_links(ids, data.dupes),
    )


def _unembedded_residuals(ids: list[str], xy: np.ndarray, membership: dict[str, str], residuals: set[str]):
    """Residuals ("the answer is not listed here") have no text of their own to embed: each is drawn
    at the middle of its cluster's drawn members, nudged up so it does not hide them."""
    drawn = set(ids)
    out_ids, out_xy = [], []
    group = np.asarray([membership.get(i, "") for i in ids], dtype=object)
    for r in sorted(residuals - drawn):
        members = np.flatnonzero(group == membership[r])
        if members.size:
            out_ids.append(r)
            out_xy.append(np.median(xy[members], axis=0) + np.array([0.0, 0.06]))
    return out_ids, np.asarray(out_xy).reshape(-1, 2)


def hc_groups(
    root: Path, embedded: set[str] | frozenset[str] = frozenset()
) -> tuple[dict[str, str], dict[str, str], set[str]]:
    """A vault's hypothesis clusters: member id -> HC id, HC id -> "HC-1 title" (by id), and the
    residual members' ids. Read only (no journal rolled forward), and only the files it needs: the
    HC nodes (found by file name) and, for the residual check, the members not in ``embedded`` (a
    residual is minted at step 4 and never embedded: the corpus skips it)."""
    from hypograph.ids import id_sort_key
    from hypograph.vault.locking import reading_lock
    from hypograph.vault.node_view import NodeView
    from hypograph.vault.nodes import FILENAME_ID_RE, read_node
    from hypograph.vault.vault import NODE_TYPES, node_files

    prefix = NODE_TYPES["hypothesis-cluster"][0] + "-"
    membership: dict[str, str] = {}
    names: dict[str, str] = {}
    residuals: set[str] = set()
    root = Path(root)
    with reading_lock(root, roll_forward=False):
        files: dict[str, Path] = {}
        for rel in node_files(root):
            m = FILENAME_ID_RE.match(rel.name)
            if m:
                files.setdefault(m.group(1), rel)
        hcs = [(node_id, read_node(root, rel)) for node_id, rel in files.items() if node_id.startswith(prefix)]
        hcs = [n for i, n in hcs if n.id == i and n.type == "hypothesis-cluster"]
        hcs.sort(key=lambda n: id_sort_key(n.id))
        for hc in hcs:
            names[hc.id] = f"{hc.id} {hc.title}".strip()
            for member in NodeView(hc).member_ids:
                rel = files.get(member)
                if rel is None:
                    continue
                if member not in embedded:
                    node = read_node(root, rel)
                    if node.meta.get("id") != member:
                        continue  # a plain note under that name, not the member
                    if NodeView(node).residual:
                        residuals.add(member)
                membership.setdefault(member, hc.id)
    return membership, names, residuals


def _json(sweep: Sweep, threshold: float, dupe_threshold: float, headline: str, counts: dict) -> str:
    doc = {
        "threshold": threshold,
        "dupe_threshold": dupe_threshold,
        "headline": headline,
        "counts": counts,
        "sweep": sweep.rows(),
        "sweep_exact": sweep.exact,
        "notes": sweep.notes,
        "most_similar_pair": list(sweep.best) if sweep.best else None,
        "histogram": {"bins": BINS.tolist(), "pairs": sweep.counts.tolist(), "total_pairs": sweep.total_pairs},
        "map_points_at_most": MAP_MAX,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _plotly_js() -> bytes:
    """The plotly.js the installed plotly ships (the page loads it from beside itself)."""
    from importlib.resources import files

    return files("plotly").joinpath("package_data", PLOTLY_JS).read_bytes()


def _html(root: Path, maps: dict, labels: dict, sweep: Sweep, threshold: float, dupe_threshold: float) -> str:
    """One page loading ``plotly.min.js`` from its folder once (the first figure), every figure
    with a fixed div id; each map with the labels its PNG drew (``labels``: name -> placed)."""
    import plotly.io as pio

    sections, first = [], True
    titles = {"cluster_map": "Cluster map", "vault_map": "Hypothesis clusters (vault)"}
    config = {"displaylogo": False, "responsive": True}
    for name, picture in maps.items():
        div = pio.to_html(
            figures.map_figure(picture, labels[name]),
            validate=False,
            full_html=False,
            include_plotlyjs="directory" if first else False,
            div_id=name.replace("_", "-"),
            config=config,
        )
        sections.append(f'<h2 id="{name}">{titles[name]}</h2>\n{div}')
        first = False
    div = figures.sweep_figure(sweep, threshold, dupe_threshold).to_html(
        full_html=False, include_plotlyjs=False, div_id="thresholds", config=config
    )
    sections.append(f'<h2 id="sweep">Thresholds</h2>\n{div}\n{_table(sweep)}')
    notes = "".join(f"<p><i>{html.escape(n)}</i></p>" for n in sweep.notes)
    name = html.escape(root.name)
    return (
        f'<!doctype html>\n<html><head><meta charset="utf-8"><title>Hypograph: {name}</title>\n'
        "<style>body{font-family:sans-serif;margin:2em} table{border-collapse:collapse} "
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}</style></head><body>\n"
        f"<h1>Proximity of {name}</h1>\n<p>{html.escape(figures.headline(sweep, threshold, dupe_threshold))}</p>"
        f"{notes}\n" + "\n".join(sections) + "\n</body></html>\n"
    )


def _table(sweep: Sweep) -> str:
    head = (
        "<tr><th>threshold</th><th>edges</th><th>pairs ≥ t</th><th>clusters (all)</th><th>of 2 or more</th>"
        "<th>of one (in no edge)</th></tr>"
    )
    cell = lambda v: "–" if v is None else f"{v:g}" if isinstance(v, float) else str(v)  # noqa: E731
    rows = [
        f"<tr><td>{r['threshold']:.2f}</td><td>{cell(r['edges'])}</td><td>{cell(r['pairs'])}</td>"
        f"<td>{cell(r['all_clusters'])}</td><td>{cell(r['clusters'])}</td><td>{cell(r['alone'])}</td></tr>"
        for r in sweep.rows()
    ]
    return "<table>" + head + "".join(rows) + "</table>"
