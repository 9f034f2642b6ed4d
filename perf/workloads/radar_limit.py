"""RADAR's limit: the classifier's offline throughput, no server, at its best layout.

Same texts, same chunking and length buckets as the served runs (the kit's TextSettings), on the
network they serve (perf.workloads.radar picks it); the chunks run bucket by bucket in batches.

- ONNX Runtime: two layouts, as the issue asks: one session with all cores at several batch sizes,
  and N sessions x 1 thread in parallel processes (N = cores), at the level the kit serves.
- The PyTorch runner (the gpu-embedded profile's), on the device and in the dtype the kit serves, both ways: eager,
  each batch as it comes, and as the kit's classifier runs it (rows padded up to its ladder, every ladder size by
  every bucket warmed first, CUDA graphs of them on a GPU); in one child process, so that the benchmark's own never
  holds a CUDA context. With the model's config, the FLOPs a chunk costs at its padded length, to set the limit
  against a device's peak.

The best one is the ceiling.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kit.adapters.artifacts import graph_output
from kit.pipelines.text.pipeline import TextPipeline
from kit.runners.onnx import make_session
from perf.baselines.radar_model import Logits, onnx_logits, sim_logits, torch_logits, torch_runner
from perf.engine.limit import CORES, by_cores, in_child, measured, repeated, timed
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


def radar_job(model: Path, batch_size: int, rows: Rows, threads: int) -> Callable[[], None]:
    session, output = make_session(model, threads), graph_output(model.parent)
    return repeated(lambda b: session.run([output], {"input_ids": b[0], "attention_mask": b[1]}), batches(rows, batch_size), 1)


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


def measure(model: Path, pipeline: TextPipeline, texts: list[str], chunks: int | None, batch_sizes: list[int]) -> dict:
    """Chunks/s of both layouts (perf.engine.limit.by_cores) of the ONNX file `model` at each batch size on the first
    `chunks` chunks (all: None), and the best; the limit in texts/s follows from chunks per text."""
    every_row = chunk_rows(pipeline, texts)
    rows = every_row[:chunks]
    runs = [
        (layout, b, jobs)
        for b in batch_sizes
        for layout, jobs in by_cores(functools.partial(radar_job, model, b), rows, "session", "sessions")
    ]
    return summary(rows, texts, every_row, measured("chunk", runs, len(rows))["layouts"], graph=model.name)


def flops_per_chunk(config: dict, lengths: list[int]) -> float:
    """FLOPs of one chunk's forward pass (2 per multiply-add), the mean over chunks of these padded lengths, counted from
    an encoder's config: per layer and token the four attention projections (8 h^2), the feed-forward (4 h i) and
    attention's two products (4 h n at n tokens); embeddings, norms, softmax and the head, under 1%, left out."""
    h, i, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    return sum(layers * n * (8 * h * h + 4 * h * i + 4 * h * n) for n in lengths) / len(lengths)


def torch_limits(model_dir: Path, rows: Rows, batch_sizes: list[int], runner: dict, passes: int) -> tuple[list[dict], dict]:
    """Chunks/s of the PyTorch runner at each batch size, eager and as the kit runs it (`runner`: kit_runner's), the
    chunks `passes` times each after one untimed pass (the first call of a shape selects the GPU's kernels); and what
    the kit's warm-up did. Both ways share the weights."""
    from kit.runners.torch import TorchModel, TorchOptions

    kit, output, warmup = torch_runner(model_dir, **runner)
    eager = TorchModel(kit.module, output, TorchOptions(runner["dtype"], runner["device"]))
    graphs = f"CUDA graphs of {warmup.graphs}" if warmup and warmup.graphs else "no CUDA graphs"
    kit_way = f"ladder to {max(runner['ladder'], default='-')}, {warmup.shapes if warmup else 0} shapes warmed, {graphs}"
    layouts = []
    for way, model, name in (("eager", eager, "eager"), ("kit", kit, kit_way)):
        run = functools.partial(lambda m, batch: m({"input_ids": batch[0], "attention_mask": batch[1]})[output], model)
        for b in batch_sizes:
            work = batches(rows, b)
            repeated(run, work, 1)()  # every shape once, untimed
            wall, cpu = timed(functools.partial(repeated, run, work, passes))
            done = len(rows) * passes
            layout = f"PyTorch runner, {name}, {runner['dtype']} on {runner['device']}"
            layouts.append({"layout": layout, "way": way, "batch": b, "chunks_per_s": done / wall})
            layouts[-1]["chunks_per_cpu_s"] = done / cpu
            print(f"  {way} batch {b}: {done / wall:.1f} chunks/s", flush=True)
    facts = {k: v for k, v in vars(warmup).items() if k != "costs"} if warmup else {}
    return layouts, facts


def measure_torch(model_dir: Path, pipeline: TextPipeline, texts: list[str], limit: dict, runner: dict) -> dict:
    """Chunks/s of the PyTorch runner on the folder's checkpoint over the first `chunks` chunks of the spec's `limit`,
    eager and as the kit runs it (torch_limits), and the FLOPs per chunk of these chunks."""
    every_row = chunk_rows(pipeline, texts)
    rows = every_row[: limit.get("chunks")]
    layouts, warmup = in_child(torch_limits, model_dir, rows, limit["batch_sizes"], runner, limit.get("passes", 1))
    config = json.loads((model_dir / "checkpoint" / "config.json").read_text())
    lengths = [len(ids) for ids, _ in rows]
    facts = {"flops_per_chunk": flops_per_chunk(config, lengths), "mean_tokens": sum(lengths) / len(lengths)}
    facts |= {"runner": "torch", "dtype": runner["dtype"], "device": runner["device"], "warmup": warmup}
    return summary(rows, texts, every_row, layouts, **facts)


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
