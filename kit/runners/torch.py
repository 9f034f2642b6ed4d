"""PyTorch outside Triton's own backends: a checkpoint served on a GPU with the tensors of its ONNX model.

Where onnxruntime-gpu and TensorRT cannot be installed (the H100 host), the networks run on the GPU
through PyTorch. `TorchModel` has the ONNX runner's contract (kit.runners.onnx): numpy tensors named
as in Triton's config in, FP32 numpy out, so kit.runners.batched.run_batched merges a list of requests by shape for it
as it does for a session. Inputs arrive on the CPU (the stub keeps them there:
FORCE_CPU_ONLY_INPUT_TENSORS, as its CUDA runtime and PyTorch's need not match), are checked there
(kit.runners.torch_models), take the model's precision and move to the device here.

A served model meets few shapes only if they are made few. With a `ladder` of batch sizes, a run's rows are padded
up to the next size of it (the last row repeated: any model takes its own row again), so that one instance meets at
most ladder x lengths shapes; `warm` runs each of them once at load, before Triton calls the model ready, so that no
client pays for a shape's first run (kernel selection, allocations: on a fresh process on a GPU, executions took
100-370 ms where the same runner ran 64 chunks in 12.5 ms once warm). On a GPU, `cuda_graphs` captures one CUDA
graph per warmed shape, largest first, while the memory the graphs take stays within `graph_memory_share` of what
was free once the weights were loaded, and replays it: one launch instead of one per kernel, which is what an eager
model's small batches spend their time on. A shape without a graph runs eagerly.

Every run's shape and the time of its four stages (the tensors built, the copy to the device, the forward pass and
the copy back, each synchronised) go to `observe`, which the Triton adapter turns into metrics (kit.adapters.
runner_metrics). FP16 is for the GPU only: PyTorch's CPU half-precision kernels are slow or missing, so `fp16` on the
CPU is refused rather than run slowly.
"""

from __future__ import annotations

import gzip
import shutil
import time
from collections.abc import Callable, Sequence
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
Inputs = dict[str, np.ndarray]


class TorchRunnerError(ValueError):
    """The runner cannot be set up as asked; the message says why."""


class ServingModule(Protocol):
    """A module of kit.runners.torch_models: keyword tensors in, one tensor out, inputs checked first."""

    def check(self, inputs: Inputs) -> None: ...

    def __call__(self, **inputs: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class TorchOptions:
    dtype: str = "fp32"
    device: str = "cpu"
    cuda_graphs: bool = False
    graph_memory_share: float = 0.5
    ladder: tuple[int, ...] = ()

    def torch_device(self) -> torch.device:
        """The device, after refusing what cannot run as asked."""
        if self.dtype not in DTYPES:
            raise TorchRunnerError(f"dtype {self.dtype!r} is not one of {sorted(DTYPES)}")
        kind, _, index = self.device.partition(":")
        if kind not in ("cuda", "cpu") or (index and (kind == "cpu" or not index.isdigit())):
            raise TorchRunnerError(f"device {self.device!r} is not cpu, cuda or cuda:N")
        if kind == "cpu" and self.dtype == "fp16":
            raise TorchRunnerError("fp16 on the CPU is refused: PyTorch's CPU half-precision kernels are slow; use fp32")
        if not 0 < self.graph_memory_share <= 1:
            raise TorchRunnerError(f"graph_memory_share {self.graph_memory_share} is not a share of the free memory (0, 1]")
        if list(self.ladder) != sorted(set(self.ladder)) or any(size < 1 for size in self.ladder):
            raise TorchRunnerError(f"ladder {list(self.ladder)} is not rising batch sizes of at least 1")
        if kind == "cpu":
            return torch.device("cpu")
        if not torch.cuda.is_available():
            raise TorchRunnerError(f"device {self.device}: this PyTorch ({torch.__version__}) sees no CUDA device")
        return torch.device("cuda", int(index) if index else torch.cuda.current_device())


def rung(rows: int, ladder: Sequence[int]) -> int:
    """The batch a run of `rows` rows is padded to: the smallest ladder size that holds it; beyond the ladder, itself."""
    return next((size for size in ladder if size >= rows), rows)


def padded(inputs: Inputs, size: int) -> Inputs:
    """Each input grown to `size` rows by repeating its last row: rows the model computes and the caller drops."""
    out = {}
    for name, array in inputs.items():
        extra = np.repeat(array[-1:], size - len(array), axis=0)
        out[name] = np.concatenate([array, extra])
    return out


def shape_of(inputs: Inputs) -> tuple:
    return tuple((name, array.shape, array.dtype.str) for name, array in inputs.items())


def shape_name(inputs: Inputs) -> str:
    """A run's shape as its metrics label it: the first input's dims, `64x72`."""
    return "x".join(map(str, next(iter(inputs.values())).shape))


@dataclass(frozen=True)
class InputSpec:
    """An input as the model's config declares it: its numpy type and its dims after the batch axis (-1: free)."""

    name: str
    dtype: np.dtype
    dims: tuple[int, ...]


def warm_shapes(specs: Sequence[InputSpec], ladder: Sequence[int], lengths: Sequence[int]) -> list[Inputs]:
    """Inputs of every shape a laddered runner meets: each ladder size, by each length for the free dims (a text
    model's token axis, which its caller pads to those lengths). Ones everywhere: a valid token id and a full
    attention mask, an image of ones. Empty where free dims have no lengths given: such a model (images of any
    size) warms nothing."""
    free = any(d < 0 for spec in specs for d in spec.dims)
    if free and not lengths:
        return []
    shapes = []
    for size in ladder:
        for length in lengths if free else [0]:
            shapes.append({s.name: np.ones((size, *(length if d < 0 else d for d in s.dims)), dtype=s.dtype) for s in specs})
    return shapes


@dataclass(frozen=True)
class Run:
    """One run of the model: its shape (padded), the rows asked for, and the seconds of each stage."""

    shape: str
    rows: int
    padded_rows: int
    warmed: bool
    graph: bool
    tensors_s: float
    h2d_s: float
    forward_s: float
    d2h_s: float


@dataclass(frozen=True)
class Warmup:
    """What `warm` did: the shapes run, the graphs captured, how long it took, the memory the graphs (and the eager
    runs' cache) took against the budget, and each shape's time once warm, as (rows, elements per row, seconds):
    what a cost model of merged runs is fitted to (kit.pipelines.batching.merge.CostModel)."""

    shapes: int
    graphs: int
    seconds: float
    graph_bytes: int
    budget_bytes: int
    costs: tuple[tuple[int, int, float], ...] = ()


class CudaGraphs:
    """`forward` replayed from a CUDA graph captured per input shape.

    All graphs share one memory pool, which is safe because an instance replays one graph at a time and its output
    is copied off the GPU before the next replay overwrites the pool; captured largest first, the smaller ones reuse
    what the largest took."""

    def __init__(self, forward: ServingModule):
        self.forward = forward
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, dict[str, torch.Tensor], torch.Tensor]] = {}

    def capture(self, key: tuple, inputs: dict[str, torch.Tensor]) -> None:
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
        self.graphs[key] = graph, static_inputs, output


class TorchModel:
    """A serving module on one device in one precision, called like kit.runners.onnx.OnnxModel."""

    def __init__(
        self,
        module: torch.nn.Module,
        output_name: str,
        options: TorchOptions,
        observe: Callable[[Run], None] | None = None,
    ):
        self.device = options.torch_device()
        self.dtype = DTYPES[options.dtype]
        self.options = options
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # where streams live and graphs are captured
        self.module = module.to(device=self.device, dtype=self.dtype).eval()
        self.output_name = output_name
        self.graphs = CudaGraphs(self.module) if self.device.type == "cuda" and options.cuda_graphs else None
        self.warmed: set[tuple] = set()
        self.observe = observe

    @classmethod
    def from_checkpoint(
        cls, checkpoint: Path, output_names: list[str], options: TorchOptions, observe: Callable[[Run], None] | None = None
    ) -> TorchModel:
        if len(output_names) != 1:
            raise TorchRunnerError(f"a PyTorch serving module has one output; the config names {output_names}")
        options.torch_device()  # refuse before loading gigabytes of weights
        return cls(load_serving_module(checkpoint, DTYPES[options.dtype]), output_names[0], options, observe)

    def host_tensors(self, inputs: Inputs) -> dict[str, torch.Tensor]:
        """Integer inputs keep their type; floating ones take the model's precision."""
        tensors = {}
        for name, array in inputs.items():
            tensor = torch.from_numpy(array)
            tensors[name] = tensor.to(self.dtype) if tensor.is_floating_point() else tensor
        return tensors

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def warm(self, shapes: Sequence[Inputs]) -> Warmup:
        """Runs each shape (largest first), capturing its graph where graphs are on and the budget allows, then once
        more, timed; every shape run here counts as warmed."""
        start = time.perf_counter()
        ordered = sorted(shapes, key=lambda inputs: -sum(a.size for a in inputs.values()))
        free_before = torch.cuda.mem_get_info(self.device)[0] if self.device.type == "cuda" else 0
        budget = int(free_before * self.options.graph_memory_share)
        used, costs = 0, []
        with torch.inference_mode():
            for inputs in ordered:
                key = shape_of(inputs)
                tensors = {name: t.to(self.device) for name, t in self.host_tensors(inputs).items()}
                if self.graphs is not None and used <= budget:
                    self.graphs.capture(key, tensors)
                else:
                    self.module(**tensors)
                self.synchronize()
                if self.device.type == "cuda":
                    used = free_before - torch.cuda.mem_get_info(self.device)[0]
                self.warmed.add(key)
                first = next(iter(inputs.values()))
                costs.append((len(first), int(first[0].size), self.timed_forward(key, tensors)))
        graphs = len(self.graphs.graphs) if self.graphs is not None else 0
        return Warmup(len(ordered), graphs, time.perf_counter() - start, max(used, 0), budget, tuple(costs))

    def timed_forward(self, key: tuple, tensors: dict[str, torch.Tensor]) -> float:
        """Seconds of one forward pass of device tensors, synchronised: a graph's replay where it has one."""
        started = time.perf_counter()
        graph = self.graphs.graphs.get(key) if self.graphs is not None else None
        if graph is not None:
            graph[0].replay()
        else:
            self.module(**tensors)
        self.synchronize()
        return time.perf_counter() - started

    def __call__(self, inputs: Inputs) -> dict[str, np.ndarray]:
        self.module.check(inputs)
        rows = len(next(iter(inputs.values())))
        size = rung(rows, self.options.ladder)
        if size > rows:
            inputs = padded(inputs, size)
        key = shape_of(inputs)
        started = time.perf_counter()
        with torch.inference_mode():
            host = self.host_tensors(inputs)
            built = time.perf_counter()
            graph = self.graphs.graphs.get(key) if self.graphs is not None else None
            if graph is not None:
                replay, static_inputs, output = graph
                for name, tensor in host.items():
                    static_inputs[name].copy_(tensor)
            else:
                device_inputs = {name: tensor.to(self.device) for name, tensor in host.items()}
            self.synchronize()
            copied = time.perf_counter()
            if graph is not None:
                replay.replay()
            else:
                output = self.module(**device_inputs)
            self.synchronize()
            ran = time.perf_counter()
            result = output[:rows].float().cpu().numpy()
            done = time.perf_counter()
        if self.observe is not None:
            timings = (built - started, copied - built, ran - copied, done - ran)
            self.observe(Run(shape_name(inputs), rows, size, key in self.warmed, graph is not None, *timings))
        return {self.output_name: result}


class Trace:
    """torch.profiler over the next `executions` executions of a model, written as a gzipped Chrome trace to
    `path` once they are done: where a GPU run's time goes, kernel by kernel."""

    def __init__(self, path: Path, executions: int, cuda: bool):
        activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
        self.path, self.left = path, executions
        self.profiler = torch.profiler.profile(activities=activities, record_shapes=True)
        self.profiler.start()

    def step(self) -> bool:
        """Counts one execution; True once the trace is written."""
        self.left -= 1
        if self.left > 0:
            return False
        self.profiler.stop()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        plain = self.path.with_suffix("")
        self.profiler.export_chrome_trace(str(plain))
        with plain.open("rb") as source, gzip.open(self.path, "wb") as target:
            shutil.copyfileobj(source, target)
        plain.unlink()
        return True
