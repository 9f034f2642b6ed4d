"""RADAR's limit: the classifier's offline throughput, no server, at its best layout.

Same texts, same chunking and length buckets as the served runs (the kit's TextSettings), on the
network they serve (perf.workloads.radar picks it); the chunks run bucket by bucket in batches.

- ONNX Runtime: two layouts, as the issue asks: one session with all cores at several batch sizes,
  and N sessions x 1 thread in parallel processes (N = cores); optionally at several of ONNX Runtime's
  optimisation `levels`, each with the operators of the graph it actually runs (`operators`: where an
  offline fusion that gains nothing shows why).
- The PyTorch runner (the gpu-embedded profile's): one process per batch size, on the device and in the
  dtype the kit serves, in a child so that the benchmark's own process never holds a CUDA context.

The best one is the ceiling.
"""

from __future__ import annotations

import collections
import functools
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from kit.adapters.artifacts import graph_output
from kit.pipelines.text.pipeline import TextPipeline
from kit.runners.onnx import CPU, LEVELS, SERVED_LEVEL, make_session
from perf.baselines.radar_model import Logits, onnx_logits, sim_logits, torch_logits
from perf.engine.limit import CORES, in_parallel, timed
from perf.sim.device import SIM, Curve

Rows = list[tuple[np.ndarray, np.ndarray]]
Batch = tuple[np.ndarray, np.ndarray]


def chunk_rows(pipeline: TextPipeline, texts: list[str]) -> Rows:
    """Every chunk of the texts, in text order, each padded to its bucket as the served runs do it."""
    return [row for text in texts for group in pipeline.plan(text).groups for row in zip(group.input_ids, group.attention_mask)]


def chunks_per_text(pipeline: TextPipeline, texts: list[str]) -> float:
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


def run_all(logits: Logits, work: list[Batch]) -> None:
    for ids, mask in work:
        logits(ids, mask)


def radar_job(model: Path, rows: Rows, batch_size: int, threads: int, level: str = SERVED_LEVEL) -> Callable[[], None]:
    session, output = make_session(model, threads, level=level), graph_output(model.parent)
    logits = lambda ids, mask: session.run([output], {"input_ids": ids, "attention_mask": mask})[0]  # noqa: E731
    work = batches(rows, batch_size)
    run_all(logits, work[:1])  # warm-up
    return functools.partial(run_all, logits, work)


def torch_job(model_dir: Path, rows: Rows, batch_size: int, dtype: str, device: str) -> Callable[[], None]:
    """One untimed pass over the work first: the first call of each shape selects the GPU's kernels."""
    logits = torch_logits(model_dir, dtype, device)
    work = batches(rows, batch_size)
    run_all(logits, work)
    return functools.partial(run_all, logits, work)


def one_session(model: Path, rows: Rows, threads: int, batch_size: int, level: str = SERVED_LEVEL) -> tuple[float, float]:
    """(chunks per second, chunks per CPU-second of this process); `level`: ONNX Runtime's (LEVELS)."""
    wall, cpu = timed(functools.partial(radar_job, model, rows, batch_size, threads, level))
    return len(rows) / wall, len(rows) / cpu


def parallel_sessions(model: Path, rows: Rows, sessions: int, batch_size: int, level: str = SERVED_LEVEL) -> tuple[float, float]:
    """`sessions` processes x 1 thread, each on its share of the chunks, started together."""
    jobs = [functools.partial(radar_job, model, rows[i::sessions], batch_size, 1, level) for i in range(sessions)]
    wall, cpu = in_parallel(jobs)
    return len(rows) / wall, len(rows) / cpu


def operators_run(path: Path, level: str) -> dict[str, int]:
    """Operator counts of the graph ONNX Runtime's CPU provider runs for `path` at `level` (it writes the graph
    it optimised; the weights are not read back)."""
    with tempfile.TemporaryDirectory(prefix="radar-ops-") as tmp:
        options = ort.SessionOptions()
        options.graph_optimization_level = LEVELS[level]
        options.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        ort.InferenceSession(str(path), options, providers=[CPU])
        graph = onnx.load(options.optimized_model_filepath, load_external_data=False).graph
    return dict(collections.Counter(node.op_type for node in graph.node).most_common())


def summary(rows: Rows, texts: list[str], every_row: Rows, layouts: list[dict], **facts) -> dict:
    best = max(layouts, key=lambda r: r["chunks_per_s"])
    per_text = len(every_row) / len(texts)
    return {
        **facts,
        "chunks": len(rows),
        "chunks_per_text": per_text,
        "layouts": layouts,
        "best": best,
        "texts_per_s": best["chunks_per_s"] / per_text,
    }


def measure(
    model: Path,
    pipeline: TextPipeline,
    texts: list[str],
    chunks: int | None,
    batch_sizes: list[int],
    levels: list[str] | None = None,
    operators: bool = False,
) -> dict:
    """Chunks/s of every layout of the ONNX file `model` on the first `chunks` chunks (all: None) at each of `levels`
    (the served one: None), and the best; the limit in texts/s follows from chunks per text."""
    every_row = chunk_rows(pipeline, texts)
    rows, layouts = every_row[:chunks], []
    for level in levels or [SERVED_LEVEL]:
        at = {} if levels is None else {"level": level}
        runs = [(f"1 session x {CORES} threads", one_session)]
        if CORES > 1:
            runs.append((f"{CORES} sessions x 1 thread", parallel_sessions))
        for layout, timing in runs:
            for b in batch_sizes:
                rate, per_cpu = timing(model, rows, CORES, b, level)
                layouts.append({"layout": layout, "batch": b, **at, "chunks_per_s": rate, "chunks_per_cpu_s": per_cpu})
    facts = {"graph": model.name}
    if operators:
        facts["operators_run"] = {level: operators_run(model, level) for level in levels or [SERVED_LEVEL]}
    return summary(rows, texts, every_row, layouts, **facts)


def measure_torch(
    model_dir: Path,
    pipeline: TextPipeline,
    texts: list[str],
    chunks: int | None,
    batch_sizes: list[int],
    dtype: str,
    device: str,
) -> dict:
    """Chunks/s of the PyTorch runner on the folder's checkpoint, one child process per batch size."""
    every_row = chunk_rows(pipeline, texts)
    rows, layouts = every_row[:chunks], []
    for b in batch_sizes:
        wall, cpu = in_parallel([functools.partial(torch_job, model_dir, rows, b, dtype, device)])
        layouts.append(
            {
                "layout": f"PyTorch runner, {dtype} on {device}",
                "batch": b,
                "chunks_per_s": len(rows) / wall,
                "chunks_per_cpu_s": len(rows) / cpu,
            }
        )
        print(f"  batch {b}: {layouts[-1]['chunks_per_s']:.1f} chunks/s", flush=True)
    return summary(rows, texts, every_row, layouts, runner="torch", dtype=dtype, device=device)


def measure_sim(
    table: Path, curve: str, precision: str, pipeline: TextPipeline, texts: list[str], batch_sizes: list[int]
) -> dict:
    """Chunks/s of a simulated device (perf.sim.device) on every chunk, in batches bucket by bucket, and in
    batches of any lengths padded to their longest (sorted by length, as a runner that merges lengths would run
    them): the sum of its batch times from its table, nothing run."""
    every_row = chunk_rows(pipeline, texts)
    device, layouts = Curve.from_file(table, curve, precision), []
    lengths = sorted(len(ids) for ids, _ in every_row)
    for b in batch_sizes:
        bucketed = sum(device.seconds(len(ids), ids.shape[1]) for ids, _ in batches(every_row, b))
        padded = sum(device.seconds(len(part), part[-1]) for part in (lengths[i : i + b] for i in range(0, len(lengths), b)))
        for name, seconds in (("length by length", bucketed), ("lengths padded together", padded)):
            layouts.append(
                {
                    "layout": f"simulated {table.stem} ({curve}, {precision}), {name}",
                    "batch": b,
                    "chunks_per_s": len(every_row) / seconds,
                    "chunks_per_cpu_s": 0.0,
                }
            )
    return summary(every_row, texts, every_row, layouts, runner="sim", table=table.name)


def reference_logits(model_dir: Path, runner: dict[str, str]) -> tuple[str, Logits]:
    """The FP32 reference of what the kit serves (`runner`: the classifier's parameters): the checkpoint on the
    PyTorch runner on the CPU where the kit serves that runner; the simulated device's own function where it serves
    one; else the graph as exported (model.onnx), which the served CPU graphs were gated against."""
    if "torch_model" in runner:
        return "the checkpoint in FP32 on the CPU (the PyTorch runner)", torch_logits(model_dir, "fp32", "cpu")
    if "sim_table" in runner:
        table = SIM / runner["sim_table"]
        return f"the simulated device's function ({runner['sim_table']})", sim_logits(
            table, runner["curve"], runner.get("precision", "fp16")
        )
    return "model.onnx (FP32 as exported) on ONNX Runtime", onnx_logits(model_dir / "model.onnx", CORES)
