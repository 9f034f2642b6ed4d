"""The limit: the model's offline throughput in this process, no server, at its best layout.

Same texts, same chunking and length buckets as the served runs; the chunks run bucket by bucket
in batches. Two layouts, as the issue asks: one session with all cores at several batch sizes,
and N sessions x 1 thread in parallel processes (N = cores). The best one is the ceiling.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

import numpy as np

from kit.onnx_runner import make_session
from kit.text.radar import DEFAULT_BUCKET_COUNT, Plan, RadarPipeline, bucket_parameters

Batch = tuple[np.ndarray, np.ndarray]


def plans(model_dir: Path, texts: list[str]) -> list[Plan]:
    """The kit's chunking with its default length buckets, as the served runs do it."""
    buckets = [int(b) for b in bucket_parameters(model_dir, count=DEFAULT_BUCKET_COUNT)["buckets"].split(",")]
    pipeline = RadarPipeline.from_files(model_dir, buckets=buckets)
    return [pipeline.plan(text) for text in texts]


def chunks_per_text(model_dir: Path, texts: list[str]) -> float:
    return sum(len(plan.spans) for plan in plans(model_dir, texts)) / len(texts)


def chunk_rows(model_dir: Path, texts: list[str], limit: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The first `limit` chunks of the texts, in text order, each padded to its bucket."""
    rows = [row for plan in plans(model_dir, texts) for group in plan.groups for row in zip(group.input_ids, group.attention_mask)]
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


def one_session(model: Path, rows, threads: int, batch_size: int) -> tuple[float, float]:
    """(chunks per second, chunks per CPU-second of this process)."""
    session = make_session(model, threads)
    work = batches(rows, batch_size)
    run_all(session, work[:1])  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    run_all(session, work)
    return len(rows) / (time.perf_counter() - start), len(rows) / (time.process_time() - cpu)


def _worker(model: Path, rows, batch_size: int, barrier, stamps) -> None:
    session = make_session(model, 1)
    work = batches(rows, batch_size)
    run_all(session, work[:1])
    barrier.wait()
    start, cpu = time.time(), time.process_time()
    run_all(session, work)
    stamps.put((start, time.time(), time.process_time() - cpu))


def parallel_sessions(model: Path, rows, sessions: int, batch_size: int) -> tuple[float, float]:
    """`sessions` processes x 1 thread, each on its share of the chunks, started together."""
    ctx = mp.get_context("spawn")
    barrier, stamps = ctx.Barrier(sessions), ctx.Queue()
    shares = [rows[i::sessions] for i in range(sessions)]
    workers = [ctx.Process(target=_worker, args=(model, share, batch_size, barrier, stamps)) for share in shares]
    for w in workers:
        w.start()
    times = [stamps.get() for _ in workers]
    for w in workers:
        w.join()
    return len(rows) / (max(t[1] for t in times) - min(t[0] for t in times)), len(rows) / sum(t[2] for t in times)


def measure(model_dir: Path, texts: list[str], chunks: int, batch_sizes: list[int]) -> dict:
    """Chunks/s of every layout, and the best; the limit in texts/s follows from chunks per text."""
    rows, per_text = chunk_rows(model_dir, texts, chunks), chunks_per_text(model_dir, texts)
    model, cores = model_dir / "model.onnx", os.cpu_count() or 1
    layouts = []
    for b in batch_sizes:
        rate, per_cpu = one_session(model, rows, cores, b)
        layouts.append({"layout": f"1 session x {cores} threads", "batch": b, "chunks_per_s": rate, "chunks_per_cpu_s": per_cpu})
    if cores > 1:
        for b in batch_sizes:
            rate, per_cpu = parallel_sessions(model, rows, cores, b)
            layouts.append({"layout": f"{cores} sessions x 1 thread", "batch": b, "chunks_per_s": rate, "chunks_per_cpu_s": per_cpu})
    best = max(layouts, key=lambda r: r["chunks_per_s"])
    return {"chunks": len(rows), "chunks_per_text": per_text, "layouts": layouts, "best": best,
            "texts_per_s": best["chunks_per_s"] / per_text}
