"""The requantizing store of the int8 kernels at its edges: scaled values far outside the
output type (above 2^31 before the cap), relu bounds, both output types."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ember.testing import build_model, run_onnx_compiled, run_onnxruntime

pytestmark = pytest.mark.cc
RNG = np.random.default_rng(3)


@pytest.mark.parametrize("y_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("y_scale", [1e-12, 1e-3, 0.05])
@pytest.mark.parametrize("relu", [False, True])
def test_requantize_saturates(y_dtype: str, y_scale: float, relu: bool) -> None:
    """QDQ MatMul whose multiplier s_x * s_w / s_y is up to 1e10: products of either sign
    saturate to the type's bounds (equal to onnxruntime's output)."""
    w = RNG.integers(-64, 64, (24, 20)).astype(np.int8)
    yz = np.asarray(-20 if y_dtype == "int8" else 30, y_dtype)
    inits = {"w": w, "w_s": np.float32(0.01), "w_z": np.int8(0)}
    inits |= {"x_s": np.float32(0.02), "x_z": np.uint8(120), "y_s": np.float32(y_scale)}
    inits["y_z"] = yz
    nodes = [
        helper.make_node("QuantizeLinear", ["xf", "x_s", "x_z"], ["x"]),
        helper.make_node("DequantizeLinear", ["x", "x_s", "x_z"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "w_s", "w_z"], ["wd"]),
        helper.make_node("MatMul", ["xd", "wd"], ["mm"]),
    ]
    last = "mm"
    if relu:
        nodes.append(helper.make_node("Relu", ["mm"], ["r"]))
        last = "r"
    nodes.append(helper.make_node("QuantizeLinear", [last, "y_s", "y_z"], ["y"]))
    model = build_model(nodes, {"xf": ("float32", (5, 24))}, ["y"], inits, opset=17)
    feeds = {"xf": RNG.standard_normal((5, 24)).astype(np.float32) * 2}
    got = run_onnx_compiled(model, feeds)[0]
    np.testing.assert_array_equal(got, run_onnxruntime(model, feeds)[0])
