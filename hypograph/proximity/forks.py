"""This machine's cores: how many this process may use, a map over forked workers, and a block
in which freed memory is kept for reuse (the graph's row blocks allocate and free large arrays).

Bottom of the proximity package: imports nothing of hypograph, so any module (the tokeniser, the
product, the cap, the graph.json writer) can fan out without an import cycle.
"""

from __future__ import annotations

import os
from contextlib import contextmanager, suppress


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
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
        yield from pool.map(fn, items)


PR_SET_PDEATHSIG = 1  # prctl(2)


def die_with_parent(parent: int) -> None:
    """A forked worker's initializer: the kernel kills it (SIGKILL) when its parent dies, so a
    parent killed outright (kill -9, out of memory) leaves no worker blocked on its pipe for ever;
    a worker whose parent died before this ran exits at once. Linux only (elsewhere a no-op but
    the check). The death signal follows the thread that forked: ``fork_map`` maps in the calling
    thread, which outlives its pool."""
    import ctypes
    import signal

    with suppress(OSError, AttributeError):  # no prctl: not Linux
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


@contextmanager
def freed_memory_kept():
    """Within the block, glibc keeps freed memory for reuse instead of handing it back to the
    system at once; afterwards what is free goes back, and at most 64 MiB is kept from then on.

    The graph's row blocks allocate and free arrays of tens of MB, over and over; returned to the
    system, each one is faulted in afresh on the next allocation (most of the step's system time).
    Inside, allocations under 32 MiB come from the heap and up to 1 GiB of freed heap stays;
    forked workers inherit it. After, the trim threshold is twice the mmap threshold, as glibc's
    own adjustment pairs them, so a long-lived worker holds little. A no-op where the C library
    is not glibc.
    """
    libc = _glibc()
    if libc is None:
        yield
        return
    libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)
    libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)  # its maximum on 64-bit glibc
    try:
        yield
    finally:
        libc.mallopt(M_TRIM_THRESHOLD, 64 << 20)
        libc.malloc_trim(0)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)


def _glibc():
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None
