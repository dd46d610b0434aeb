"""Imported by the Celery workers of ``benchmarks/distributed.py`` (``-i celery_peaks``): after each
task, one JSON line to ``$HYPOGRAPH_BENCH_PEAKS`` with the Dagster step it ran, its seconds and the
worker's peak resident memory during the step (MiB: the peak is reset when the task starts, by
writing 5 to /proc/self/clear_refs) and the largest forked helper's so far (cumulative)."""

import json
import os
import resource
import time

from celery.signals import task_postrun, task_prerun

_STARTED: dict[str, float] = {}


def _step(kwargs: dict) -> str:
    from dagster._grpc.types import ExecuteStepArgs
    from dagster._serdes import unpack_value

    packed = (kwargs or {}).get("execute_step_args_packed")
    if packed is None:
        return "?"
    return ",".join(unpack_value(packed, as_type=ExecuteStepArgs).step_keys_to_execute or [])


@task_prerun.connect
def _prerun(task_id=None, **_):
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM, the peak resident set
    _STARTED[task_id] = time.time()


def _peak_mib() -> float:
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


@task_postrun.connect
def _postrun(task_id=None, kwargs=None, **_):
    start = _STARTED.pop(task_id, time.time())
    line = {
        "step": _step(kwargs),
        "start": start,
        "seconds": time.time() - start,
        "peak_mib": _peak_mib(),
        "helpers_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "pid": os.getpid(),
    }
    with open(os.environ["HYPOGRAPH_BENCH_PEAKS"], "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
