"""The floor under any ``hypograph`` command that runs a job (issue 33): a process that imports
Dagster, opens the project's instance (``pipelines.instance.open_instance``: SQLite, the project's
dagster.yaml, commits without fsync) and materializes a chain of N assets that do nothing.

What it costs is paid before any proximity work; compare it with the four ``prox`` commands on the
example (``benchmarks/README.md``, "The floor under a job"):

    cd /tmp/floor && farm-bench -n 5 --warmup 1 --vs "sh prox4.sh" -- \\
        /work/main/.venv/bin/python /work/main/benchmarks/dagster_floor.py 1

``DAGSTER_HOME`` is the instance folder (a new one is created when unset, and kept for the next
process, as a user's is). Prints the phases to stderr.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def chain(n: int) -> list:
    """N assets, each depending on the one before, each returning a small int."""
    from dagster import asset

    def make(i: int, dep):
        @asset(name=f"a{i}", deps=[dep] if dep is not None else [])
        def a() -> int:
            return i

        return a

    out, prev = [], None
    for i in range(n):
        prev = make(i, prev)
        out.append(prev)
    return out


def main() -> None:
    started = time.perf_counter()
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    os.environ.setdefault("DAGSTER_HOME", str(Path(tempfile.gettempdir()) / "hypograph-dagster-floor"))
    from dagster import materialize

    from pipelines.instance import open_instance

    assets = chain(n)
    imported = time.perf_counter()
    with open_instance() as instance:
        opened = time.perf_counter()
        result = materialize(assets, instance=instance)
        ran = time.perf_counter()
    print(
        f"imports {imported - started:.2f} s, instance {opened - imported:.2f} s, "
        f"run of {n} step(s) {ran - opened:.2f} s, success {result.success}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
