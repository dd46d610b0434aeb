"""How long one evaluation of each sensor and schedule takes as registered cases grow.

Builds N copies of the example case package side by side in one folder (the shape that made the old
retry sensor quadratic: it read every sibling of every registered case), registers them with a run
directory and a vault, and evaluates every sensor and schedule of the code location once on a
fresh sqlite instance, in this process (what the daemon does per tick, without its scheduling). Beside the
retry sensor it times the naive approach it replaced: for each registered case, every case of its
parent folder (``due_retry`` of each case of ``CaseStore(root.parent)``).

    .venv/bin/python benchmarks/sensors.py --sizes 100,500,1000
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def build(base: Path, cases: int) -> list[Path]:
    """``cases`` copies of the example case under ``base/cases``, plus the example run and vault."""
    folder = base / "cases"
    folder.mkdir(parents=True)
    roots = []
    for n in range(cases):
        roots.append(Path(shutil.copytree(REPO / "examples" / "case", folder / f"case-{n:05d}")))
    roots.append(Path(shutil.copytree(REPO / "examples" / "run", base / "run")))
    roots.append(Path(shutil.copytree(REPO / "examples" / "vault", base / "vault")))
    return roots


def measure(cases: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        os.environ["DAGSTER_HOME"] = str(base / "home")
        (base / "home").mkdir()
        roots = build(base, cases)
        from dagster import DagsterInstance, SensorResult, build_schedule_context, build_sensor_context

        from assets.sources import partition_requests
        from hypograph.case.dispatch import due_retry
        from hypograph.case.package import CaseStore
        from pipelines.definitions import defs
        from resources import Inputs

        inputs = Inputs(workspace=str(base / "cases"))
        records = inputs.registry().add_all([(r, None) for r in roots])
        times: dict[str, float] = {}
        with DagsterInstance.from_config(str(base / "home")) as instance:
            for request in partition_requests(instance, records):
                instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
            for sensor in defs.sensors:
                start = time.perf_counter()
                result = sensor(build_sensor_context(instance=instance), inputs=inputs)
                times[sensor.name] = time.perf_counter() - start
                assert not isinstance(result, SensorResult) or not result.dynamic_partitions_requests, sensor.name
            for schedule in defs.schedules:
                start = time.perf_counter()
                now = dt.datetime.now()
                list(schedule(build_schedule_context(instance=instance, scheduled_execution_time=now), inputs=inputs))
                times[schedule.name] = time.perf_counter() - start
            start = time.perf_counter()
            for r in records:
                if r.kind == "case":
                    store = CaseStore(r.path.parent)
                    [due_retry(store.package(c)) for c in store.cases()]
            times["naive retry scan"] = time.perf_counter() - start
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,500,1000")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    rows = {n: measure(n) for n in sizes}
    names = list(next(iter(rows.values())))
    print("| evaluation | " + " | ".join(f"{n} cases" for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{rows[n][name]:.2f} s" for n in sizes) + " |")


if __name__ == "__main__":
    main()
