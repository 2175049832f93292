"""Small ONNX models for the names, profile and package tests (imported by plain name)."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def two_output_model() -> onnx.ModelProto:
    """Conv+Relu feeding two named outputs, every node named."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype("float32"), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv_a", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu_a"),
        helper.make_node("Sigmoid", ["r"], ["probs"], name="sig_a"),
        helper.make_node("GlobalAveragePool", ["r"], ["pooled"], name="gap_a"),
    ]
    graph = helper.make_graph(
        nodes,
        "two_out",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 4, 8, 8]),
            helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, 4, 1, 1]),
        ],
        [w, b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
