"""This machine's cores: how many this process may use, and a map over forked workers.

Bottom of the proximity package: imports nothing of hypograph, so any module (the tokeniser, the
product, the cap, the graph.json writer) can fan out without an import cycle.
"""

from __future__ import annotations

import os


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def fork_map(fn, items: list, workers: int):
    """``map(fn, items)`` over ``workers`` forked processes, results in order (in this process when
    fork is unavailable or there is one worker). ``fn`` is a module-level function; each item is
    its whole input, pickled to the worker, and each result is pickled back. In a daemonic process
    (a Celery prefork pool's: ``deploy/`` starts workers with ``--pool solo`` so steps keep every
    core) it maps in this process."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # a daemonic process (a Celery prefork pool's) may not have children: it maps in itself
    if (
        workers <= 1
        or len(items) <= 1
        or multiprocessing.current_process().daemon
        or "fork" not in multiprocessing.get_all_start_methods()
    ):
        yield from map(fn, items)
        return
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        yield from pool.map(fn, items)


def keep_freed_memory() -> None:
    """Ask glibc to keep freed memory for reuse instead of handing it back to the system at once.

    The graph's row blocks allocate and free arrays of tens of MB, over and over; returned to the
    system, each one is faulted in afresh on the next allocation, which cost as much system time
    as the product itself. From here on, allocations under 32 MiB come from the heap and up to
    1 GiB of freed heap stays with the process (which exits when its step ends). Forked workers
    inherit it. A no-op where the C library is not glibc.
    """
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD (its maximum on 64-bit glibc)
    except (OSError, AttributeError):
        pass
