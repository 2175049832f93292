"""The compute DSL: placeholders, computes, reduce axes, reductions."""

from __future__ import annotations

import math

import pytest

from ember import tir
from ember.errors import IRError
from ember.tir import te


def test_placeholder_and_compute_shapes() -> None:
    a = te.placeholder((4, 5), "float32", "A")
    b = te.compute((4, 5), lambda i, j: a[i, j] * 2.0, "B")
    assert b.shape == (tir.const(4), tir.const(5)) and b.dtype == "float32"
    assert [iv.name for iv in b.op.axis] == ["i", "j"]
    assert b.op.input_tensors() == [a]
    c = te.compute((4,), lambda *idx: a[idx[0], 0], "C")
    assert [iv.name for iv in c.op.axis] == ["i0"]


def test_reduce_axis_and_reducers() -> None:
    a = te.placeholder((4, 6), "float32", "A")
    k = te.reduce_axis(6, "k")
    assert k.kind == "reduce" and k.extent == tir.const(6)
    s = te.compute((4,), lambda i: te.sum(a[i, k], axis=k), "S")
    assert isinstance(s.op.body, te.Reduce) and s.op.reduce_axis == (k,)
    m = te.max(a[0, k], axis=k)
    assert isinstance(m.identity(), tir.FloatImm) and m.identity().value == -math.inf
    lo = te.reduce_axis((2, 5), "r")
    assert lo.min == tir.const(2) and lo.extent == tir.const(3)
    ints = te.placeholder((4,), "int8", "I")
    r = te.reduce_axis(4, "r2")
    assert te.min(ints[r], axis=r).identity().value == 127
    assert te.sum(a[0, k], axis=k, init=1.0).init == tir.FloatImm("float32", 1.0)


def test_itervar_arithmetic() -> None:
    k = te.reduce_axis(6, "k")
    e = k * 2 + 1
    assert str(e) == "k * 2 + 1"


def test_dsl_errors() -> None:
    a = te.placeholder((4,), "float32", "A")
    with pytest.raises(IRError, match="indexed with 2"):
        a[0, 1]
    k = te.reduce_axis(4, "k")
    with pytest.raises(IRError, match="whole body"):
        te.compute((4,), lambda i: te.sum(a[k], axis=k) + 1.0, "bad")
    with pytest.raises(IRError, match="reduce_axis"):
        te.sum(a[0], axis=[])
    with pytest.raises(IRError, match="takes 2 index arguments"):
        te.compute((4,), lambda i, j: a[i], "bad")
