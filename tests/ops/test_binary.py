"""Broadcasting binary computes (and where/prelu/power/mod), lowered and interpreted, against
the graph-IR numpy references."""

import numpy as np
import pytest

from ember import tir
from ember.ir import Attrs, Function, TensorType, Var, call, const, evaluate
from ember.lowering.lower_group import lower_group

SHAPE_PAIRS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 2))]


def _group(params, body) -> Function:
    return Function(tuple(params), body, Attrs({"Primitive": 1}))


def check(func: Function, xs: list[np.ndarray], rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Lower ``func``, interpret it and compare with the reference evaluator."""
    (ref,) = evaluate(Function(func.params, func.body), xs)
    prim = lower_group(func, "kernel")
    tir.verify(prim)
    out = np.zeros(ref.shape, ref.dtype)
    tir.interpret(prim, [np.array(x, order="C") for x in xs] + [out])
    assert out.dtype == ref.dtype
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)


def _binary(op: str, a: np.ndarray, b: np.ndarray, **attrs) -> None:
    va = Var("a", TensorType(a.shape, a.dtype.name))
    vb = Var("b", TensorType(b.shape, b.dtype.name))
    check(_group([va, vb], call(op, va, vb, **attrs)), [a, b])


def _ints(shape, dtype, lo=-20, hi=20, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


def _floats(shape, dtype="float32", seed=0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(dtype)


ARITH = ["add", "subtract", "multiply", "divide", "maximum", "minimum"]
COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]


@pytest.mark.parametrize("op", ARITH + COMPARE)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_broadcast(op, dtype):
    for k, (sa, sb) in enumerate(SHAPE_PAIRS):
        _binary(op, _floats(sa, dtype, k), _floats(sb, dtype, k + 10))


@pytest.mark.parametrize("op", ARITH + COMPARE + ["mod"])
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_integer_ops_truncate_and_divide_by_zero_gives_zero(op, dtype):
    lo = 0 if dtype == "uint8" else -20
    a = _ints((3, 5), dtype, lo, 20, 1)
    b = _ints((5,), dtype, lo, 20, 2)
    b[0] = 0
    _binary(op, a, b)
    if op == "mod":
        _binary(op, a, b, fmod=True)


@pytest.mark.parametrize("fmod", [True, False])
def test_float_mod(fmod):
    a, b = _floats((4, 4)), _floats((4, 4), seed=3)
    _binary("mod", a, b, fmod=fmod)
    # (the interpreter's fmod raises on an infinite dividend; the compiled test covers it)
    edge = np.array([1.0, -1.0, 0.0, -6.0, np.nan], "float32")
    _binary("mod", edge, np.array([np.inf, np.inf, 3.0, 3.0, 1.0], "float32"), fmod=fmod)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_signed_shifts_follow_numpy(dtype):
    bits = np.iinfo(dtype).bits
    a = np.array([-8, -1, 5, np.iinfo(dtype).min, 16, -3, 7], dtype)
    b = np.array([1, 1, 2, 1, bits - 1, bits, -1], dtype)
    _binary("right_shift", a, b)
    _binary("left_shift", a, b)


def test_maximum_minimum_propagate_nan():
    a = np.array([np.nan, 1.0, np.nan, -np.inf, 2.0], "float32")
    b = np.array([1.0, np.nan, np.nan, 0.0, np.inf], "float32")
    for op in ("maximum", "minimum", "equal", "not_equal", "less"):
        _binary(op, a, b)
        _binary(op, b, a)


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_logic(op):
    rng = np.random.default_rng(4)
    a = rng.integers(0, 2, (3, 4)).astype(bool)
    b = rng.integers(0, 2, (4,)).astype(bool)
    _binary(op, a, b)


@pytest.mark.parametrize("op", ["bitwise_and", "bitwise_or", "bitwise_xor"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint64"])
def test_bitwise(op, dtype):
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -1000), min(info.max, 1000)
    _binary(op, _ints((2, 5), dtype, lo, hi, 5), _ints((5,), dtype, lo, hi, 6))


@pytest.mark.parametrize("op", ["left_shift", "right_shift"])
@pytest.mark.parametrize("dtype", ["uint8", "uint32", "uint64"])
def test_shifts(op, dtype):
    a = _ints((2, 6), dtype, 0, 200, 7)
    b = np.array([0, 1, 3, 5, 7, 2], dtype)
    _binary(op, a, b)


@pytest.mark.parametrize(
    "a_dtype,b_dtype",
    [("float32", "float32"), ("float32", "int64"), ("float64", "float32"), ("int32", "int32")],
)
def test_power(a_dtype, b_dtype):
    if a_dtype.startswith("int"):
        a, b = _ints((3, 4), a_dtype, -5, 5, 1), _ints((4,), b_dtype, 0, 4, 2)
    else:
        a = np.abs(_floats((3, 4), a_dtype)) + 0.1
        b = _ints((4,), b_dtype, -3, 3, 2) if b_dtype.startswith("int") else _floats((4,), b_dtype)
    _binary("power", a, b)


def test_prelu_and_where():
    x = _floats((2, 3, 4))
    _binary("prelu", x, _floats((3, 1), seed=8))
    rng = np.random.default_rng(9)
    c = rng.integers(0, 2, (3, 1)).astype(bool)
    vc = Var("c", TensorType(c.shape, "bool"))
    vx = Var("x", TensorType((2, 3, 4), "float32"))
    vy = Var("y", TensorType((4,), "float32"))
    check(_group([vc, vx, vy], call("where", vc, vx, vy)), [c, x, _floats((4,), seed=1)])


def test_scalar_constant_bool_operand_inside_group():
    a = np.array([True, False, True])
    va = Var("a", TensorType((3,), "bool"))
    check(_group([va], call("logical_xor", va, const(np.array(True)))), [a])
    check(_group([va], call("equal", va, const(np.array(False)))), [a])


@pytest.mark.parametrize("n", [1.0, 2.0, 3.0, 4.0, 2.5])
def test_power_by_a_scalar_constant_of_negative_bases(n):
    """Regression: GPT-2's GELU (``Pow(x, 3)``) called libm's powf, whose negative-base path
    is slow (1.4 ms for 196K elements; onnxruntime 59 us): small integer exponents are
    products, others stay pow."""
    x = _floats((4, 6))
    if n == 2.5:
        x = np.abs(x)
    vx = Var("x", TensorType(x.shape, "float32"))
    func = _group([vx], call("power", vx, const(np.array(n, np.float32))))
    check(func, [x])
    text = str(lower_group(func, "kernel"))
    assert ("pow(" in text) == (n == 2.5)
