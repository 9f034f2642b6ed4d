"""Faster CPU graphs from an exported FP32 ONNX graph: operator fusion and dynamic INT8 quantization.

Both come from well-kept libraries, not from hand-written graph surgery:

- `fuse`: onnxscript's ONNX Runtime fusions, written for graphs of torch's dynamo exporter. They
  turn each layer's attention subgraph into one `Attention` node and fuse layer norm with its
  residual add and GELU with its bias (`com.microsoft` contrib ops, which ONNX Runtime's CPU and
  CUDA providers run; TensorRT does not, so the plain graph stays the GPU's input). ONNX Runtime's
  own online optimizer does not fuse attention on these graphs, which is where the time goes.
- `quantize_int8`: ONNX Runtime's dynamic quantization: weights stored as INT8 once, activations
  quantized per batch at run time, so there is no calibration set to ship.

Whether the result still computes what the source does is the caller's gate (export.text_model).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import onnx
import onnx_ir as ir
from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxscript.rewriter import ort_fusions


def external_data_name(path: Path, external: bool) -> str | None:
    return path.name + ".data" if external else None


def remove_graph(path: Path) -> None:
    """A graph file and its weights file, so that a stale variant cannot outlive a new export."""
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".data").unlink(missing_ok=True)


def fuse(source: Path, target: Path, external: bool = False) -> dict[str, int]:
    """Write the fused graph to `target`; returns how many of each fusion applied (zeros dropped)."""
    model = ir.load(str(source))
    _, counts = ort_fusions.optimize_for_ort(model)
    remove_graph(target)
    ir.save(model, str(target), external_data=external_data_name(target, external))
    return {name: count for name, count in counts.items() if count}


# ONNX Runtime's dynamic INT8 weight formats, fastest first on x86: signed weights with unsigned activations is the
# pairing its AVX2 and AVX-512 VNNI kernels are built for; unsigned weights avoid their saturation (below).
WEIGHT_FORMATS = {"s8": QuantType.QInt8, "u8": QuantType.QUInt8}


def quantize_int8(source: Path, target: Path, external: bool = False, weights: str = "s8") -> dict[str, int]:
    """Write the dynamically quantized graph to `target`; returns its count of integer matmul ops.

    `weights` "s8" is the fast format, but without VNNI the AVX2 kernel adds pairs of u8 x s8 products in
    16 bits, which full-range weights can overflow, so its accuracy depends on the CPU it runs on; "u8"
    does not saturate and is slower there. The caller gates each on the CPU it exports on (export.text_model).
    """
    remove_graph(target)
    quantize_dynamic(str(source), str(target), weight_type=WEIGHT_FORMATS[weights], use_external_data_format=external)
    ops = Counter(node.op_type for node in onnx.load(str(target), load_external_data=False).graph.node)
    return {op: n for op, n in ops.items() if op in ("DynamicQuantizeMatMul", "MatMulInteger", "QAttention")}
