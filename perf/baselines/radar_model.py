"""RADAR as the hand-rolled services run it: the kit's chunking, length buckets and ONNX model in-process.

Every baseline imports this, so the work per request is the kit's (same chunks, same padding, same
graph); only the serving design differs. Configured from the environment, as such services usually
are: RADAR_MODEL_DIR (export folder), ORT_THREADS (ONNX Runtime intra-op threads), RADAR_SETTINGS,
the `radar` config's parameters as JSON, and RADAR_GRAPH, the ONNX file of the folder to run (e.g.
model.int8.onnx). The perf kit passes those of the kit variant it compares with; without them, a
service takes those of the committed CPU profile for the model folder.

RADAR_RUNNER=torch runs the checkpoint the export saved (`checkpoint/`) on the kit's PyTorch runner
instead, in RADAR_TORCH_DTYPE (default fp16) on RADAR_TORCH_DEVICE (default cuda): the model the
gpu-embedded profile serves, so that a GPU run compares designs on one model (perf/specs/gpu.json). Each run as it
comes, eagerly, unless RADAR_TORCH_LADDER (batch sizes, e.g. 1,2,4,...,128) pads its rows up to a ladder and
RADAR_TORCH_WARM (token lengths, the buckets) warms every ladder size by every length at load, with CUDA graphs of
them where RADAR_TORCH_GRAPHS is 1: the runner as the kit's classifier runs it, for a design that runs one batch at
a time (the asyncio batcher; a graph must not be replayed by two threads at once).
RADAR_RUNNER=sim runs the simulated accelerator the sim-h100 profile serves (perf.sim.device):
RADAR_SIM_TABLE (a device table's file), RADAR_SIM_CURVE (its model), RADAR_SIM_PRECISION.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kit.adapters.artifacts import graph_output, text_pipeline
from kit.adapters.settings import TextSettings
from kit.pipelines.errors import InputError
from kit.pipelines.text.pipeline import TextPlan, decode_text
from kit.runners.onnx import make_session
from perf.sim.device import SimulatedModel

Logits = Callable[[np.ndarray, np.ndarray], np.ndarray]
RUNNERS = ("onnx", "torch", "sim")
TORCH_SHAPES = ("RADAR_TORCH_LADDER", "RADAR_TORCH_WARM")


def onnx_logits(model: Path, threads: int) -> Logits:
    """A graph of an export folder, by the output its export.json names (an encoder's is not `logits`)."""
    session, output = make_session(model, threads), graph_output(model.parent)
    return lambda ids, mask: session.run([output], {"input_ids": ids, "attention_mask": mask})[0]


def torch_runner(model_dir: Path, dtype: str, device: str, ladder=(), lengths=(), graphs: bool = False):
    """The checkpoint on the kit's PyTorch runner, its rows padded up to `ladder`, every ladder size by every length
    warmed (and captured as CUDA graphs with `graphs`) where `lengths` are given: (model, output name, warm-up or
    None). torch is imported here only: the serve venv, where the CPU baselines run, has none."""
    from kit.runners.torch import InputSpec, TorchModel, TorchOptions, warm_shapes

    output = graph_output(model_dir)
    options = TorchOptions(dtype, device, graphs, ladder=tuple(ladder))
    model = TorchModel.from_checkpoint(model_dir / "checkpoint", [output], options)
    specs = [InputSpec(name, np.dtype(np.int64), (-1,)) for name in ("input_ids", "attention_mask")]
    warmup = model.warm(warm_shapes(specs, ladder, lengths)) if ladder and lengths else None
    return model, output, warmup


def torch_logits(model_dir: Path, dtype: str, device: str, ladder=(), lengths=(), graphs: bool = False) -> Logits:
    model, output, warmup = torch_runner(model_dir, dtype, device, ladder, lengths, graphs)
    if warmup is not None:
        print(f"warmed {warmup.shapes} shapes in {warmup.seconds:.1f} s, {warmup.graphs} as CUDA graphs", file=sys.stderr)
    return lambda ids, mask: model({"input_ids": ids, "attention_mask": mask})[output]


def sim_logits(table: Path, curve: str, precision: str) -> Logits:
    model = SimulatedModel(table, curve, precision, {"logits": 2})
    return lambda ids, mask: model({"input_ids": ids, "attention_mask": mask})["logits"]


class RadarModel:
    inputs_in_threads = False  # a text is planned on the event loop, as its field report's batcher did

    def __init__(self, model_dir: Path, settings: TextSettings, logits: Logits):
        self.settings = settings
        self.pipeline = text_pipeline(model_dir, settings)
        self.logits = logits

    def plan(self, text: str) -> TextPlan:
        """Raises kit.pipelines.errors.InputError for a text the kit would reject."""
        return self.pipeline.plan(decode_text(text.encode("utf-8"), self.settings.max_text_bytes))

    def respond(self, plan: TextPlan, logits: list[np.ndarray]) -> dict:
        result = self.pipeline.finish(plan, logits)
        return {"score": result.score, "chunk_scores": result.chunk_scores.tolist(), "chunk_spans": result.spans.tolist()}

    def classify(self, text: str) -> dict:
        """One request's chunks, one session run per length bucket: no batching across requests."""
        plan = self.plan(text)
        return self.respond(plan, [self.logits(g.input_ids, g.attention_mask) for g in plan.groups])

    def predict(self, body: object) -> dict:
        """A per-request design's answer to a JSON body {"text": ...}."""
        return self.classify(text_of(body))

    def parts(self, body: object):
        """The batcher's (perf.baselines.fastapi_batcher): each chunk a part of one row, the answer of their logits."""
        plan = self.plan(text_of(body))
        parts = [
            {"input_ids": ids[np.newaxis], "attention_mask": mask[np.newaxis]}
            for g in plan.groups
            for ids, mask in zip(g.input_ids, g.attention_mask)
        ]

        def answer(outputs: list[list[np.ndarray]]) -> dict:
            chunks = iter(outputs)
            return self.respond(plan, [np.concatenate([next(chunks)[0] for _ in g.input_ids]) for g in plan.groups])

        return parts, answer

    def run(self, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [self.logits(arrays["input_ids"], arrays["attention_mask"])]


def text_of(body: object) -> str:
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str):
        raise InputError("the body must be a JSON object with a string field 'text'")
    return text


def committed(model_dir: Path) -> tuple[dict, dict]:
    """The `radar` parameters and the classifier's that the committed CPU profile serves from the folder.
    Only for a service started by hand: the workloads' imports would add to the memory a benchmark measures."""
    from perf.workloads.radar import RADAR

    with tempfile.TemporaryDirectory(prefix="radar-settings-") as work:
        return RADAR.served(model_dir, Path(work))


def settings_from_env(model_dir: Path) -> TextSettings:
    params = json.loads(os.environ["RADAR_SETTINGS"]) if "RADAR_SETTINGS" in os.environ else committed(model_dir)[0]
    return TextSettings.from_parameters(params)


def logits_from_env(model_dir: Path) -> Logits:
    runner = os.environ.get("RADAR_RUNNER", "onnx")
    if runner not in RUNNERS:
        raise ValueError(f"RADAR_RUNNER={runner!r} is not one of {RUNNERS}")
    if runner == "torch":
        ladder, lengths = (tuple(int(n) for n in os.environ.get(name, "").split(",") if n) for name in TORCH_SHAPES)
        dtype, device = os.environ.get("RADAR_TORCH_DTYPE", "fp16"), os.environ.get("RADAR_TORCH_DEVICE", "cuda")
        return torch_logits(model_dir, dtype, device, ladder, lengths, os.environ.get("RADAR_TORCH_GRAPHS") == "1")
    if runner == "sim":
        table = Path(os.environ["RADAR_SIM_TABLE"])
        return sim_logits(table, os.environ["RADAR_SIM_CURVE"], os.environ.get("RADAR_SIM_PRECISION", "fp16"))
    graph = os.environ.get("RADAR_GRAPH") or committed(model_dir)[1]["onnx_model"]
    return onnx_logits(model_dir / graph, int(os.environ.get("ORT_THREADS", "1")))


def from_env() -> RadarModel:
    model_dir = Path(os.environ.get("RADAR_MODEL_DIR", "artifacts/radar"))
    model = RadarModel(model_dir, settings_from_env(model_dir), logits_from_env(model_dir))
    # The perf kit counts these lines to know that every worker process has loaded its model.
    print(f"radar model ready in pid {os.getpid()}", file=sys.stderr, flush=True)
    return model
