"""RADAR's limit: the classifier's offline throughput in this process, no server, at its best layout.

Same texts, same chunking and length buckets as the served runs (the kit's RadarSettings), on the
ONNX file they serve (perf.workloads.radar picks it); the chunks run bucket by bucket in batches.
Two layouts, as the issue asks: one session with all cores at several batch sizes, and N sessions
x 1 thread in parallel processes (N = cores). The best one is the ceiling.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kit.pipelines.text.radar import RadarPipeline
from kit.runners.onnx import SERVED_LEVEL, make_session
from perf.engine.limit import CORES, in_parallel, timed

Rows = list[tuple[np.ndarray, np.ndarray]]
Batch = tuple[np.ndarray, np.ndarray]


def chunk_rows(pipeline: RadarPipeline, texts: list[str]) -> Rows:
    """Every chunk of the texts, in text order, each padded to its bucket as the served runs do it."""
    return [row for text in texts for group in pipeline.plan(text).groups for row in zip(group.input_ids, group.attention_mask)]


def chunks_per_text(pipeline: RadarPipeline, texts: list[str]) -> float:
    return sum(len(pipeline.plan(text).spans) for text in texts) / len(texts)


def batches(rows: Rows, batch_size: int) -> list[Batch]:
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


def radar_job(model: Path, rows: Rows, batch_size: int, threads: int, level: str = SERVED_LEVEL) -> Callable[[], None]:
    session = make_session(model, threads, level=level)
    work = batches(rows, batch_size)
    run_all(session, work[:1])  # warm-up
    return functools.partial(run_all, session, work)


def one_session(model: Path, rows: Rows, threads: int, batch_size: int, level: str = SERVED_LEVEL) -> tuple[float, float]:
    """(chunks per second, chunks per CPU-second of this process); `level`: ONNX Runtime's (LEVELS)."""
    wall, cpu = timed(functools.partial(radar_job, model, rows, batch_size, threads, level))
    return len(rows) / wall, len(rows) / cpu


def parallel_sessions(model: Path, rows: Rows, sessions: int, batch_size: int, level: str = SERVED_LEVEL) -> tuple[float, float]:
    """`sessions` processes x 1 thread, each on its share of the chunks, started together."""
    jobs = [functools.partial(radar_job, model, rows[i::sessions], batch_size, 1, level) for i in range(sessions)]
    wall, cpu = in_parallel(jobs)
    return len(rows) / wall, len(rows) / cpu


def measure(
    model: Path, pipeline: RadarPipeline, texts: list[str], chunks: int | None, batch_sizes: list[int], bucket_count: int
) -> dict:
    """Chunks/s of every layout of the ONNX file `model` on the first `chunks` chunks (all: None), and the best;
    the limit in texts/s follows from chunks per text."""
    every_row = chunk_rows(pipeline, texts)
    rows, per_text, cores = every_row[:chunks], len(every_row) / len(texts), CORES
    layouts = []
    for b in batch_sizes:
        rate, per_cpu = one_session(model, rows, cores, b)
        layouts.append({"layout": f"1 session x {cores} threads", "batch": b, "chunks_per_s": rate, "chunks_per_cpu_s": per_cpu})
    if cores > 1:
        for b in batch_sizes:
            rate, per_cpu = parallel_sessions(model, rows, cores, b)
            layouts.append(
                {"layout": f"{cores} sessions x 1 thread", "batch": b, "chunks_per_s": rate, "chunks_per_cpu_s": per_cpu}
            )
    best = max(layouts, key=lambda r: r["chunks_per_s"])
    return {
        "graph": model.name,
        "chunks": len(rows),
        "bucket_count": bucket_count,
        "chunks_per_text": per_text,
        "layouts": layouts,
        "best": best,
        "texts_per_s": best["chunks_per_s"] / per_text,
    }
