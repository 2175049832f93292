"""The int8 kernel of dynamically quantized matrix products (``quantized_matmul_integer_int8``,
MatMulInteger with a run-time data zero point) against onnxruntime, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ember.frontend import from_onnx
from ember.ir import Call, post_order
from ember.testing import build_model, run_onnx_compiled, run_onnx_reference, run_onnxruntime
from ember.transform import PassContext, optimize

pytestmark = pytest.mark.cc
RNG_SEED = 11  # every test draws from a fresh RNG of this seed (tests/ops/conftest.py)
RNG = np.random.default_rng(RNG_SEED)
#: a CPU without AVX2 (x86-64-v2: SSE4.2): the portable C loops
PORTABLE = "c -mcpu=x86-64-v2"
OP = "quantized_matmul_integer_int8"
OP_CONV = "quantized_conv_integer_int8"


def _ops(model) -> set[str]:
    mod, params = from_onnx(model)
    body = optimize(mod, params, ctx=PassContext(opt_level=2)).main.body
    return {n.op.name for n in post_order(body) if isinstance(n, Call) and hasattr(n.op, "name")}


def _check(model, feeds, want: np.ndarray | None = None, used: bool = True) -> None:
    """The int8 kernel is ``used`` (or not); ember (AVX2 and portable C) equals ``want``
    (default: onnxruntime)."""
    assert (OP in _ops(model)) == used
    want = run_onnxruntime(model, feeds)[0] if want is None else want
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds)[0], want)
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds, target=PORTABLE)[0], want)


@pytest.mark.parametrize("shape,n", [((2, 5, 13), 19), ((64, 48), 32), ((7,), 3)])
def test_dynamic_quantize_matmul_integer(shape: tuple[int, ...], n: int) -> None:
    """DynamicQuantizeLinear -> MatMulInteger (weight zero point 0) -> Cast -> Mul, as
    quantize_dynamic writes it: rows and N not multiples of 4 and 16, 1-D data."""
    k = shape[-1]
    inits = {"w": RNG.integers(-64, 64, (k, n)).astype(np.int8), "wz": np.int8(0)}
    inits["ws"] = np.float32(3e-3)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node("MatMulInteger", ["xq", "w", "xz", "wz"], ["acc"]),
        helper.make_node("Cast", ["acc"], ["accf"], to=1),
        helper.make_node("Mul", ["xs", "ws"], ["s"]),
        helper.make_node("Mul", ["accf", "s"], ["y"]),
    ]
    model = build_model(nodes, {"x": ("float32", shape)}, ["acc", "y"], inits, opset=13)
    _check(model, {"x": RNG.standard_normal(shape).astype(np.float32) * 3})


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_matmul_integer_zero_points(dtype: str) -> None:
    """8-bit data with a zero point input, a uint8 weight with a constant per-column zero
    point (subtracted at build time, the column sums corrected)."""
    lo, hi = (-128, 128) if dtype == "int8" else (0, 256)
    n = 21
    inits = {"w": RNG.integers(70, 186, (30, n)).astype(np.uint8)}
    inits["wz"] = RNG.integers(120, 136, n).astype(np.uint8)
    node = helper.make_node("MatMulInteger", ["x", "w", "xz", "wz"], ["y"])
    model = build_model([node], {"x": (dtype, (3, 30)), "xz": (dtype, ())}, ["y"], inits, 13)
    x = RNG.integers(lo, hi, (3, 30)).astype(dtype)
    _check(model, {"x": x, "xz": np.asarray(-9 if dtype == "int8" else 140, dtype)})


def test_matmul_integer_full_range_weight_stays_int32() -> None:
    """Full 8-bit weights could saturate vpmaddubsw's pair sums: the exact int32 path
    (onnxruntime's AVX2 u8s8 kernel saturates here, so numpy is the reference)."""
    w = np.full((8, 16), -128, np.int8)
    node = helper.make_node("MatMulInteger", ["x", "w"], ["y"])
    model = build_model([node], {"x": ("uint8", (4, 8))}, ["y"], {"w": w}, 13)
    x = RNG.integers(0, 256, (4, 8)).astype(np.uint8)
    _check(model, {"x": x}, x.astype(np.int32) @ w.astype(np.int32), used=False)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize(
    "kernel,strides,pads,shape",
    [((3, 3), (1, 1), (1, 1, 1, 1), (1, 5, 9, 11)), ((3, 3), (2, 2), (1, 0, 1, 2), (2, 6, 13, 10)),
     ((1, 1), (1, 1), (0, 0, 0, 0), (1, 7, 7, 7)), ((1, 1), (2, 2), (0, 0, 0, 0), (1, 4, 9, 9))],
)  # fmt: skip
def test_conv_integer(dtype: str, kernel, strides, pads, shape) -> None:
    """ConvInteger with a zero point input (the padding), stride 1 and 2, 1x1 and 3x3,
    positions not a multiple of 16, channels not of 4."""
    lo, hi = (-128, 128) if dtype == "int8" else (0, 256)
    m = 6
    w = RNG.integers(-64, 64, (m, shape[1], *kernel)).astype(np.int8)
    node = helper.make_node(
        "ConvInteger", ["x", "w", "xz"], ["y"], strides=list(strides), pads=list(pads)
    )
    model = build_model([node], {"x": (dtype, shape), "xz": (dtype, ())}, ["y"], {"w": w}, 13)
    x = RNG.integers(lo, hi, shape).astype(dtype)
    feeds = {"x": x, "xz": np.asarray(-5 if dtype == "int8" else 133, dtype)}
    if OP_CONV not in _ops(model):
        raise AssertionError(f"{OP_CONV} not used")
    want = run_onnx_reference(model, feeds)[0]
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds)[0], want)
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds, target=PORTABLE)[0], want)


def test_grouped_conv_integer_runs_one_int8_call_a_group() -> None:
    """A 4-group 1x1 ConvInteger (ShuffleNet's, dynamically quantized) with 16 input
    channels a group: one int8 call a group on its channel slice, outputs concatenated."""
    shape, groups = (1, 64, 7, 9), 4
    w = RNG.integers(-64, 64, (24, 16, 1, 1)).astype(np.int8)
    node = helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], group=groups)
    model = build_model([node], {"x": ("uint8", shape), "xz": ("uint8", ())}, ["y"], {"w": w}, 13)
    mod, params = from_onnx(model)
    body = optimize(mod, params, ctx=PassContext(opt_level=2)).main.body
    ops = [n.op.name for n in post_order(body) if isinstance(n, Call) and hasattr(n.op, "name")]
    assert ops.count(OP_CONV) == groups and "nn.conv" not in ops, ops
    feeds = {"x": RNG.integers(0, 256, shape).astype(np.uint8), "xz": np.asarray(131, np.uint8)}
    want = run_onnx_reference(model, feeds)[0]
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds)[0], want)


def test_matmul_integer_constant_zero_point_stays_int32() -> None:
    """A constant (or absent) zero point: the int32 path (the kernel reads its zero point
    from memory; the lowering inlines constants as values)."""
    w = RNG.integers(-64, 64, (8, 16)).astype(np.int8)
    node = helper.make_node("MatMulInteger", ["x", "w", "xz"], ["y"])
    model = build_model([node], {"x": ("uint8", (4, 8))}, ["y"], {"w": w, "xz": np.uint8(3)}, 13)
    x = RNG.integers(0, 256, (4, 8)).astype(np.uint8)
    _check(model, {"x": x}, (x.astype(np.int32) - 3) @ w.astype(np.int32), used=False)
