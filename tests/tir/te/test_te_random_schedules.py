"""Random schedules (splits, fuses, reorders, annotations, compute_at) never change results."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ember import tir
from ember.tir import te


def _random_schedule(rng: random.Random, s: te.Schedule, t: te.Tensor) -> None:
    stage = s[t]
    for _ in range(rng.randint(0, 3)):
        leaves = stage.leaf_iter_vars
        iv = rng.choice(leaves)
        ext = iv.extent.value if isinstance(iv.extent, tir.IntImm) else 1
        if ext > 1 and rng.random() < 0.7:
            stage.split(iv, factor=rng.randint(2, max(2, ext)))
        elif len(leaves) >= 2:
            k = rng.randrange(len(leaves) - 1)
            a, b = leaves[k], leaves[k + 1]
            if a.kind == b.kind:
                stage.fuse(a, b)
    order = list(stage.leaf_iter_vars)
    rng.shuffle(order)
    stage.reorder(*order)
    data = [iv for iv in stage.leaf_iter_vars if iv.kind != "reduce"]
    if data and rng.random() < 0.5:
        stage.parallel(data[0])
    if data and rng.random() < 0.5:
        stage.vectorize(data[-1])
    if rng.random() < 0.3:
        stage.unroll(rng.choice(stage.leaf_iter_vars))


@pytest.mark.parametrize("seed", range(16))
def test_random_schedules_of_matmul_bias_relu(seed: int) -> None:
    rng = random.Random(seed)
    n, m, kk = rng.randint(3, 9), rng.randint(3, 9), rng.randint(2, 7)
    a = te.placeholder((n, kk), "float32", "A")
    b = te.placeholder((kk, m), "float32", "B")
    bias = te.placeholder((m,), "float32", "bias")
    k = te.reduce_axis(kk, "k")
    mm = te.compute((n, m), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), "mm")
    out = te.compute((n, m), lambda i, j: tir.max(mm[i, j] + bias[j], 0.0), "out")
    s = te.create_schedule(out)
    attach = rng.random() < 0.5
    if attach:
        outer, _ = s[out].split(out.op.axis[0], factor=rng.randint(1, n))
        s[mm].compute_at(s[out], rng.choice([outer, *s[out].leaf_iter_vars[1:]]))
    _random_schedule(rng, s, mm)
    _random_schedule(rng, s, out)
    f = te.lower(s, [a, b, bias, out], name=f"rand{seed}")
    x = np.random.default_rng(seed).standard_normal((n, kk)).astype("float32")
    y = np.random.default_rng(seed + 100).standard_normal((kk, m)).astype("float32")
    z = np.random.default_rng(seed + 200).standard_normal(m).astype("float32")
    got = np.zeros((n, m), "float32")
    tir.interpret(f, [x, y, z, got])
    np.testing.assert_allclose(got, np.maximum(x @ y + z, 0), rtol=1e-5, atol=1e-6, err_msg=str(f))


def test_attach_point_split_after_compute_at_moves_inward() -> None:
    a = te.placeholder((8, 6), "float32", "A")
    b = te.compute((8, 6), lambda i, j: a[i, j] + 1.0, "B")
    c = te.compute((8, 6), lambda i, j: b[i, j] * 2.0, "C")
    s = te.create_schedule(c)
    i, j = c.op.axis
    s[b].compute_at(s[c], i)
    io, ii = s[c].split(i, factor=4)  # the attach loop no longer exists
    s[c].reorder(io, j, ii)
    f = te.lower(s, [a, c], name="moved")
    text = str(f)
    assert 'B = allocate(Buffer((1, 1), "float32"' in text  # computed inside ii, the innermost
    x = np.arange(48, dtype="float32").reshape(8, 6)
    y = np.zeros_like(x)
    tir.interpret(f, [x, y])
    np.testing.assert_allclose(y, (x + 1) * 2)


def _conv_ref(x: np.ndarray, w: np.ndarray, pad: int, stride: int) -> np.ndarray:
    r = w.shape[2]
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (x.shape[2] + 2 * pad - r) // stride + 1
    ow = (x.shape[3] + 2 * pad - r) // stride + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow), "float32")
    for y in range(oh):
        for xx in range(ow):
            patch = xp[:, :, y * stride : y * stride + r, xx * stride : xx * stride + r]
            out[:, :, y, xx] = np.einsum("ncij,kcij->nk", patch, w)
    return out


@pytest.mark.parametrize("seed", range(24))
def test_random_schedules_of_padded_strided_conv(seed: int) -> None:
    rng = random.Random(seed)
    c, h, wd, k = rng.randint(1, 3), rng.randint(3, 8), rng.randint(3, 8), rng.randint(1, 4)
    r, pad, stride = rng.choice([1, 3]), rng.choice([0, 1]), rng.choice([1, 2])
    x = te.placeholder((1, c, h, wd), "float32", "X")
    w = te.placeholder((k, c, r, r), "float32", "W")
    p = te.compute(
        (1, c, h + 2 * pad, wd + 2 * pad),
        lambda b, ch, y, xx: te.if_then_else(
            tir.logical_and(y >= pad, y < h + pad, xx >= pad, xx < wd + pad),
            x[b, ch, y - pad, xx - pad],
            0.0,
        ),
        "pad",
    )
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(r, "ry"), te.reduce_axis(r, "rx")
    oh, ow = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - r) // stride + 1
    conv = te.compute(
        (1, k, oh, ow),
        lambda b, f, y, xx: te.sum(
            p[b, rc, y * stride + ry, xx * stride + rx] * w[f, rc, ry, rx], axis=[rc, ry, rx]
        ),
        "conv",
    )
    out = te.compute((1, k, oh, ow), lambda b, f, y, xx: tir.max(conv[b, f, y, xx], 0.0), "relu")
    s = te.create_schedule(out)
    choice = rng.random()
    if choice < 0.4:
        s[p].compute_inline()
    elif choice < 0.7:
        s[p].compute_at(s[conv], rng.choice(s[conv].leaf_iter_vars))
    if rng.random() < 0.6:
        s[conv].compute_at(s[out], rng.choice(s[out].leaf_iter_vars))
    _random_schedule(rng, s, conv)
    _random_schedule(rng, s, out)
    f = te.lower(s, [x, w, out], name=f"conv{seed}")
    xv = np.random.default_rng(seed).standard_normal((1, c, h, wd)).astype("float32")
    wv = np.random.default_rng(seed + 1).standard_normal((k, c, r, r)).astype("float32")
    got = np.zeros((1, k, oh, ow), "float32")
    tir.interpret(f, [xv, wv, got])
    want = np.maximum(_conv_ref(xv, wv, pad, stride), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=str(f))


def test_nested_compute_at_uses_the_middle_stages_region() -> None:
    x = te.placeholder((6, 6), "float32", "X")
    p = te.compute(
        (8, 8),
        lambda i, j: te.if_then_else(
            tir.logical_and(i >= 1, i < 7, j >= 1, j < 7), x[i - 1, j - 1], 0.0
        ),
        "P",
    )
    ry, rx = te.reduce_axis(3, "ry"), te.reduce_axis(3, "rx")
    box = te.compute((6, 6), lambda i, j: te.sum(p[i + ry, j + rx], axis=[ry, rx]), "box")
    out = te.compute((6, 6), lambda i, j: box[i, j] * 0.5, "out")
    s = te.create_schedule(out)
    s[box].compute_at(s[out], out.op.axis[1])  # box: one element per (i, j)
    s[p].compute_at(s[box], ry)  # P: one row segment per (i, j, ry)
    f = te.lower(s, [x, out], name="nested")
    assert 'P = allocate(Buffer((1, 3), "float32"' in str(f)
    xv = np.arange(36, dtype="float32").reshape(6, 6)
    got = np.zeros((6, 6), "float32")
    tir.interpret(f, [xv, got])
    xp = np.pad(xv, 1)
    want = sum(xp[a : a + 6, b : b + 6] for a in range(3) for b in range(3)) * 0.5
    np.testing.assert_allclose(got, want, rtol=1e-6)
