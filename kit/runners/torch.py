"""PyTorch outside Triton's own backends: a checkpoint served on a GPU with the tensors of its ONNX model.

Where onnxruntime-gpu and TensorRT cannot be installed (the H100 host), the networks run on the GPU
through PyTorch. `TorchModel` has the ONNX runner's contract (kit.runners.onnx): numpy tensors named
as in Triton's config in, FP32 numpy out, so kit.runners.batched.run_batched merges a list of requests by shape for it
as it does for a session. Inputs arrive on the CPU (the stub keeps them there:
FORCE_CPU_ONLY_INPUT_TENSORS, as its CUDA runtime and PyTorch's need not match), are checked there
(kit.runners.torch_models), take the model's precision and move to the device here.

FP16 is for the GPU only: PyTorch's CPU half-precision kernels are slow or missing, so `fp16` on the
CPU is refused rather than run slowly. `cuda_graphs` > 0 captures one CUDA graph per input shape,
up to that many shapes (each holds memory), and replays it: one launch instead of one per kernel,
which pays where kernels are short (small batches). It does nothing on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from kit.runners.torch_models import load_serving_module

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
# Warm-up runs before a capture, on a side stream as PyTorch's CUDA graph notes ask: lazy
# initialisation (cuBLAS handles, kernel selection) must not happen inside the capture.
CAPTURE_WARMUP_RUNS = 3


class TorchRunnerError(ValueError):
    """The runner cannot be set up as asked; the message says why."""


class ServingModule(Protocol):
    """A module of kit.runners.torch_models: keyword tensors in, one tensor out, inputs checked first."""

    def check(self, inputs: dict[str, np.ndarray]) -> None: ...

    def __call__(self, **inputs: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class TorchOptions:
    dtype: str = "fp32"
    device: str = "cpu"
    cuda_graphs: int = 0

    def torch_device(self) -> torch.device:
        """The device, after refusing what cannot run as asked."""
        if self.dtype not in DTYPES:
            raise TorchRunnerError(f"dtype {self.dtype!r} is not one of {sorted(DTYPES)}")
        kind, _, index = self.device.partition(":")
        if kind not in ("cuda", "cpu") or (index and (kind == "cpu" or not index.isdigit())):
            raise TorchRunnerError(f"device {self.device!r} is not cpu, cuda or cuda:N")
        if kind == "cpu" and self.dtype == "fp16":
            raise TorchRunnerError("fp16 on the CPU is refused: PyTorch's CPU half-precision kernels are slow; use fp32")
        if self.cuda_graphs < 0:
            raise TorchRunnerError(f"cuda_graphs {self.cuda_graphs} must be a count of shapes, 0 for none")
        if kind == "cpu":
            return torch.device("cpu")
        if not torch.cuda.is_available():
            raise TorchRunnerError(f"device {self.device}: this PyTorch ({torch.__version__}) sees no CUDA device")
        return torch.device("cuda", int(index) if index else torch.cuda.current_device())


class CudaGraphs:
    """`forward` replayed from a CUDA graph captured once per input shape, for at most `limit` shapes;
    further shapes run eagerly.

    All graphs share one memory pool, which is safe because an instance replays one graph at a time
    and its output is copied off the GPU before the next replay overwrites the pool.
    """

    def __init__(self, forward: ServingModule, limit: int):
        self.forward = forward
        self.limit = limit
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, dict[str, torch.Tensor], torch.Tensor]] = {}

    def __call__(self, **inputs: torch.Tensor) -> torch.Tensor:
        key = tuple((name, tuple(tensor.shape), tensor.dtype) for name, tensor in inputs.items())
        if key not in self.graphs:
            if len(self.graphs) >= self.limit:
                return self.forward(**inputs)
            self.graphs[key] = self.capture(inputs)
        graph, static_inputs, output = self.graphs[key]
        for name, tensor in inputs.items():
            static_inputs[name].copy_(tensor)
        graph.replay()
        return output

    def capture(self, inputs: dict[str, torch.Tensor]) -> tuple[torch.cuda.CUDAGraph, dict[str, torch.Tensor], torch.Tensor]:
        static_inputs = {name: tensor.clone() for name, tensor in inputs.items()}
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(CAPTURE_WARMUP_RUNS):
                self.forward(**static_inputs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            output = self.forward(**static_inputs)
        return graph, static_inputs, output


class TorchModel:
    """A serving module on one device in one precision, called like kit.runners.onnx.OnnxModel."""

    def __init__(self, module: torch.nn.Module, output_name: str, options: TorchOptions):
        self.device = options.torch_device()
        self.dtype = DTYPES[options.dtype]
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # where streams live and graphs are captured
        self.module = module.to(device=self.device, dtype=self.dtype).eval()
        self.output_name = output_name
        graphs = self.device.type == "cuda" and options.cuda_graphs > 0
        self.forward = CudaGraphs(self.module, options.cuda_graphs) if graphs else self.module

    @classmethod
    def from_checkpoint(cls, checkpoint: Path, output_names: list[str], options: TorchOptions) -> TorchModel:
        if len(output_names) != 1:
            raise TorchRunnerError(f"a PyTorch serving module has one output; the config names {output_names}")
        options.torch_device()  # refuse before loading gigabytes of weights
        return cls(load_serving_module(checkpoint, DTYPES[options.dtype]), output_names[0], options)

    def tensors(self, inputs: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """Integer inputs keep their type; floating ones take the model's precision before they move."""
        tensors = {}
        for name, array in inputs.items():
            tensor = torch.from_numpy(array)
            tensors[name] = (tensor.to(self.dtype) if tensor.is_floating_point() else tensor).to(self.device)
        return tensors

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.module.check(inputs)
        with torch.inference_mode():
            output = self.forward(**self.tensors(inputs))
            return {self.output_name: output.float().cpu().numpy()}
