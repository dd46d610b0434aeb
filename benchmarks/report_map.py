"""One map PNG at the report's largest size, as one process: what labelling the points costs.

Draws ``hypograph.report.figures.map_png`` once for a seeded picture of ``--points`` points (3,000:
``MAP_MAX``, the most the report draws) in 18 tight clusters with long names and a scatter of
points on their own, 300 duplicate links. Run it as a whole process under ``farm-bench``, against
the code before a change with ``PYTHONPATH`` pointing at an exported copy of it (``git archive REV
hypograph | tar -x -C /tmp/old``); run it from outside the checkout so the checkout is not on the
path first:

    cd /tmp && farm-bench -n 7 --vs "env PYTHONPATH=/tmp/old python BENCH/report_map.py" \\
        -- env PYTHONPATH=REPO python BENCH/report_map.py

It prints how many ids the map drew and where the figures module came from.
"""

from __future__ import annotations

import argparse

import numpy as np


def picture(figures, n: int):
    """The seeded picture: 18 clusters (sd 0.08) and a scatter on their own, 300 links."""
    rng = np.random.default_rng(1)
    centres = rng.uniform(-1, 1, size=(18, 2))
    g = rng.integers(0, 22, size=n)
    clustered = centres[np.minimum(g, 17)] + rng.normal(0, 0.08, size=(n, 2))
    xy = np.where(g[:, None] < 18, clustered, rng.uniform(-1, 1, size=(n, 2)))
    ids = [f"H-{k}" for k in range(n)]
    group = [f"HC-{k}" if k < 18 else "" for k in g]
    names = {
        f"HC-{k}": f"HC-{k} Answers to - Why did the palatial economy of site {k} collapse so quickly"
        for k in range(18)
    }
    links = [(int(i), int(i) + 1, 0.9) for i in rng.integers(0, n - 1, size=300)]
    return figures.MapPicture("Big", "a benchmark", xy, ids, ids, group, names, "on its own", links=links)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=3000)
    args = parser.parse_args()
    from hypograph.report import figures

    drawn = figures.map_png(picture(figures, args.points))
    ids = sum(not p.group for p in drawn[1]) if isinstance(drawn, tuple) else "?"  # the code before: bytes only
    print(f"{figures.__file__}: {args.points} points, ids drawn: {ids}")


if __name__ == "__main__":
    main()
