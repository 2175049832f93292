"""te/inline.py: repeated reads of an inlined producer are bound once, where they are read."""

from __future__ import annotations

import numpy as np

from ember import tir
from ember.tir import te
from ember.tir.functor import exceeds


def _lower_inlined(out: te.Tensor, args: list[te.Tensor]) -> tir.PrimFunc:
    s = te.create_schedule(out)
    for op in s.ops:
        if op is not out.op and isinstance(op, te.ComputeOp):
            s[op].compute_inline()
    return te.lower(s, args, name="f")


def test_let_sits_in_the_branch_that_reads_the_producer() -> None:
    x = te.placeholder((8,), "float32", "x")
    p = te.compute((8,), lambda i: tir.exp(x[i]), "p")
    y = te.compute((8,), lambda i: tir.if_then_else(x[i] > 0.0, p[i] * p[i], 0.0), "y")
    func = _lower_inlined(y, [x, y])
    selects: list[tir.Select] = []
    tir.post_order_visit(
        func.body, lambda n: selects.append(n) if isinstance(n, tir.Select) else None
    )
    assert len(selects) == 1
    assert isinstance(selects[0].true_value, tir.Let)  # evaluated only where it was read
    data = np.linspace(-1, 1, 8).astype("float32")
    out = np.zeros(8, "float32")
    tir.interpret(func, [data, out])
    np.testing.assert_allclose(out, np.where(data > 0, np.exp(data) ** 2, 0), rtol=1e-6)


def test_reads_at_different_indices_are_not_bound() -> None:
    x = te.placeholder((8,), "float32", "x")
    p = te.compute((8,), lambda i: x[i] * 2.0, "p")
    y = te.compute((7,), lambda i: p[i] + p[i + 1], "y")
    func = _lower_inlined(y, [x, y])
    lets: list[tir.Let] = []
    tir.post_order_visit(func.body, lambda n: lets.append(n) if isinstance(n, tir.Let) else None)
    assert not lets


def test_exceeds_counts_depth_and_printed_size() -> None:
    v = tir.Var("v", "float32")
    e: tir.PrimExpr = v
    for _ in range(20):
        e = e + e  # 2**20 nodes as printed, 21 levels deep
    assert exceeds(e, 100, 10_000)
    assert not exceeds(e, 100, 1 << 22)
    assert exceeds(e, 20, 1 << 22)
