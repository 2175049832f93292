"""Schedule primitives, each checked by running the lowered kernel in the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.errors import IRError
from ember.tir import te

RNG = np.random.default_rng(7)


def _run(func: tir.PrimFunc, *arrays: np.ndarray) -> None:
    tir.verify(func)
    tir.interpret(func, list(arrays))


def _scale(n: int = 10):  # type: ignore[no-untyped-def]
    a = te.placeholder((n,), "float32", "A")
    b = te.compute((n,), lambda i: a[i] * 3.0 + 1.0, "B")
    return a, b


def _check_scale(func: tir.PrimFunc, n: int = 10) -> None:
    x = RNG.random(n, dtype="float32")
    y = np.zeros(n, "float32")
    _run(func, x, y)
    np.testing.assert_allclose(y, x * 3 + 1, rtol=1e-6)


def test_split_divisible_has_no_guard() -> None:
    a, b = _scale(12)
    s = te.create_schedule(b)
    s[b].split(b.op.axis[0], factor=4)
    f = te.lower(s, [a, b], name="split4")
    assert "if" not in str(f) and "i_outer in range(3)" in str(f)
    _check_scale(f, 12)


def test_split_non_divisible_guards() -> None:
    a, b = _scale(10)
    s = te.create_schedule(b)
    s[b].split(b.op.axis[0], factor=4)
    f = te.lower(s, [a, b], name="split_guard")
    assert "if i_outer * 4 + i_inner < 10:" in str(f)
    _check_scale(f)


def test_split_nparts() -> None:
    a, b = _scale(12)
    s = te.create_schedule(b)
    outer, inner = s[b].split(b.op.axis[0], nparts=3)
    assert outer.extent == tir.const(3) and inner.extent == tir.const(4)
    _check_scale(te.lower(s, [a, b], name="np"), 12)


def test_reorder_fuse_parallel_vectorize_unroll() -> None:
    a = te.placeholder((6, 8), "float32", "A")
    b = te.compute((6, 8), lambda i, j: a[i, j] - 1.0, "B")
    s = te.create_schedule(b)
    i, j = b.op.axis
    s[b].reorder(j, i)
    f_reordered = te.lower(s, [a, b], name="r")
    assert str(f_reordered).index("for j") < str(f_reordered).index("for i")
    s = te.create_schedule(b)
    fused = s[b].fuse(*b.op.axis)
    fo, fi = s[b].split(fused, factor=8)
    s[b].parallel(fo)
    s[b].vectorize(fi)
    f = te.lower(s, [a, b], name="fpv")
    text = str(f)
    assert "in parallel(6)" in text and "in vectorized(8)" in text
    x = RNG.random((6, 8), dtype="float32")
    y = np.zeros_like(x)
    _run(f, x, y)
    np.testing.assert_allclose(y, x - 1.0)
    s = te.create_schedule(b)
    s[b].unroll(b.op.axis[1])
    g = te.lower(s, [a, b], name="u")
    assert "in unrolled(8)" in str(g)
    y2 = np.zeros_like(x)
    _run(g, x, y2)
    np.testing.assert_allclose(y2, x - 1.0)


def test_fuse_three_and_tile() -> None:
    a = te.placeholder((2, 3, 4), "int32", "A")
    b = te.compute((2, 3, 4), lambda i, j, k: a[i, j, k] * 2, "B")
    s = te.create_schedule(b)
    s[b].fuse(*b.op.axis)
    x = np.arange(24, dtype="int32").reshape(2, 3, 4)
    y = np.zeros_like(x)
    _run(te.lower(s, [a, b], name="f3"), x, y)
    assert (y == 2 * x).all()
    c = te.compute((6, 10), lambda i, j: a[i % 2, j % 3, 0] + i * 10 + j, "C")
    s = te.create_schedule(c)
    s[c].tile(c.op.axis[0], c.op.axis[1], 4, 4)
    z = np.zeros((6, 10), "int32")
    _run(te.lower(s, [a, c], name="tile"), x, z)
    ii, jj = np.meshgrid(np.arange(6), np.arange(10), indexing="ij")
    assert (z == x[ii % 2, jj % 3, 0] + ii * 10 + jj).all()


def test_schedule_errors() -> None:
    a, b = _scale(8)
    s = te.create_schedule(b)
    i = b.op.axis[0]
    s[b].split(i, factor=2)
    with pytest.raises(IRError, match="not a current loop"):
        s[b].split(i, factor=2)
    with pytest.raises(IRError, match="placeholder"):
        s[a]
    with pytest.raises(IRError, match="exactly one"):
        s[b].split(s[b].leaf_iter_vars[0])
    c = te.placeholder((4, 4), "float32", "C")
    k = te.reduce_axis(4, "k")
    d = te.compute((4,), lambda i: te.sum(c[i, k], axis=k), "D")
    sd = te.create_schedule(d)
    with pytest.raises(IRError, match="race"):
        sd[d].parallel(k)
    with pytest.raises(IRError, match="cannot be inlined"):
        sd[d].compute_inline()
    with pytest.raises(IRError, match="reduction axis with a data axis"):
        sd[d].fuse(d.op.axis[0], k)
    e = te.compute((4, 4), lambda i, j: c[i, j], "E")
    se = te.create_schedule(e)
    with pytest.raises(IRError, match="not adjacent"):
        se[e].fuse(e.op.axis[1], e.op.axis[0])
