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
