"""Lowering whole computations (matmul, conv2d, reductions, chains) and checking numerics."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.errors import IRError
from ember.tir import te

RNG = np.random.default_rng(3)


def _matmul(n: int, m: int, k: int):  # type: ignore[no-untyped-def]
    a = te.placeholder((n, k), "float32", "A")
    b = te.placeholder((k, m), "float32", "B")
    r = te.reduce_axis(k, "k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), "C")
    return a, b, c, r


def test_matmul_default_and_scheduled() -> None:
    a, b, c, r = _matmul(9, 10, 7)
    x = RNG.random((9, 7), dtype="float32")
    y = RNG.random((7, 10), dtype="float32")
    f = te.lower(c, name="mm")
    assert [p.name for p in f.params] == ["A", "B", "C"]
    z = np.zeros((9, 10), "float32")
    tir.interpret(f, [x, y, z])
    np.testing.assert_allclose(z, x @ y, rtol=1e-5)
    s = te.create_schedule(c)
    io, ii = s[c].split(c.op.axis[0], factor=4)
    jo, ji = s[c].split(c.op.axis[1], factor=4)
    ko, ki = s[c].split(r, factor=3)
    s[c].reorder(io, jo, ko, ii, ki, ji)
    s[c].parallel(io)
    s[c].vectorize(ji)
    g = te.lower(s, [a, b, c], name="mm_tiled")
    z2 = np.zeros((9, 10), "float32")
    tir.interpret(g, [x, y, z2])
    np.testing.assert_allclose(z2, x @ y, rtol=1e-5)
    text = str(g)
    assert text.index("= 0.0f") < text.index("for k_outer")


def _conv2d_ref(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    n, c, h, wd = x.shape
    k, _, r, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - r + 1, wd + 2 * pad - r + 1
    out = np.zeros((n, k, oh, ow), "float32")
    for y in range(oh):
        for xx in range(ow):
            patch = xp[:, :, y : y + r, xx : xx + r]
            out[:, :, y, xx] = np.einsum("ncij,kcij->nk", patch, w)
    return out


def _conv2d(n: int, c: int, h: int, w: int, k: int, r: int, pad: int):  # type: ignore[no-untyped-def]
    x = te.placeholder((n, c, h, w), "float32", "X")
    wt = te.placeholder((k, c, r, r), "float32", "W")
    inside = lambda y, xx: tir.logical_and(y >= pad, y < h + pad, xx >= pad, xx < w + pad)  # noqa: E731
    p = te.compute(
        (n, c, h + 2 * pad, w + 2 * pad),
        lambda b, ch, y, xx: te.if_then_else(inside(y, xx), x[b, ch, y - pad, xx - pad], 0.0),
        "pad",
    )
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(r, "ry"), te.reduce_axis(r, "rx")
    oh, ow = h + 2 * pad - r + 1, w + 2 * pad - r + 1
    out = te.compute(
        (n, k, oh, ow),
        lambda b, f, y, xx: te.sum(
            p[b, rc, y + ry, xx + rx] * wt[f, rc, ry, rx], axis=[rc, ry, rx]
        ),
        "conv",
    )
    return x, wt, p, out


@pytest.mark.parametrize("inline", [True, False])
def test_conv2d_nchw(inline: bool) -> None:
    x, wt, p, out = _conv2d(1, 3, 6, 5, 4, 3, 1)
    s = te.create_schedule(out)
    if inline:
        s[p].compute_inline()
    f = te.lower(s, [x, wt, out], name="conv")
    text = str(f)
    assert ("pad = allocate" in text) != inline
    xv = RNG.random((1, 3, 6, 5), dtype="float32")
    wv = RNG.random((4, 3, 3, 3), dtype="float32")
    o = np.zeros((1, 4, 6, 5), "float32")
    tir.interpret(f, [xv, wv, o])
    np.testing.assert_allclose(o, _conv2d_ref(xv, wv, 1), rtol=1e-5)


def test_reductions_max_min_with_init() -> None:
    a = te.placeholder((5, 7), "float32", "A")
    k = te.reduce_axis(7, "k")
    mx = te.compute((5,), lambda i: te.max(a[i, k], axis=k), "mx")
    k2 = te.reduce_axis(7, "k2")
    mn = te.compute((5,), lambda i: te.min(a[i, k2], axis=k2, init=0.25), "mn")
    k3 = te.reduce_axis((2, 6), "k3")
    part = te.compute((5,), lambda i: te.sum(a[i, k3], axis=k3), "part")
    f = te.lower([mx, mn, part], name="reds")
    x = RNG.standard_normal((5, 7)).astype("float32")
    outs = [np.zeros(5, "float32") for _ in range(3)]
    tir.interpret(f, [x, *outs])
    np.testing.assert_allclose(outs[0], x.max(1))
    np.testing.assert_allclose(outs[1], np.minimum(x.min(1), 0.25))
    np.testing.assert_allclose(outs[2], x[:, 2:6].sum(1), rtol=1e-5)


def test_elementwise_chain_inlined_and_materialized() -> None:
    a = te.placeholder((3, 4), "float32", "A")
    b = te.compute((3, 4), lambda i, j: a[i, j] + 1.0, "B")
    c = te.compute((3, 4), lambda i, j: tir.exp(b[i, j]), "Cc")
    d = te.compute((3, 4), lambda i, j: c[i, j] * b[i, j], "D")
    x = RNG.random((3, 4), dtype="float32")
    ref = np.exp(x + 1) * (x + 1)
    s = te.create_schedule(d)
    f = te.lower(s, [a, d], name="chain")
    assert "B = allocate" in str(f) and "Cc = allocate" in str(f)
    y = np.zeros_like(x)
    tir.interpret(f, [x, y])
    np.testing.assert_allclose(y, ref, rtol=1e-5)
    s[b].compute_inline()
    s[c].compute_inline()
    g = te.lower(s, [a, d], name="chain_inl")
    assert "allocate" not in str(g)
    assert "D[i, j] = exp(A[i, j] + 1.0f) * (A[i, j] + 1.0f)" in str(g)
    y2 = np.zeros_like(x)
    tir.interpret(g, [x, y2])
    np.testing.assert_allclose(y2, ref, rtol=1e-5)


def test_compute_at_region() -> None:
    a = te.placeholder((8, 8), "float32", "A")
    b = te.compute((8, 10), lambda i, j: a[i, j % 8] * 2.0, "B")
    c = te.compute((8, 8), lambda i, j: b[i, j] + b[i, j + 2], "C")
    s = te.create_schedule(c)
    s[b].compute_at(s[c], c.op.axis[0])
    f = te.lower(s, [a, c], name="cat")
    text = str(f)
    assert 'B = allocate(Buffer((1, 10), "float32"' in text
    x = RNG.random((8, 8), dtype="float32")
    y = np.zeros_like(x)
    tir.interpret(f, [x, y])
    bb = x[:, np.arange(10) % 8] * 2
    np.testing.assert_allclose(y, bb[:, :8] + bb[:, 2:10], rtol=1e-6)


def test_compute_at_of_reduction_inside_split_loop() -> None:
    a = te.placeholder((6, 5), "float32", "A")
    k = te.reduce_axis(5, "k")
    rowsum = te.compute((6,), lambda i: te.sum(a[i, k], axis=k), "rowsum")
    out = te.compute((6, 5), lambda i, j: a[i, j] / rowsum[i], "norm")
    s = te.create_schedule(out)
    io, ii = s[out].split(out.op.axis[0], factor=2)
    s[rowsum].compute_at(s[out], io)
    f = te.lower(s, [a, out], name="norm")
    assert "Buffer((2,)" in str(f)
    x = RNG.random((6, 5), dtype="float32") + 0.5
    y = np.zeros_like(x)
    tir.interpret(f, [x, y])
    np.testing.assert_allclose(y, x / x.sum(1, keepdims=True), rtol=1e-5)


def test_large_intermediate_goes_to_heap() -> None:
    a = te.placeholder((128, 256), "float32", "A")
    b = te.compute((128, 256), lambda i, j: a[i, j] + 1.0, "B")
    c = te.compute((128, 256), lambda i, j: b[i, j] * 2.0, "C")
    f = te.lower(c, name="big")
    assert "B = allocate" in str(f) and ", heap)" in str(f)


def test_lower_errors() -> None:
    a = te.placeholder((4,), "float32", "A")
    b = te.compute((4,), lambda i: a[i] + 1.0, "B")
    with pytest.raises(IRError, match="missing from args"):
        te.lower(b, [b], name="x")
    c = te.compute((4,), lambda i: b[i] * 2.0, "C")
    with pytest.raises(IRError, match="output 'C' must be listed"):
        te.lower(c, [a, b], name="x")
    s = te.create_schedule(c)
    s[b].compute_inline()
    with pytest.raises(IRError, match="cannot be inlined"):
        te.lower(s, [a, b, c], name="x")


def test_symbolic_extent_split_and_fuse() -> None:
    n = tir.Var("n")
    a = te.placeholder((n, 4), "float32", "A")
    b = te.compute((n, 4), lambda i, j: a[i, j] * 2.0, "B")
    s = te.create_schedule(b)
    s[b].split(s[b].fuse(*b.op.axis), factor=8)
    f = te.lower(s, [a, b], name="sym")
    text = str(f)
    assert "range((n * 4 + 7) // 8)" in text and "< n * 4:" in text
    for rows in (1, 3, 5):
        x = RNG.random((rows, 4), dtype="float32")
        y = np.zeros_like(x)
        tir.interpret(f, [x, y])
        np.testing.assert_allclose(y, 2 * x)


def test_scalar_output_and_unusual_tensor_names() -> None:
    a = te.placeholder((5,), "float32", "input.0:x")
    k = te.reduce_axis(5, "k")
    total = te.compute((), lambda: te.sum(a[k], axis=k), "9total")
    f = te.lower(total, name="total")
    assert [p.name for p in f.params] == ["input_0_x", "t_9total"]
    assert "t_9total[()] = 0.0f" in str(f)
    x = np.arange(5, dtype="float32")
    out = np.zeros((), "float32")
    tir.interpret(f, [x, out])
    assert float(out) == 10.0


def test_compute_at_stage_with_split_and_fused_data_axes() -> None:
    a = te.placeholder((8, 10), "float32", "A")
    k = te.reduce_axis(3, "k")
    acc = te.compute((8, 10), lambda i, j: te.sum(a[i, (j + k) % 10], axis=k), "acc")
    out = te.compute((8, 10), lambda i, j: acc[i, j] * 2.0, "out")
    s = te.create_schedule(out)
    io, ii = s[out].split(out.op.axis[0], factor=4)
    s[acc].compute_at(s[out], io)
    ai, aj = acc.op.axis
    ajo, aji = s[acc].split(aj, factor=4)  # 10 = 3 * 4 with a guard
    s[acc].reorder(k, ai, ajo, aji)
    s[acc].fuse(ai, ajo)
    f = te.lower(s, [a, out], name="attached_split")
    text = str(f)
    assert 'acc = allocate(Buffer((4, 10), "float32"' in text
    assert "< 10:" in text
    x = RNG.random((8, 10), dtype="float32")
    y = np.zeros_like(x)
    tir.interpret(f, [x, y])
    ref = sum(np.roll(x, -kk, axis=1) for kk in range(3)) * 2
    np.testing.assert_allclose(y, ref, rtol=1e-5)


def test_compute_at_into_inlined_stage_or_cycle_is_refused() -> None:
    a = te.placeholder((4,), "float32", "A")
    b = te.compute((4,), lambda i: a[i] + 1.0, "B")
    c = te.compute((4,), lambda i: b[i] * 2.0, "Cc")
    d = te.compute((4,), lambda i: c[i] - 1.0, "D")
    s = te.create_schedule(d)
    s[b].compute_at(s[c], c.op.axis[0])
    s[c].compute_inline()
    with pytest.raises(IRError, match="which is inlined"):
        te.lower(s, [a, d], name="x")
    s2 = te.create_schedule(d)
    s2[b].compute_at(s2[c], c.op.axis[0])
    s2[c].compute_at(s2[b], b.op.axis[0])
    with pytest.raises(IRError, match="cycle"):
        te.lower(s2, [a, d], name="y")
