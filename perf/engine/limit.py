"""Timing for the limit: a model's offline throughput in-process, no server (perf.workloads define the work).

A job sets itself up (sessions, warm-up) and returns the work to time, so that set-up stays out of
the numbers: `timed` runs one in this process; `in_parallel` runs several in processes started
together once every one is set up (N processes x 1 thread against one process with all cores).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

CORES = os.cpu_count() or 1
Job = Callable[[], Callable[[], None]]


def timed(job: Job) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of the job's work, after its set-up."""
    work = job()
    start, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - start, time.process_time() - cpu


def _worker(job: Job, barrier, stamps) -> None:
    work = job()
    barrier.wait()
    start, cpu = time.time(), time.process_time()
    work()
    stamps.put((start, time.time(), time.process_time() - cpu))


def in_parallel(jobs: list[Job]) -> tuple[float, float]:
    """One process per job, started together once every one is set up: (wall seconds from the first
    start to the last end, CPU seconds of all of them)."""
    ctx = mp.get_context("spawn")
    barrier, stamps = ctx.Barrier(len(jobs)), ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(job, barrier, stamps)) for job in jobs]
    for w in workers:
        w.start()
    times = [stamps.get() for _ in workers]
    for w in workers:
        w.join()
    return max(t[1] for t in times) - min(t[0] for t in times), sum(t[2] for t in times)


def in_child(job: Callable, *args):
    """`job(*args)` in a fresh process, its result returned: what it loads (a device's context) stays out of this one.
    A child that dies raises here (BrokenProcessPool) instead of leaving this process waiting."""
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        return pool.submit(job, *args).result()


def shared_counter():
    """A counter that processes of `in_parallel` share, to take the next item of a common list."""
    return mp.get_context("spawn").Value("i", 0)
