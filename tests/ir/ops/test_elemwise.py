"""Elementwise and broadcasting ops: type rules, error messages and numpy references."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import Constant, OpPattern, TensorType, Var, call, evaluate_expr, get_op
from ember.ir.ops.common import broadcast_shapes, trunc_divide


def run(op: str, *arrays: np.ndarray, **attrs: object) -> np.ndarray:
    """Evaluate ``op`` on constant inputs through the evaluator (which checks the type)."""
    return evaluate_expr(call(op, *[Constant(a) for a in arrays], **attrs), {})


def var(shape: tuple[int, ...], dtype: str = "float32") -> Var:
    return Var("x", TensorType(shape, dtype))


RNG = np.random.default_rng(0)
X32 = RNG.standard_normal((3, 4)).astype(np.float32) * 3


@pytest.mark.parametrize(
    ("op", "expect"),
    [
        ("relu", lambda x: np.maximum(x, 0)),
        ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
        ("tanh", np.tanh),
        ("softplus", lambda x: np.log1p(np.exp(x))),
        ("hard_swish", lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
        ("erf", lambda x: np.vectorize(math.erf)(x)),
        ("exp", np.exp),
        ("negative", np.negative),
        ("abs", np.abs),
        ("floor", np.floor),
        ("round", np.rint),
        ("sign", np.sign),
    ],
)
def test_unary_float32(op: str, expect: object) -> None:
    out = run(op, X32)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expect(X32.astype(np.float64)), rtol=1e-5, atol=1e-6)  # type: ignore[operator]
    assert get_op(op).pattern == OpPattern.ELEMWISE


def test_unary_attrs() -> None:
    x = X32
    np.testing.assert_allclose(run("leaky_relu", x, alpha=0.1), np.where(x >= 0, x, 0.1 * x))
    np.testing.assert_allclose(
        run("elu", x, alpha=2.0), np.where(x > 0, x, 2 * np.expm1(x)), rtol=1e-6
    )
    np.testing.assert_allclose(
        run("hard_sigmoid", x, alpha=0.3, beta=0.4), np.clip(0.3 * x + 0.4, 0, 1), rtol=1e-6
    )
    exact = run("gelu", x)
    approx = run("gelu", x, approximate="tanh")
    ref = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    np.testing.assert_allclose(exact, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(approx, ref, atol=1e-3)
    assert not np.array_equal(exact, approx)


def test_half_precision_is_rounded_once() -> None:
    x = np.linspace(-4, 4, 17).astype(np.float16)
    out = run("sigmoid", x)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float16))


def test_float_only_ops_reject_integers() -> None:
    with pytest.raises(IRError, match="input of 'sigmoid' has dtype int32; expected one of"):
        call("sigmoid", var((2,), "int32"))
    assert call("relu", var((2,), "int32")).type == TensorType((2,), "int32")


def test_clip_bounds_and_integers() -> None:
    x = np.arange(-5, 5, dtype=np.int32)
    np.testing.assert_array_equal(run("clip", x, a_min=-2.0, a_max=3.0), np.clip(x, -2, 3))
    np.testing.assert_array_equal(run("clip", x, a_min=-2.0), np.maximum(x, -2))
    f = X32
    np.testing.assert_array_equal(run("clip", f, a_min=1.0, a_max=0.0), np.zeros_like(f))
    big = np.array([0, 100], np.int8)
    np.testing.assert_array_equal(run("clip", big, a_max=1e9), big)


def test_cast() -> None:
    x = np.array([-1.7, -0.5, 0.0, 2.9], np.float32)
    np.testing.assert_array_equal(run("cast", x, dtype="int32"), [-1, 0, 0, 2])
    np.testing.assert_array_equal(run("cast", x, dtype="bool"), [True, True, False, True])
    assert run("cast", x, dtype="bfloat16").dtype.name == "bfloat16"
    with pytest.raises(IRError, match="unknown dtype"):
        call("cast", var((2,)), dtype="complex7")


def test_predicates() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    np.testing.assert_array_equal(run("isnan", x), [True, False, False, False])
    np.testing.assert_array_equal(run("isinf", x), [False, True, True, False])
    np.testing.assert_array_equal(run("isinf", x, detect_negative=False), [0, 1, 0, 0])
    np.testing.assert_array_equal(run("logical_not", np.array([True, False])), [False, True])


def test_broadcast_shapes_and_message() -> None:
    assert broadcast_shapes((2, 1, 3), (4, 1)) == (2, 4, 3)
    assert broadcast_shapes((), (5,)) == (5,)
    with pytest.raises(IRError, match=r"op 'add'.*cannot broadcast shapes \(2, 3\) and \(4,\)"):
        call("add", var((2, 3)), var((4,)))


def test_binary_dtype_mismatch_message() -> None:
    with pytest.raises(IRError, match="same dtype, got float32, int32; insert a cast"):
        call("multiply", var((2,)), var((2,), "int32"))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8"])
def test_arithmetic(dtype: str) -> None:
    a = (RNG.integers(1, 9, (2, 3, 4)) * (1 if dtype == "uint8" else 3)).astype(dtype)
    b = RNG.integers(1, 5, (3, 1)).astype(dtype)
    assert run("add", a, b).dtype == np.dtype(dtype)
    np.testing.assert_array_equal(run("add", a, b), a + b)
    np.testing.assert_array_equal(run("subtract", a, b), (a - b).astype(dtype))
    np.testing.assert_array_equal(run("multiply", a, b), a * b)
    np.testing.assert_array_equal(run("maximum", a, b), np.maximum(a, b))
    if dtype.startswith("float"):
        np.testing.assert_allclose(run("divide", a, b), a / b)


def test_integer_divide_truncates_toward_zero() -> None:
    a = np.array([7, -7, 7, -7, 6], np.int32)
    b = np.array([2, 2, -2, -2, 3], np.int32)
    np.testing.assert_array_equal(run("divide", a, b), [3, -3, -3, 3, 2])
    np.testing.assert_array_equal(trunc_divide(np.int64(5), np.int64(0)), 0)


def test_power_mixed_dtypes() -> None:
    base = np.array([1.5, 2.0, 3.0], np.float32)
    exp = np.array([2, 3, -1], np.int64)
    out = run("power", base, exp)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [2.25, 8.0, 1 / 3], rtol=1e-6)
    ib = np.array([2, 3, 4], np.int32)
    np.testing.assert_array_equal(run("power", ib, np.array([3, 2, 0], np.int32)), [8, 9, 1])
    np.testing.assert_array_equal(run("power", ib, np.array([-1.0, 0.5, 2.0])), [0, 1, 16])


def test_comparisons_and_logic() -> None:
    a = np.array([[1, 2, 3]], np.int64)
    b = np.array([[2], [1]], np.int64)
    for op, fn in [("equal", np.equal), ("less", np.less), ("greater_equal", np.greater_equal)]:
        out = run(op, a, b)
        assert out.dtype == np.bool_ and out.shape == (2, 3)
        np.testing.assert_array_equal(out, fn(a, b))
    t = np.array([True, False])
    np.testing.assert_array_equal(run("logical_and", t, t[::-1].copy()), [False, False])
    np.testing.assert_array_equal(run("logical_or", t, np.array(True)), [True, True])
    with pytest.raises(IRError, match="lhs of 'logical_and' has dtype float32"):
        call("logical_and", var((2,)), var((2,)))


def test_prelu_and_where() -> None:
    x = X32
    slope = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    np.testing.assert_allclose(run("prelu", x, slope), np.where(x < 0, x * slope, x))
    with pytest.raises(IRError, match="must broadcast to the data shape"):
        call("prelu", var((4,)), var((3, 4)))
    cond = x > 0
    y = run("where", cond, x, np.float32(-1))
    np.testing.assert_array_equal(y, np.where(cond, x, -1))
    with pytest.raises(IRError, match="condition of 'where' has dtype float32"):
        call("where", var((2,)), var((2,)), var((2,)))


def test_mod_signs() -> None:
    a = np.array([7, -7, 7, -7, 5], np.int32)
    b = np.array([3, 3, -3, -3, 0], np.int32)
    np.testing.assert_array_equal(run("mod", a, b), [1, 2, -2, -1, 0])
    np.testing.assert_array_equal(run("mod", a, b, fmod=True), [1, -1, 1, -1, 0])
    f = np.array([5.5, -5.5], np.float32)
    np.testing.assert_allclose(run("mod", f, np.float32(2.0), fmod=True), [1.5, -1.5])
    np.testing.assert_allclose(run("mod", f, np.float32(2.0)), [1.5, 0.5])


def test_bitwise() -> None:
    a = np.array([0b1100, 0b1010], np.uint8)
    b = np.array([0b1010, 1], np.uint8)
    np.testing.assert_array_equal(run("bitwise_and", a, b), [0b1000, 0])
    np.testing.assert_array_equal(run("bitwise_xor", a, b), [0b0110, 0b1011])
    np.testing.assert_array_equal(run("left_shift", a, b), [0b1100 << 10 & 0xFF, 0b10100])
    np.testing.assert_array_equal(run("right_shift", a, b), [0, 0b101])
    np.testing.assert_array_equal(run("bitwise_not", a), [0b11110011, 0b11110101])
    with pytest.raises(IRError, match="lhs of 'bitwise_or' has dtype float32"):
        call("bitwise_or", var((2,)), var((2,)))
