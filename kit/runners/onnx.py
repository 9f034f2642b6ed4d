"""ONNX Runtime outside Triton's own backends: the kit's runner and in-process engines.

`OnnxModel` is what the runner (kit/adapters/onnx_runner_model.py) serves, batched by
kit.runners.batched as the native backend would batch it. `Graphs` runs a pipeline's networks in this process
(an entry's in-process engines, tests, baselines, the limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

from kit.runners.batched import Inputs

CPU = "CPUExecutionProvider"
# What ONNX Runtime raises for input the graph refuses (a type or rank it does not take, an index out of a table's
# range): the request's own fault, not the server's.
BAD_INPUT = (InvalidArgument,)
# ONNX Runtime's graph optimisation levels by name (names, not enums, cross process boundaries). The
# kit serves SERVED_LEVEL; "extended" and above include the transformer fusions (layer norm, GELU, attention).
SERVED_LEVEL = "all"
LEVELS = {
    "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def make_session(
    path: Path, threads: int, provider: str = CPU, device_id: int = 0, level: str = SERVED_LEVEL
) -> ort.InferenceSession:
    """A session pinned to `threads`: on a shared CPU, instances x threads is the layout knob.

    Another `provider` (CUDAExecutionProvider, TensorrtExecutionProvider) runs on GPU `device_id`,
    with the CPU for the nodes it lacks. ONNX Runtime would fall back to the CPU silently when the
    provider is not in its build (the CPU-only `onnxruntime` wheel), so that is refused here. A lower
    `level` (LEVELS) is for probes that ask what ONNX Runtime's own fusions are worth.
    """
    if provider not in ort.get_available_providers():
        raise RuntimeError(
            f"{provider} is not in this onnxruntime build ({ort.get_available_providers()}); it needs onnxruntime-gpu"
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = LEVELS[level]
    providers = [CPU] if provider == CPU else [(provider, {"device_id": device_id}), CPU]
    return ort.InferenceSession(str(path), options, providers=providers)


class OnnxModel:
    """A session plus the output names Triton asked for."""

    def __init__(self, path: Path, threads: int, output_names: Sequence[str], provider: str = CPU, device_id: int = 0):
        self.session = make_session(path, threads, provider, device_id)
        self.output_names = list(output_names)

    def __call__(self, inputs: Inputs) -> dict[str, np.ndarray]:
        values = self.session.run(self.output_names, inputs)
        return dict(zip(self.output_names, values))


class Graphs:
    """Named ONNX graphs in this process, each called with its inputs by name and answering all its outputs by name,
    in the shapes Triton gives them (kit.control.onnx_task): a graph tensor of one value per row is [rows, 1] on the
    outside. The networks of a user's pipeline (kit.pipelines.custom) outside Triton; input the graph refuses is a
    ValueError, the request's fault, as the served path answers it."""

    def __init__(self, paths: dict[str, Path], threads: int = 1):
        self.sessions = {name: make_session(path, threads) for name, path in paths.items()}
        # Per graph: its per-row inputs (rank 1), its outputs, and which of those are per-row.
        self.per_row = {name: {i.name for i in s.get_inputs() if len(i.shape) == 1} for name, s in self.sessions.items()}
        self.outputs = {name: [(o.name, len(o.shape) == 1) for o in s.get_outputs()] for name, s in self.sessions.items()}

    async def __call__(self, name: str, inputs: Inputs) -> dict[str, np.ndarray]:
        per_row, outputs = self.per_row[name], self.outputs[name]
        feed = {k: v.reshape(len(v)) if k in per_row else v for k, v in inputs.items()}
        try:
            values = self.sessions[name].run([output for output, _ in outputs], feed)
        except BAD_INPUT as exc:
            raise ValueError(f"network {name!r} refused its inputs: {exc}") from None
        return {output: v.reshape(len(v), 1) if row else v for (output, row), v in zip(outputs, values)}
