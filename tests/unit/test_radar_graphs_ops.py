"""The RADAR limit counts the operators of the graph ONNX Runtime runs, at the level asked for."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from perf.workloads.radar_limit import operators_run


def test_counts_come_from_the_graph_optimised_at_that_level(tmp_path):
    # Identity elimination is one of ONNX Runtime's basic optimisations: with none, the Identity is run.
    weight = numpy_helper.from_array(np.ones((4, 4), dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("MatMul", ["y", "w"], ["z"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4])],
        [weight],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert operators_run(path, "none") == {"Identity": 1, "MatMul": 1}
    assert operators_run(path, "basic") == {"MatMul": 1}
