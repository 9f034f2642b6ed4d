"""Checks that an exported ONNX file has the signature serving expects and computes what its source does.

Generic over models, in the manner of optimum's `_run_validation`: the signature check compares
names, element types and axes (so no `input.1` or anonymous dim reaches a Triton config), the
numeric check runs ONNX Runtime beside a reference function on the same inputs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

Batch = dict[str, np.ndarray]


class ValidationError(Exception):
    """The exported model differs from what was asked for or from its source; the message says how."""


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output: dims are axis names for dynamic axes and ints for fixed ones."""

    name: str
    dtype: np.dtype
    dims: tuple[str | int, ...]

    def __str__(self) -> str:
        return f"{self.name} {np.dtype(self.dtype).name} [{', '.join(map(str, self.dims))}]"


def _spec(value: onnx.ValueInfoProto) -> TensorSpec:
    tensor = value.type.tensor_type
    dims = tuple(d.dim_param if d.HasField("dim_param") else d.dim_value for d in tensor.shape.dim)
    return TensorSpec(value.name, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)), dims)


def graph_signature(path: Path) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """Inputs and outputs as written in the file; external weights are not loaded."""
    graph = onnx.load(str(path), load_external_data=False).graph
    return [_spec(v) for v in graph.input], [_spec(v) for v in graph.output]


def check_signature(path: Path, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]) -> None:
    got_inputs, got_outputs = graph_signature(path)
    for kind, want, got in (("inputs", list(inputs), got_inputs), ("outputs", list(outputs), got_outputs)):
        if want != got:
            raise ValidationError(f"{path.name} {kind} are [{'; '.join(map(str, got))}], expected [{'; '.join(map(str, want))}]")


def opset(path: Path) -> int:
    """The default-domain opset the file declares (what a runtime must support)."""
    model = onnx.load(str(path), load_external_data=False)
    return next(entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx"))


def abs_diffs(path: Path, batches: Sequence[Batch], expected: Sequence[dict[str, np.ndarray]]) -> list[float]:
    """Max abs difference per batch over all outputs, after checking that output shapes agree. The
    reference outputs come in computed, so that several graphs of one source are checked against one run of it."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    diffs = []
    for batch, want in zip(batches, expected, strict=True):
        got = dict(zip(names, session.run(names, batch)))
        per_output = []
        for name, expected in want.items():
            if got[name].shape != expected.shape:
                raise ValidationError(f"output {name} has shape {got[name].shape}, expected {expected.shape}")
            per_output.append(np.max(np.abs(got[name].astype(np.float64) - expected)))
        diffs.append(float(np.max(per_output)))  # np.max, not max(): a NaN must propagate
    return diffs


def require_close(diffs: Sequence[float], atol: float) -> float:
    """The overall max difference, or an error when it is above atol or not a number at all."""
    worst = float(np.max(diffs))
    if not np.isfinite(worst) or worst > atol:
        raise ValidationError(f"ONNX Runtime and the source model differ by up to {worst:.3g} (max abs), above atol {atol:g}")
    return worst


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def provenance(*modules) -> dict:
    """How an export was made, for its export.json: the exporter, and the version of each package that made or
    checked it."""
    return {"exporter": "torch.onnx.export(dynamo=True)", "versions": {m.__name__: m.__version__ for m in modules}}
