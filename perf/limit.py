"""The limit: the model's offline throughput in this process, no server, at its best layout.

RADAR: same texts, same chunking and length buckets as the served runs; the chunks run bucket by
bucket in batches. Two layouts, as the issue asks: one session with all cores at several batch
sizes, and N sessions x 1 thread in parallel processes (N = cores). The best one is the ceiling.

OCR (`measure_ocr`): the same encoded images through the kit's whole pipeline in-process (decoding,
pre/post-processing, det/cls/rec sessions: perf.baselines.ocr_model, what the served `ocr` does),
one image after another: one process whose sessions use all cores, or N processes x 1 thread
taking the next image from a shared counter (the images differ in cost, so fixed shares would
leave a process idle at the end). The best one is the ceiling, in images/s.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kit.onnx_runner import make_session
from kit.text.radar import DEFAULT_BUCKET_COUNT, Plan, RadarPipeline, bucket_parameters

CORES = os.cpu_count() or 1
Job = Callable[[], Callable[[], None]]  # sets up (sessions, warm-up) and returns the timed work

Batch = tuple[np.ndarray, np.ndarray]


def plans(model_dir: Path, texts: list[str], bucket_count: int = DEFAULT_BUCKET_COUNT) -> list[Plan]:
    """The kit's chunking and length buckets, as the served runs do it."""
    buckets = [int(b) for b in bucket_parameters(model_dir, count=bucket_count)["buckets"].split(",")]
    pipeline = RadarPipeline.from_files(model_dir, buckets=buckets)
    return [pipeline.plan(text) for text in texts]


def chunks_per_text(model_dir: Path, texts: list[str]) -> float:
    return sum(len(plan.spans) for plan in plans(model_dir, texts)) / len(texts)


def chunk_rows(model_dir: Path, texts: list[str], limit: int | None, bucket_count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The first `limit` chunks of the texts (all of them: None), in text order, each padded to its bucket."""
    rows = [row for plan in plans(model_dir, texts, bucket_count) for group in plan.groups
            for row in zip(group.input_ids, group.attention_mask)]
    return rows[:limit]


def batches(rows: list[tuple[np.ndarray, np.ndarray]], batch_size: int) -> list[Batch]:
    by_length: dict[int, list] = {}
    for ids, mask in rows:
        by_length.setdefault(len(ids), []).append((ids, mask))
    out = []
    for group in by_length.values():
        for start in range(0, len(group), batch_size):
            part = group[start : start + batch_size]
            out.append((np.stack([r[0] for r in part]), np.stack([r[1] for r in part])))
    return out


def run_all(session, work: list[Batch]) -> None:
    for ids, mask in work:
        session.run(["logits"], {"input_ids": ids, "attention_mask": mask})


def radar_job(model: Path, rows, batch_size: int, threads: int) -> Callable[[], None]:
    session = make_session(model, threads)
    work = batches(rows, batch_size)
    run_all(session, work[:1])  # warm-up
    return functools.partial(run_all, session, work)


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


def one_session(model: Path, rows, threads: int, batch_size: int) -> tuple[float, float]:
    """(chunks per second, chunks per CPU-second of this process)."""
    wall, cpu = timed(functools.partial(radar_job, model, rows, batch_size, threads))
    return len(rows) / wall, len(rows) / cpu


def parallel_sessions(model: Path, rows, sessions: int, batch_size: int) -> tuple[float, float]:
    """`sessions` processes x 1 thread, each on its share of the chunks, started together."""
    wall, cpu = in_parallel([functools.partial(radar_job, model, rows[i::sessions], batch_size, 1) for i in range(sessions)])
    return len(rows) / wall, len(rows) / cpu


def measure(model_dir: Path, texts: list[str], chunks: int | None, batch_sizes: list[int], bucket_count: int = DEFAULT_BUCKET_COUNT) -> dict:
    """Chunks/s of every layout, and the best; the limit in texts/s follows from chunks per text."""
    every_row = chunk_rows(model_dir, texts, None, bucket_count)  # one row per chunk: also gives chunks per text
    rows, per_text = every_row[:chunks], len(every_row) / len(texts)
    model, cores = model_dir / "model.onnx", CORES
    layouts = []
    for b in batch_sizes:
        rate, per_cpu = one_session(model, rows, cores, b)
        layouts.append({"layout": f"1 session x {cores} threads", "batch": b, "chunks_per_s": rate, "chunks_per_cpu_s": per_cpu})
    if cores > 1:
        for b in batch_sizes:
            rate, per_cpu = parallel_sessions(model, rows, cores, b)
            layouts.append({"layout": f"{cores} sessions x 1 thread", "batch": b, "chunks_per_s": rate, "chunks_per_cpu_s": per_cpu})
    best = max(layouts, key=lambda r: r["chunks_per_s"])
    return {"chunks": len(rows), "bucket_count": bucket_count, "chunks_per_text": per_text, "layouts": layouts, "best": best,
            "texts_per_s": best["chunks_per_s"] / per_text}


def read_all(model, images: list[bytes], counter=None) -> None:
    """Every image in turn; with a shared counter, only the images no other process has taken."""
    if counter is None:
        for data in images:
            model.read(data)
        return
    while True:
        with counter.get_lock():
            index = counter.value
            counter.value += 1
        if index >= len(images):
            return
        model.read(images[index])


def ocr_job(model_dir: Path, images: list[bytes], warmup: list[bytes], threads: int, counter=None) -> Callable[[], None]:
    from perf.baselines.ocr_model import OcrModel

    model = OcrModel(model_dir, threads)
    read_all(model, warmup)
    return functools.partial(read_all, model, images, counter)


def measure_ocr(model_dir: Path, images: list[bytes], warmup: int = 2) -> dict:
    """Images/s of both layouts on `images` (after `warmup` of them, uncounted), and the best."""
    first = images[:warmup]
    layouts = []
    wall, cpu = timed(functools.partial(ocr_job, model_dir, images, first, CORES))
    layouts.append({"layout": f"1 process x {CORES} threads", "images_per_s": len(images) / wall, "images_per_cpu_s": len(images) / cpu})
    if CORES > 1:
        counter = mp.get_context("spawn").Value("i", 0)
        wall, cpu = in_parallel([functools.partial(ocr_job, model_dir, images, first, 1, counter) for _ in range(CORES)])
        layouts.append({"layout": f"{CORES} processes x 1 thread", "images_per_s": len(images) / wall, "images_per_cpu_s": len(images) / cpu})
    return {"images": len(images), "layouts": layouts, "best": max(layouts, key=lambda r: r["images_per_s"])}
