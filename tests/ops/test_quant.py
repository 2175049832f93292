"""quantize/dequantize computes, lowered and interpreted, against the graph-IR references:
ties round half to even, out-of-range values saturate, per-axis parameters broadcast."""

import numpy as np
import pytest

from ember import tir
from ember.ir import Attrs, Function, TensorType, Var, call, const, evaluate
from ember.ir.ops.nn_conv_weights import pack_conv_weight
from ember.lowering.lower_group import lower_group


def _run(body, params, xs) -> tuple[np.ndarray, np.ndarray]:
    func = Function(tuple(params), body, Attrs({"Primitive": 1}))
    (ref,) = evaluate(Function(func.params, func.body), xs)
    prim = lower_group(func, "kernel")
    tir.verify(prim)
    out = np.zeros(ref.shape, ref.dtype)
    tir.interpret(prim, [np.array(x, order="C") for x in xs] + [out])
    return out, ref


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16"])
def test_quantize_ties_and_saturation(dtype: str) -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e9, -1e9, 3.49, 0.0], np.float32)
    v = Var("x", TensorType(x.shape, "float32"))
    zp = const(np.asarray(3, dtype))
    out, ref = _run(call("quantize", v, const(np.float32(0.5)), zp, dtype=dtype), [v], [x])
    info = np.iinfo(dtype)
    want = np.clip(np.rint(x.astype(np.float64) / 0.5) + 3, info.min, info.max).astype(dtype)
    np.testing.assert_array_equal(ref, want)
    np.testing.assert_array_equal(out, ref)
    # a tie: 1.25 / 0.5 = 2.5 rounds to 2, 1.75 / 0.5 = 3.5 to 4
    assert want[0] == 4 and want[1] == 6 and want[2] == 8


def test_per_axis_quantize_dequantize() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32) * 4
    scale = np.array([0.1, 0.02, 0.5], np.float32).reshape(3, 1)
    zp = np.array([-3, 0, 7], np.int8).reshape(3, 1)
    v = Var("x", TensorType(x.shape, "float32"))
    vs = Var("s", TensorType(scale.shape, "float32"))
    vz = Var("z", TensorType(zp.shape, "int8"))
    q = call("quantize", v, vs, vz, dtype="int8")
    out, ref = _run(q, [v, vs, vz], [x, scale, zp])
    np.testing.assert_array_equal(out, ref)
    vq = Var("q", TensorType(x.shape, "int8"))
    out, ref = _run(call("dequantize", vq, vs, vz), [vq, vs, vz], [ref, scale, zp])
    np.testing.assert_array_equal(out, ref)
    inside = np.abs(x) < 127 * scale - 8 * scale  # away from saturation
    np.testing.assert_allclose(ref[inside], x[inside], atol=0.25 + 1e-6)


def test_dequantize_int32() -> None:
    x = np.array([-(2**31), -5, 0, 7, 2**31 - 1], np.int32)
    v = Var("x", TensorType(x.shape, "int32"))
    body = call("dequantize", v, const(np.float32(0.25)), const(np.int32(0)))
    out, ref = _run(body, [v], [x])
    np.testing.assert_array_equal(out, ref)
    assert ref[1] == -1.25


def test_quantized_add_broadcasts_and_saturates() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (2, 3, 4)).astype(np.uint8)
    b = rng.integers(0, 256, (3, 1)).astype(np.uint8)
    va, vb = Var("a", TensorType(a.shape, "uint8")), Var("b", TensorType(b.shape, "uint8"))
    attrs = {"ratio_a": 0.7, "ratio_b": 1.3, "fixed": -120.25, "dtype": "uint8"}
    out, ref = _run(call("quantized_add", va, vb, **attrs), [va, vb], [a, b])
    np.testing.assert_array_equal(out, ref)
    want = np.clip(np.rint(a * np.float32(0.7) + (b * np.float32(1.3) - 120.25)), 0, 255)
    assert np.mean(ref == want) > 0.95 and ref.min() == 0


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_quantized_mul_broadcasts_and_saturates(dtype: str) -> None:
    """The compiled kernel equals the reference: the integer product times the ratio, plus
    the zero point, each in float32 (no FMA), rounded half to even and saturated."""
    rng = np.random.default_rng(4)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, (2, 3, 40)).astype(dtype)
    b = rng.integers(info.min, info.max + 1, (3, 1)).astype(dtype)
    va, vb = Var("a", TensorType(a.shape, dtype)), Var("b", TensorType(b.shape, dtype))
    attrs = {"ratio": 0.05, "a_zero_point": 3, "b_zero_point": -2 if dtype == "int8" else 120,
             "zero_point": 5, "dtype": dtype}  # fmt: skip
    out, ref = _run(call("quantized_mul", va, vb, **attrs), [va, vb], [a, b])
    np.testing.assert_array_equal(out, ref)
    assert ref.min() == info.min and ref.max() == info.max  # saturated both ways


@pytest.mark.parametrize("pads,strides", [((1, 1, 1, 1), (1, 1)), ((0, 0, 0, 0), (2, 1))])
def test_quantized_conv_packed(pads: tuple, strides: tuple) -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (1, 3, 6, 5)).astype(np.uint8)
    w = rng.integers(-128, 128, (8, 3, 3, 3)).astype(np.int32)
    wp = pack_conv_weight(w, 8)
    vx, vw = Var("x", TensorType(x.shape, "uint8")), Var("w", TensorType(wp.shape, "int32"))
    attrs = {"strides": strides, "padding": pads, "dilation": (1, 1), "channels": 8}
    body = call("quantized_conv_packed", vx, vw, x_zero_point=100, **attrs)
    out, ref = _run(body, [vx, vw], [x, wp])
    np.testing.assert_array_equal(out, ref)
    (plain,) = evaluate(
        Function((vx,), call("nn.conv", call("subtract", call("cast", vx, dtype="int32"),
             const(np.int32(100))), const(w.astype(np.int32)), strides=strides, padding=pads,
             dilation=(1, 1), groups=1)), [x])  # fmt: skip
    np.testing.assert_array_equal(ref, plain)
