"""Small models and helpers shared by the runtime-side security tests."""

from __future__ import annotations

import numpy as np
import pytest


def relu_add_model(scale: float = 1.0, combine: str = "Add") -> object:
    """y = relu(x) + scale * x on float32[2, 3]: a small model every runtime test can build
    (``combine="Sub"``: relu(x) - scale * x, another library of the same interface)."""
    onnx = pytest.importorskip("onnx")
    helper, tp = onnx.helper, onnx.TensorProto
    k = onnx.numpy_helper.from_array(np.full((2, 3), scale, np.float32), "k")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Mul", ["x", "k"], ["m"]),
        helper.make_node(combine, ["r", "m"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "relu_add",
        [helper.make_tensor_value_info("x", tp.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", tp.FLOAT, [2, 3])],
        initializer=[k],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def reference(x: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """What relu_add_model computes."""
    return np.maximum(x, 0) + np.float32(scale) * x
