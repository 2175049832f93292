"""The reference interpreter against numpy, including argument checking and externs."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.errors import EmberTypeError, EmberValueError
from ember.tir import te


def test_elementwise_math() -> None:
    a = tir.decl_buffer((3, 5), "float32", "A")
    b = tir.decl_buffer((3, 5), "float32", "B")
    i, j = tir.Var("i"), tir.Var("j")
    val = tir.tanh(a[i, j]) + tir.sqrt(tir.fabs(a[i, j])) - tir.erf(a[i, j])
    f = tir.PrimFunc(
        "ew", (a, b), tir.for_range(i, 3, tir.for_range(j, 5, tir.store(b, val, i, j)))
    )
    x = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    y = np.zeros_like(x)
    tir.interpret(f, [x, y])
    from math import erf

    ref = np.tanh(x) + np.sqrt(np.abs(x)) - np.vectorize(erf)(x)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_local_allocation_and_let_and_if() -> None:
    a = tir.decl_buffer((4,), "int32", "A")
    t = tir.decl_buffer((4,), "int32", "T", scope="local")
    i, j, x = tir.Var("i"), tir.Var("j"), tir.Var("x")
    body = tir.Allocate(
        t,
        tir.seq(
            tir.for_range(i, 4, tir.store(t, i * i, i)),
            tir.for_range(
                j,
                4,
                tir.LetStmt(
                    x,
                    t[3 - j],
                    tir.IfThenElse(x > 3, tir.store(a, x, j), tir.store(a, -x, j)),
                ),
            ),
        ),
    )
    f = tir.PrimFunc("k", (a,), body)
    out = np.zeros(4, "int32")
    tir.interpret(f, [out])
    assert out.tolist() == [9, 4, -1, 0]


def test_integer_semantics() -> None:
    a = tir.decl_buffer((4,), "int32", "A")
    b = tir.decl_buffer((4,), "uint8", "B")
    i = tir.Var("i")
    body = tir.for_range(
        i,
        4,
        tir.seq(
            tir.store(a, tir.truncdiv(a[i], 2) * 10 + tir.truncmod(a[i], 3), i),
            tir.store(b, tir.cast("uint8", a[i] + 250), i),
        ),
    )
    f = tir.PrimFunc("k", (a, b), body)
    x = np.array([-7, 7, -1, 9], "int32")
    y = np.zeros(4, "uint8")
    tir.interpret(f, [x, y])
    assert x.tolist() == [-31, 31, -1, 40]
    assert y.tolist() == [(v + 250) % 256 for v in [-31, 31, -1, 40]]


def test_call_extern_uses_python_implementation() -> None:
    a = tir.decl_buffer((4,), "float32", "A")
    f = tir.PrimFunc("k", (a,), tir.Evaluate(tir.call_extern("int32", "fill", a.data, 4)))
    seen: list[int] = []

    def fill(buf: list[float], n: int) -> int:
        for k in range(n):
            buf[k] = float(k)
        seen.append(n)
        return 0

    x = np.zeros(4, "float32")
    tir.interpret(f, [x], externs={"fill": fill})
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0] and seen == [4]
    with pytest.raises(EmberValueError, match="externs"):
        tir.interpret(f, [x])


def test_symbolic_shape_and_scalar_param() -> None:
    n = tir.Var("n")
    a = tir.decl_buffer((n,), "float32", "A")
    scale = tir.Var("scale", "float32")
    i = tir.Var("i")
    f = tir.PrimFunc("k", (a, scale), tir.for_range(i, n, tir.store(a, a[i] * scale, i)))
    x = np.arange(5, dtype="float32")
    tir.interpret(f, [x, 3.0])
    assert x.tolist() == [0.0, 3.0, 6.0, 9.0, 12.0]


def test_argument_checks() -> None:
    a = tir.decl_buffer((4,), "float32", "A")
    f = tir.PrimFunc("k", (a,), tir.Evaluate(tir.const(0)))
    with pytest.raises(EmberValueError, match="takes 1 arguments"):
        tir.interpret(f, [])
    with pytest.raises(EmberTypeError, match="dtype float32"):
        tir.interpret(f, [np.zeros(4, "float64")])
    with pytest.raises(EmberValueError, match="dim 0 must be 4"):
        tir.interpret(f, [np.zeros(5, "float32")])


def test_vector_ramp_load_store() -> None:
    a = tir.decl_buffer((8,), "float32", "A")
    b = tir.decl_buffer((8,), "float32", "B")
    io = tir.Var("io")
    r = tir.Ramp(io * 4, tir.const(1), 4)
    body = tir.for_range(
        io, 2, tir.BufferStore(b, tir.BufferLoad(a, (r,)) * tir.Broadcast(tir.const(2.0), 4), (r,))
    )
    f = tir.PrimFunc("v", (a, b), body)
    x = np.arange(8, dtype="float32")
    y = np.zeros(8, "float32")
    tir.interpret(f, [x, y])
    assert y.tolist() == (2 * x).tolist()


def test_out_of_bounds_accesses_raise_instead_of_wrapping() -> None:
    a = tir.decl_buffer((4,), "float32", "A")
    b = tir.decl_buffer((4,), "float32", "B")
    i = tir.Var("i")
    shifted = tir.PrimFunc("shift", (a, b), tir.for_range(i, 4, tir.store(b, a[i - 1], i)))
    x = np.arange(4, dtype="float32")
    with pytest.raises(EmberValueError, match="'shift' accesses buffer 'A' at flat offset -1"):
        tir.interpret(shifted, [x, np.zeros(4, "float32")])
    over = tir.PrimFunc("over", (a, b), tir.for_range(i, 4, tir.store(b, 1.0, i + 1)))
    with pytest.raises(EmberValueError, match="buffer 'B' at flat offset 4"):
        tir.interpret(over, [x, np.zeros(4, "float32")])
    y = np.zeros(4, "float32")
    tir.interpret(shifted, [x, y], check_bounds=False)  # Python's wrap-around, on request
    assert y.tolist() == [3.0, 0.0, 1.0, 2.0]


def _unary_kernel(name: str, n: int) -> tir.PrimFunc:
    a = te.placeholder((n,), "float64", "A")
    b = te.compute((n,), lambda i: getattr(tir, name)(a[i]), "B")
    return te.lower(b, name=name)


NEW_INTRINSICS = {
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "expm1": np.expm1,
    "log1p": np.log1p,
}


@pytest.mark.parametrize("name", sorted(NEW_INTRINSICS))
def test_libm_intrinsics_follow_ieee_like_numpy(name: str) -> None:
    x = np.array([-1000.0, -2.0, -1.0, -0.5, 0.0, 1e-9, 0.5, 1.0, 1.5, 800.0, np.inf, -np.inf])
    x = np.append(x, np.nan)
    out = np.zeros_like(x)
    tir.interpret(_unary_kernel(name, len(x)), [x, out])
    with np.errstate(all="ignore"):
        want = NEW_INTRINSICS[name](x)
    np.testing.assert_allclose(out, want, rtol=1e-15, equal_nan=True)


def test_sigmoid_propagates_nan_and_saturates() -> None:
    x = np.array([np.nan, -1000.0, 1000.0, 0.0, -np.inf, np.inf])
    out = np.zeros_like(x)
    tir.interpret(_unary_kernel("sigmoid", len(x)), [x, out])
    np.testing.assert_array_equal(out, [np.nan, 0.0, 1.0, 0.5, 0.0, 1.0])


def test_fmod_and_domain_errors_give_c_results() -> None:
    a = te.placeholder((6,), "float64", "A")
    b = te.placeholder((6,), "float64", "B")
    c = te.compute((6,), lambda i: tir.truncmod(a[i], b[i]), "C")
    p = te.compute((6,), lambda i: tir.pow(a[i], b[i]), "P")
    x = np.array([np.inf, 5.0, 5.0, -5.5, 0.0, -8.0])
    y = np.array([2.0, 0.0, np.inf, 2.0, -1.0, 3.0])
    outs = [np.zeros(6), np.zeros(6)]
    tir.interpret(te.lower([c, p], name="fm"), [x, y, *outs])
    np.testing.assert_array_equal(outs[0], [np.nan, np.nan, 5.0, -1.5, 0.0, -2.0])
    np.testing.assert_array_equal(outs[1][[0, 2, 4, 5]], [np.inf, np.inf, np.inf, -512.0])
    log = np.zeros(3)
    tir.interpret(_unary_kernel("log", 3), [np.array([0.0, -1.0, np.e]), log])
    np.testing.assert_allclose(log, [-np.inf, np.nan, 1.0], equal_nan=True)


def test_float_division_by_signed_zero_follows_ieee() -> None:
    a = te.placeholder((4,), "float64", "A")
    b = te.placeholder((4,), "float64", "B")
    c = te.compute((4,), lambda i: a[i] / b[i], "C")
    out = np.zeros(4)
    x, y = np.array([1.0, -1.0, 1.0, 0.0]), np.array([0.0, 0.0, -0.0, 0.0])
    tir.interpret(te.lower(c, name="d"), [x, y, out])
    np.testing.assert_array_equal(out, [np.inf, -np.inf, -np.inf, np.nan])
