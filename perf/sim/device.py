"""A simulated accelerator: a model that computes nothing and answers each batch after the time a real GPU took
for that batch, so that the serving path around it (tokenising, queues, stubs, BLS, the front door) can be
measured in the regime a GPU puts it in, on a machine without one.

The time comes from a device table, the rows `export.gpu_levers` measured on a GPU (model, batch, tokens or image
side, median wall milliseconds and device milliseconds per batch, by precision): perf/sim/h100.json, data that
another GPU's measurement replaces. Between measured batch sizes the wall time is interpolated linearly;
for work per item between measured sizes (tokens, pixels) the launch part (wall - device) stays and the device
part scales with the work; beyond the largest measured batch the device part grows per item.

One instance runs one batch at a time, as a CUDA stream would: a lock per process (Triton's instances are one
process each; a threaded baseline's threads share theirs). The wait is a sleep: what it does not model is the
CPU that PyTorch's eager kernel launches burn on a real host (the wall times of small batches are mostly that),
copies over PCIe, launch jitter and memory. Outputs are deterministic functions of the inputs, so served results
can still be checked against the same function in-process: a classifier's logits from its tokens, an image
model's class probabilities from the mean of each channel over the image's own (unpadded) area. Each batch's
busy time is added to a counter file per process when KIT_SIM_COUNTERS names a folder, which a benchmark reads
to tell how busy the device was.
"""

from __future__ import annotations

import bisect
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kit.pipelines.batching.merge import CostModel

COUNTERS_ENV = "KIT_SIM_COUNTERS"
SIM = Path(__file__).resolve().parent  # the device tables, the runner's model.py and the profile beside them


class SimulationError(ValueError):
    """The device table cannot simulate what was asked; the message says why."""


@dataclass(frozen=True)
class Curve:
    """One model's measured batches at one precision: per work size (tokens, or pixels per image), the batch
    sizes and their wall and device milliseconds."""

    work: tuple[int, ...]
    batches: dict[int, tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...]]]

    @classmethod
    def from_table(cls, table: dict, model: str, precision: str) -> Curve:
        rows = [r for r in table["throughput"] if r["model"] == model and r["precision"] == precision]
        if not rows:
            known = sorted({(r["model"], r["precision"]) for r in table["throughput"]})
            raise SimulationError(f"the device table has no {model!r} rows at {precision} (it has {known})")
        by_work: dict[int, list[dict]] = {}
        for r in rows:
            by_work.setdefault(work_of(r), []).append(r)
        batches = {}
        for work, group in by_work.items():
            group.sort(key=lambda r: r["batch"])
            batches[work] = (
                tuple(r["batch"] for r in group),
                tuple(float(r["median_ms"]) for r in group),
                tuple(float(r.get("gpu_ms") or r["median_ms"]) for r in group),
            )
        return cls(tuple(sorted(batches)), batches)

    @classmethod
    def from_file(cls, path: Path, model: str, precision: str) -> Curve:
        return cls.from_table(json.loads(path.read_text()), model, precision)

    def samples(self) -> list[tuple[int, int, float]]:
        """(batch, work per item, wall seconds) of every measured batch: what a cost model of runs is fitted to."""
        return [(b, work, ms / 1000) for work, (sizes, wall, _) in self.batches.items() for b, ms in zip(sizes, wall)]

    def seconds(self, batch: int, work: int) -> float:
        """The simulated time of one batch of `batch` items of `work` each."""
        measured = self.work[max(0, bisect.bisect_right(self.work, work) - 1)]
        sizes, wall, device = self.batches[measured]
        if batch >= sizes[-1]:
            per_item = device[-1] / sizes[-1]
            wall_ms, device_ms = wall[-1] + per_item * (batch - sizes[-1]), device[-1] + per_item * (batch - sizes[-1])
        else:
            wall_ms, device_ms = float(np.interp(batch, sizes, wall)), float(np.interp(batch, sizes, device))
        scaled = device_ms * max(1.0, work / measured)
        return (wall_ms - device_ms + scaled) / 1000


def work_of(row: dict) -> int:
    """A row's work per item: its tokens, or the pixels of its square image (`image_size`, or WxH in `input`)."""
    if row.get("tokens"):
        return int(row["tokens"])
    side = row.get("image_size") or int(str(row["input"]).split("x")[0])
    return 3 * int(side) * int(side)


class SimulatedModel:
    """The runner contract of kit.runners.onnx and kit.runners.torch (named arrays in, named FP32 arrays out) on a
    simulated device. `table`: a device table's file; `curve`: its model; `outputs`: name -> size of each item's
    output vector."""

    def __init__(self, table: Path, curve: str, precision: str, outputs: dict[str, int]):
        self.curve = Curve.from_file(table, curve, precision)
        self.outputs = outputs
        self.stream = threading.Lock()
        self.counters = Path(os.environ[COUNTERS_ENV]) if os.environ.get(COUNTERS_ENV) else None
        self.busy_ns = 0
        rng = np.random.default_rng(0)
        self.weights = {name: rng.standard_normal((size, 3)).astype(np.float32) for name, size in outputs.items()}

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        batch, work = shape_of(inputs)
        seconds = self.curve.seconds(batch, work)
        answer = {name: deterministic(inputs, weights) for name, weights in self.weights.items()}
        with self.stream:
            time.sleep(seconds)
            self.busy_ns += int(seconds * 1e9)
            if self.counters is not None:
                write_counter(self.counters, self.busy_ns)
        return answer


def shape_of(inputs: dict[str, np.ndarray]) -> tuple[int, int]:
    """(batch size, work per item): tokens of `input_ids`, else the pixels of `pixel_values` per image."""
    if "input_ids" in inputs:
        ids = inputs["input_ids"]
        return ids.shape[0], ids.shape[1]
    pixels = inputs["pixel_values"]
    return pixels.shape[0], int(np.prod(pixels.shape[1:]))


def features(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Three numbers per item that depend on what it holds and not on its padding: for tokens, sums of the valid
    ids' residues; for images, each channel's mean over the image's own height and width."""
    if "input_ids" in inputs:
        mask = inputs["attention_mask"]
        ids, valid = inputs["input_ids"] * mask, np.maximum(mask.sum(axis=1), 1)
        return np.stack([((ids % m) * mask).sum(axis=1) / (valid * m) for m in (7, 31, 127)], axis=1).astype(np.float32)
    pixels, sizes = inputs["pixel_values"], inputs["image_sizes"]
    return np.stack([pixels[i, :, :h, :w].mean(axis=(1, 2)) for i, (h, w) in enumerate(sizes)]).astype(np.float32)


def deterministic(inputs: dict[str, np.ndarray], weights: np.ndarray) -> np.ndarray:
    """Softmax of fixed random weights over each item's features: a probability vector, the same for the same item."""
    logits = features(inputs) @ weights.T
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (exp / exp.sum(axis=1, keepdims=True)).astype(np.float32)


def write_counter(folder: Path, busy_ns: int) -> None:
    """This process's busy nanoseconds so far, replaced whole so that a reader never sees half a number."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / str(os.getpid())
    partial = path.with_suffix(".partial")
    partial.write_text(str(busy_ns))
    partial.replace(path)


def busy_seconds(folder: Path) -> float:
    """The busy seconds of every process that counted into `folder`."""
    return sum(int(p.read_text() or 0) for p in folder.glob("[0-9]*") if p.suffix == "") / 1e9 if folder.is_dir() else 0.0


def write_cost(table: Path, curve: str, precision: str, out: Path) -> None:
    """The cost model of a table's curve in the file a pixel classifier's `cost` policy reads (kit.adapters.artifacts.
    cost_model), for a profile that links it in place of the export's: runs priced as the simulated device runs them."""
    model = CostModel.fit(Curve.from_file(table, curve, precision).samples())
    source = f"perf.sim.device cost {table.name} {curve} {precision}"
    out.write_text(json.dumps({"model": model.to_json(), "source": source}, indent=1) + "\n")


if __name__ == "__main__":
    import sys

    table_path, curve_name, precision_name, out_path = sys.argv[1:5]
    write_cost(Path(table_path), curve_name, precision_name, Path(out_path))
