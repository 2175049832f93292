"""Quantization handlers against onnxruntime: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, ConvInteger, MatMulInteger, QLinearConv and QLinearMatMul.

Integer outputs must be equal: ember computes the same int32 accumulators and the same
float32 requantization (multiply, round half to even, saturate) as onnxruntime.
"""

from __future__ import annotations

import numpy as np
import pytest

try:  # a package when tests/ has __init__ files, plain modules otherwise
    from .nn_check import check_node, rand
except ImportError:
    from nn_check import check_node, rand  # type: ignore[no-redef]

EXACT = (0.0, 0.0)


def _q(shape, dtype, seed=0) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, shape).astype(dtype)


def _w(shape, dtype, seed=1) -> np.ndarray:
    """int8 weights in [-64, 63] (7 bits, what ``reduce_range`` gives): onnxruntime's AVX2
    u8s8 kernel sums pairs of u8*s8 products in int16 with saturation (vpmaddubsw), which
    full-range weights overflow; its results are then not the exact ones ember computes."""
    if dtype != "int8":
        return _q(shape, dtype, seed)
    return np.random.default_rng(seed).integers(-64, 64, shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16"])
def test_quantize_linear_per_tensor(dtype: str) -> None:
    x = rand((2, 3, 5)) * 50
    x.flat[:4] = [0.25, 0.75, -0.25, 1e6]  # ties of scale 0.5 and saturation
    params = {"s": np.asarray(0.5, np.float32), "z": np.asarray(2, dtype)}
    check_node("QuantizeLinear", {"x": x}, None, params, opset=21, tol=EXACT)


def test_quantize_linear_per_axis_and_default_zero_point() -> None:
    x = rand((2, 3, 4)) * 10
    params = {"s": np.array([0.1, 0.2, 0.05], np.float32), "z": np.array([0, 5, -4], np.int8)}
    check_node("QuantizeLinear", {"x": x}, {"axis": 1}, params, opset=13, tol=EXACT)
    check_node("QuantizeLinear", {"x": x}, None, {"s": np.float32(0.1)}, opset=13, tol=EXACT)


def test_dequantize_linear_per_axis() -> None:
    q = _q((2, 4, 3), "uint8")
    params = {"s": np.array([0.1, 0.2, 0.05], np.float32), "z": np.array([0, 5, 200], np.uint8)}
    check_node("DequantizeLinear", {"q": q}, {"axis": -1}, params, opset=13)


def test_dynamic_quantize_linear() -> None:
    check_node("DynamicQuantizeLinear", {"x": rand((3, 7)) + 0.3}, outputs=3, tol=(1e-6, 0))


@pytest.mark.parametrize("xdt,wdt", [("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8")])
def test_qlinear_conv_per_channel(xdt: str, wdt: str) -> None:
    x, w = _q((1, 8, 9, 9), xdt), _w((6, 8, 3, 3), wdt)
    params = {
        "xs": np.float32(0.02), "xz": np.asarray(7, xdt), "w": w,
        "ws": (np.arange(6, dtype=np.float32) + 1) * 1e-3, "wz": np.zeros(6, wdt),
        "ys": np.float32(0.6), "yz": np.asarray(3, xdt),
        "b": np.arange(-300, 300, 100, dtype=np.int32),
    }  # fmt: skip
    order = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"]
    attrs = {"pads": [1, 1, 1, 1], "strides": [2, 1]}
    check_node("QLinearConv", {"x": x}, attrs, params, input_order=order, tol=EXACT)


def test_qlinear_conv_depthwise() -> None:
    x, w = _q((1, 8, 7, 7), "uint8"), _w((8, 1, 3, 3), "int8")
    params = {
        "xs": np.float32(0.05), "xz": np.uint8(128), "w": w, "ws": np.float32(0.01),
        "wz": np.int8(0), "ys": np.float32(0.3), "yz": np.uint8(10),
    }  # fmt: skip
    order = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    check_node("QLinearConv", {"x": x}, {"group": 8, "pads": [1] * 4}, params,
               input_order=order, tol=EXACT)  # fmt: skip


def test_qlinear_matmul() -> None:
    a, b = _q((2, 5, 16), "int8"), _w((16, 7), "int8")
    params = {
        "as": np.float32(0.03), "az": np.int8(-2), "b": b, "bs": np.float32(0.004),
        "bz": np.int8(0), "ys": np.float32(0.5), "yz": np.int8(1),
    }  # fmt: skip
    order = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
    check_node("QLinearMatMul", {"a": a}, None, params, input_order=order, tol=EXACT)


def test_conv_and_matmul_integer() -> None:
    x, w = _q((1, 3, 6, 6), "uint8"), _q((4, 3, 3, 3), "uint8", seed=1)
    params = {"w": w, "xz": np.uint8(100), "wz": np.uint8(3)}
    order = ["x", "w", "xz", "wz"]
    check_node("ConvInteger", {"x": x}, {"pads": [1] * 4}, params, input_order=order, tol=EXACT)
    a, b = _q((4, 8), "uint8"), _w((8, 5), "int8", seed=2)
    params = {"b": b, "az": np.uint8(12), "bz": np.int8(-1)}
    order = ["a", "b", "az", "bz"]
    check_node("MatMulInteger", {"a": a}, None, params, input_order=order, tol=EXACT)
