"""The requantizing store of the int8 kernels at its edges: scaled values far outside the
output type (above 2^31 before the cap), relu bounds, both output types."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ember.testing import build_model, run_onnx_compiled, run_onnxruntime

pytestmark = pytest.mark.cc
#: each test draws from its own generator of this seed: a module-level one gave each test
#: data that depended on which tests ran before it in the same worker (pytest -n), and the
#: bitwise comparison with onnxruntime then flaked on a draw that lands on a rounding edge
SEED = 3


def _requantized(
    linear: list,
    x_shape: tuple[int, ...],
    w: np.ndarray,
    y_dtype: str,
    y_scale: float,
    rng: np.random.Generator,
) -> tuple:
    """QuantizeLinear -> DequantizeLinear -> ``linear`` (nodes from ``xd``, ``wd`` to
    ``last``) -> QuantizeLinear to ``y_dtype`` at ``y_scale``; the model and its feeds."""
    yz = np.asarray(-20 if y_dtype == "int8" else 30, y_dtype)
    inits = {"w": w, "w_s": np.float32(0.01), "w_z": np.int8(0)}
    inits |= {"x_s": np.float32(0.02), "x_z": np.uint8(120), "y_s": np.float32(y_scale)}
    inits["y_z"] = yz
    nodes = [
        helper.make_node("QuantizeLinear", ["xf", "x_s", "x_z"], ["x"]),
        helper.make_node("DequantizeLinear", ["x", "x_s", "x_z"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "w_s", "w_z"], ["wd"]),
        *linear,
        helper.make_node("QuantizeLinear", [linear[-1].output[0], "y_s", "y_z"], ["y"]),
    ]
    model = build_model(nodes, {"xf": ("float32", x_shape)}, ["y"], inits, opset=17)
    return model, {"xf": rng.standard_normal(x_shape).astype(np.float32) * 2}


@pytest.mark.parametrize("y_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("y_scale", [1e-12, 1e-3, 0.05])
@pytest.mark.parametrize("relu", [False, True])
def test_requantize_saturates(y_dtype: str, y_scale: float, relu: bool) -> None:
    """QDQ MatMul whose multiplier s_x * s_w / s_y is up to 1e10: products of either sign
    saturate to the type's bounds (equal to onnxruntime's output)."""
    rng = np.random.default_rng(SEED)
    w = rng.integers(-64, 64, (24, 20)).astype(np.int8)
    linear = [helper.make_node("MatMul", ["xd", "wd"], ["mm"])]
    if relu:
        linear.append(helper.make_node("Relu", ["mm"], ["r"]))
    model, feeds = _requantized(linear, (5, 24), w, y_dtype, y_scale, rng)
    got = run_onnx_compiled(model, feeds)[0]
    np.testing.assert_array_equal(got, run_onnxruntime(model, feeds)[0])


@pytest.mark.parametrize("y_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("y_scale", [1e-12, 0.0473])  # 0.0473: no exact ties of the rounding
@pytest.mark.parametrize("depthwise,m,c", [(False, 6, 24), (False, 10, 128), (True, 24, 24)])
def test_conv_requantize_caps_only_where_it_can_bind(
    y_dtype: str, y_scale: float, depthwise: bool, m: int, c: int
) -> None:
    """The conv's and the depthwise conv's stores drop the 2^30 cap when the accumulator's
    bound (|bias| + 255 * the weights' magnitudes) times the multiplier stays below it
    (y_scale 0.0473) and keep it otherwise (1e-12: products of either sign far above 2^31
    saturate): onnxruntime's bytes either way; the conv with full and half tiles, rows in
    pairs and a last single row (6 output channels, 7 x 7 positions); with 128 input
    channels (AVX-512: 8-row tiles, each row's panels requantized in one masked store) 10
    output channels, an 8-row block and a 2-row one."""
    rng = np.random.default_rng(SEED)
    if depthwise:
        w = rng.integers(-64, 64, (24, 1, 3, 3)).astype(np.int8)
        conv = helper.make_node("Conv", ["xd", "wd"], ["c"], group=24, pads=[1, 1, 1, 1])
    else:
        w = rng.integers(-64, 64, (m, c, 1, 1)).astype(np.int8)
        conv = helper.make_node("Conv", ["xd", "wd"], ["c"])
    linear = [conv]
    model, feeds = _requantized(linear, (1, c, 7, 7), w, y_dtype, y_scale, rng)
    got = run_onnx_compiled(model, feeds)[0]
    np.testing.assert_array_equal(got, run_onnxruntime(model, feeds)[0])
