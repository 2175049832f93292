"""vectorize_loops: explicit vector code that computes exactly what the loop computed."""

from __future__ import annotations

import numpy as np

from ember import tir
from ember.tir import te
from ember.tir.transform import vectorize_loops

RNG = np.random.default_rng(21)


def _same(f: tir.PrimFunc, g: tir.PrimFunc, *shapes: tuple[int, ...]) -> None:
    tir.verify(g)
    ins = [RNG.random(s, dtype="float32") for s in shapes[:-1]]
    a, b = np.zeros(shapes[-1], "float32"), np.zeros(shapes[-1], "float32")
    tir.interpret(f, [*ins, a])
    tir.interpret(g, [*ins, b])
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_elementwise_with_select_math_and_casts() -> None:
    a = te.placeholder((4, 32), "float32", "A")
    b = te.placeholder((32,), "float32", "B")
    c = te.compute(
        (4, 32),
        lambda i, j: te.if_then_else(
            a[i, j] > b[j], tir.exp(a[i, j]) * 2.0, b[j] + tir.cast("float32", i)
        ),
        "C",
    )
    s = te.create_schedule(c)
    _, ji = s[c].split(c.op.axis[1], factor=8)
    s[c].vectorize(ji)
    f = te.lower(s, [a, b, c], name="ew")
    g = vectorize_loops(f)
    text = str(g)
    assert "vectorized" not in text
    assert "C[i, ramp(j_outer * 8, 1, 8)] = select(" in text
    _same(f, g, (4, 32), (32,), (4, 32))


def test_reduction_update_with_vector_data_axis() -> None:
    a = te.placeholder((4, 6), "float32", "A")
    b = te.placeholder((6, 16), "float32", "B")
    k = te.reduce_axis(6, "k")
    c = te.compute((4, 16), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), "C")
    s = te.create_schedule(c)
    s[c].reorder(c.op.axis[0], k, c.op.axis[1])
    s[c].vectorize(c.op.axis[1])
    f = te.lower(s, [a, b, c], name="mm")
    g = vectorize_loops(f)
    assert "broadcast(A[i, k], 16)" in str(g)
    _same(f, g, (4, 6), (6, 16), (4, 16))


def test_loops_it_cannot_vectorize_stay_as_they_are() -> None:
    a = te.placeholder((10,), "float32", "A")
    b = te.compute((10,), lambda i: a[i] * 2.0, "B")
    s = te.create_schedule(b)
    _, inner = s[b].split(b.op.axis[0], factor=4)  # 10 % 4 != 0: a guard inside the loop
    s[b].vectorize(inner)
    f = te.lower(s, [a, b], name="guarded")
    assert vectorize_loops(f) is f or str(vectorize_loops(f)) == str(f)
    x = tir.decl_buffer((8,), "int32", "X")
    i = tir.Var("i")
    div = tir.PrimFunc(
        "d", (x,), tir.for_range(i, 8, tir.store(x, i // 3, i), tir.ForKind.VECTORIZED)
    )
    assert "vectorized(8)" in str(vectorize_loops(div))
    same_slot = tir.PrimFunc(
        "s", (x,), tir.for_range(i, 8, tir.store(x, i, 0), tir.ForKind.VECTORIZED)
    )
    assert "vectorized(8)" in str(vectorize_loops(same_slot))
    odd = tir.PrimFunc("o", (x,), tir.for_range(i, 6, tir.store(x, i, i), tir.ForKind.VECTORIZED))
    assert "vectorized(6)" in str(vectorize_loops(odd))


def test_lets_bind_vector_variables() -> None:
    a = tir.decl_buffer((4, 8), "float32", "A")
    b = tir.decl_buffer((4, 8), "float32", "B")
    i, j = tir.Var("i"), tir.Var("j")
    t, s = tir.Var("t", "float32"), tir.Var("s", "float32")
    inner = tir.Let(t, tir.exp(a[i, j]), t / (tir.Let(s, a[i, 0], s * s) + t))
    body = tir.for_range(j, 8, tir.store(b, inner, i, j), tir.ForKind.VECTORIZED)
    f = tir.PrimFunc("lets", (a, b), tir.for_range(i, 4, body))
    g = vectorize_loops(f)
    text = str(g)
    assert "vectorized" not in text
    assert "let(t = exp(A[i, ramp(0, 1, 8)])" in text  # a vector t, a scalar s
    assert "let(s = A[i, 0], s * s)" in text
    _same(f, g, (4, 8), (4, 8))


def test_a_let_bound_index_keeps_the_loop_scalar() -> None:
    a = tir.decl_buffer((8,), "float32", "A")
    b = tir.decl_buffer((8,), "float32", "B")
    j, k = tir.Var("j"), tir.Var("k")
    value = tir.Let(k, 7 - j, a[k])
    body = tir.for_range(j, 8, tir.store(b, value, j), tir.ForKind.VECTORIZED)
    f = tir.PrimFunc("rev", (a, b), body)
    g = vectorize_loops(f)
    assert "vectorized" in str(g)
    _same(f, g, (8,), (8,))
