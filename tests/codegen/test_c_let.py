"""Let expressions in C: evaluated once, scoped, conditional under selects, vector-typed."""

from __future__ import annotations

import numpy as np
import pytest

import ember.runtime as rt
from ember import tir
from ember.codegen.c import generate_source
from ember.codegen.c.build import c_options
from ember.codegen.c.vecmath import vector_math_functions


def _logistic() -> tir.PrimFunc:
    """b[i] = let t = tanh(a[i]) in t / (2 + t), in a vectorized loop (tanh: a libm call,
    with SIMD variants in libmvec)."""
    a = tir.decl_buffer((1000,), "float32", "A")
    b = tir.decl_buffer((1000,), "float32", "B")
    i = tir.Var("i")
    t = tir.Var("t", "float32")
    value = tir.Let(t, tir.tanh(a[i]), t / (2.0 + t))
    body = tir.for_range(i, 1000, tir.store(b, value, i), tir.ForKind.VECTORIZED)
    return tir.PrimFunc("logistic", (a, b), body)


def _guarded() -> tir.PrimFunc:
    """A Let under a select branch reads memory only where the condition holds."""
    a = tir.decl_buffer((5,), "float32", "A")
    b = tir.decl_buffer((8,), "float32", "B")
    i = tir.Var("i")
    v = tir.Var("v", "float32")
    k = tir.Var("k")
    inner = tir.Let(k, i * 3, tir.Let(v, a[k // 3], v * v))
    value = tir.if_then_else(i < 5, inner, tir.const(-1.0))
    return tir.PrimFunc("guarded", (a, b), tir.for_range(i, 8, tir.store(b, value, i)))


def _vector_let() -> tir.PrimFunc:
    a = tir.decl_buffer((4, 8), "float32", "A")
    b = tir.decl_buffer((4, 8), "float32", "B")
    i = tir.Var("i")
    row = tir.Ramp(tir.const(0), tir.const(1), 8)
    v = tir.Var("v", "float32x8")
    value = tir.Let(v, tir.BufferLoad(a, (i, row)), v * v + v)
    return tir.PrimFunc("vlet", (a, b), tir.for_range(i, 4, tir.BufferStore(b, value, (i, row))))


def test_let_is_a_statement_expression_evaluating_once() -> None:
    src = generate_source([_logistic()], {"vector_math": False})
    assert "B[i] = ({ const float t = tanhf(A[i]); t / (2.0f + t); });" in src
    assert src.count("tanhf(A[i])") == 1


def test_integer_let_bounds_reach_floor_division() -> None:
    src = generate_source([_guarded()])
    assert "({ const int32_t k = i * 3; ({ const float v = A[k / 3]; v * v; }); })" in src
    assert "i < 5 ? ({" in src


def test_vector_let_uses_the_vector_type() -> None:
    src = generate_source([_vector_let()])
    assert "({ const ember_f32x8 v = ember_f32x8_load(A + i * 8); v * v + v; })" in src


@pytest.mark.cc
def test_lets_run_like_the_interpreter(build, tmp_path) -> None:  # type: ignore[no-untyped-def]
    funcs = [_logistic(), _guarded(), _vector_let()]
    mod = build(funcs)
    rng = np.random.default_rng(4)
    cases = [
        (rng.standard_normal(1000).astype("float32"), np.zeros(1000, "float32")),
        (rng.standard_normal(5).astype("float32"), np.zeros(8, "float32")),
        (rng.standard_normal((4, 8)).astype("float32"), np.zeros((4, 8), "float32")),
    ]
    for f, (x, y) in zip(funcs, cases, strict=True):
        want = np.zeros_like(y)
        tir.interpret(f, [x, want])
        out = rt.array(y)
        mod[f"ember_{f.name}"](rt.array(x), out)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, err_msg=f.name)
    logistic = rt.array(np.zeros(1000, "float32"))
    mod["ember_logistic"](rt.array(cases[0][0]), logistic)
    x = cases[0][0].astype(np.float64)
    np.testing.assert_allclose(logistic.numpy(), np.tanh(x) / (2 + np.tanh(x)), rtol=1e-6)
    if "tanh" in vector_math_functions(c_options(None).cflags()):  # still vectorized
        assert b"_ZGV" in (tmp_path / "lib" / "kernels.so").read_bytes()


@pytest.mark.cc
def test_vectorized_lets_compile_like_the_scalar_loop(build) -> None:  # type: ignore[no-untyped-def]
    from ember.tir.transform import vectorize_loops

    a = tir.decl_buffer((4, 8), "float32", "A")
    b = tir.decl_buffer((4, 8), "float32", "B")
    i, j = tir.Var("i"), tir.Var("j")
    t = tir.Var("t", "float32")
    inner = tir.Let(t, tir.exp(a[i, j]), t / (1.0 + t))
    body = tir.for_range(j, 8, tir.store(b, inner, i, j), tir.ForKind.VECTORIZED)
    f = tir.PrimFunc("vlets", (a, b), tir.for_range(i, 4, body))
    g = vectorize_loops(f)
    assert "const ember_f32x8 t = " in generate_source([g])
    x = np.random.default_rng(8).standard_normal((4, 8)).astype("float32")
    out = rt.array(np.zeros((4, 8), "float32"))
    build([g])["ember_vlets"](rt.array(x), out)
    e = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(out.numpy(), e / (1 + e), rtol=1e-6)
