"""Timing for the limit: a model's offline throughput in-process, no server (perf.workloads define the work).

A job sets itself up (sessions, warm-up) and returns the work to time, so that set-up stays out of
the numbers: `timed` runs one in this process; `in_parallel` runs several in processes started
together once every one is set up (N processes x 1 thread against one process with all cores);
`measured` times each layout of a workload's limit so, and every workload's limit reads alike.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Sequence
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


def repeated(run: Callable, parts: Sequence, passes: int) -> Callable[[], None]:
    """A job's work: `run` on every part, `passes` times, after one untimed run of the first part (the warm-up)."""
    run(parts[0])

    def work() -> None:
        for _ in range(passes):
            for part in parts:
                run(part)

    return work


def by_cores(job: Callable[..., Job], items: list, noun: str = "process", nouns: str = "processes") -> list:
    """The two layouts of `job(items, threads)`: one `noun` whose sessions use every core, and one 1-thread `noun` per
    core, each on its share of the items (the second only where there are cores and items to share)."""
    shares = [items[k::CORES] for k in range(min(CORES, len(items)))]
    layouts = [(f"1 {noun} x {CORES} threads", [functools.partial(job, items, CORES)])]
    if len(shares) > 1:
        layouts.append((f"{len(shares)} {nouns} x 1 thread", [functools.partial(job, share, 1) for share in shares]))
    return layouts


def measured(item: str, runs: list[tuple[str, int | None, list[Job]]], done: float) -> dict:
    """Each run (its layout, its batch size or None, its jobs, in processes started together) in `item`s per second
    and per CPU-second, each having done `done` of them; and the best run, which is the limit."""
    layouts = []
    for layout, batch, jobs in runs:
        wall, cpu = in_parallel(jobs)
        layouts.append({"layout": layout, **({"batch": batch} if batch is not None else {})})
        layouts[-1] |= {f"{item}s_per_s": done / wall, f"{item}s_per_cpu_s": done / cpu}
        print(f"  {layout}" + (f", batch {batch}" if batch is not None else "") + f": {done / wall:.1f} {item}s/s", flush=True)
    return {"layouts": layouts, "best": max(layouts, key=lambda r: r[f"{item}s_per_s"])}
