"""Regression: ONNX Tile computed wrong values on llvm when LLVM's unroller was off."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from ember.testing import run_onnx_compiled

pytest.importorskip("llvmlite")


@pytest.mark.parametrize("target", ["llvm", "llvmjit"])
def test_tile_of_a_4d_tensor_matches_numpy(target: str) -> None:
    """pytorch-operator test_operator_repeat's shape: (1, 2, 3, 4) tiled (1, 2, 3, 4)."""
    reps = helper.make_tensor("reps", TensorProto.INT64, [4], [1, 2, 3, 4])
    graph = helper.make_graph(
        [helper.make_node("Tile", ["x", "reps"], ["y"])],
        "tile",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 9, 16])],
        [reps],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 4)).astype(np.float32)
    got = run_onnx_compiled(model, {"x": x}, target=target)[0]
    np.testing.assert_array_equal(got, np.tile(x, (1, 2, 3, 4)))
