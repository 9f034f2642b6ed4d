"""Small ONNX graphs of shapes the kit was not written around, built with onnx.helper from a fixed seed: what a
user of the `onnx` task brings (tests add them with `kit add` only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def weights(rng: np.random.Generator, name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def save(nodes, inputs, outputs, initializers, path: Path) -> Path:
    graph = helper.make_graph(nodes, path.stem, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def mlp(path: Path, seed: int = 0) -> Path:
    """features [batch, 8] FP32 -> probs [batch, 4]: two dense layers and a softmax."""
    rng = np.random.default_rng(seed)
    nodes = [
        helper.make_node("Gemm", ["features", "w1", "b1"], ["hidden"]),
        helper.make_node("Relu", ["hidden"], ["active"]),
        helper.make_node("Gemm", ["active", "w2", "b2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    return save(
        nodes,
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 4])],
        [weights(rng, "w1", 8, 16), weights(rng, "b1", 16), weights(rng, "w2", 16, 4), weights(rng, "b2", 4)],
        path,
    )


def pooled_embeddings(path: Path, seed: int = 1) -> Path:
    """ids [batch, length] INT64 and mask [batch, length] FP32 -> the masked mean of the ids' embeddings
    [batch, 6] and the count of unmasked positions [batch]: two inputs, a free axis, and an output without dims."""
    rng = np.random.default_rng(seed)
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["embedded"]),
        helper.make_node("Unsqueeze", ["mask", "minus_one"], ["mask3"]),
        helper.make_node("Mul", ["embedded", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axes"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["mask", "axes"], ["count"], keepdims=0),
        helper.make_node("Max", ["count", "one"], ["safe"]),
        helper.make_node("Unsqueeze", ["safe", "minus_one"], ["safe2"]),
        helper.make_node("Div", ["summed", "safe2"], ["pooled"]),
    ]
    constants = [
        weights(rng, "table", 10, 6),
        axes,
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus_one"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
    ]
    return save(
        nodes,
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "length"]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "length"]),
        ],
        [
            helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", 6]),
            helper.make_tensor_value_info("count", TensorProto.FLOAT, ["batch"]),
        ],
        constants,
        path,
    )


def fixed_batch(path: Path) -> Path:
    """features [1, 8] -> doubled [1, 8]: a graph exported without a batch axis."""
    nodes = [helper.make_node("Add", ["features", "features"], ["doubled"])]
    return save(
        nodes,
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("doubled", TensorProto.FLOAT, [1, 8])],
        [],
        path,
    )


def mixing_rows(path: Path) -> Path:
    """features [batch, 4] -> centred [batch, 4]: each row minus the batch's mean, so rows change each other."""
    nodes = [
        helper.make_node("ReduceMean", ["features"], ["mean"], axes=[0], keepdims=1),
        helper.make_node("Sub", ["features", "mean"], ["centred"]),
    ]
    return save(
        nodes,
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("centred", TensorProto.FLOAT, ["batch", 4])],
        [],
        path,
    )
