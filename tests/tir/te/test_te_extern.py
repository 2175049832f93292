"""te.extern: hand-written loop IR (or call_extern) stages between computes."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.errors import IRError
from ember.tir import te

RNG = np.random.default_rng(5)


def _cumsum(ins: list[tir.Buffer], outs: list[tir.Buffer]) -> tir.Stmt:
    x, y = ins[0], outs[0]
    i, j = tir.Var("i"), tir.Var("j")
    first = tir.store(y, x[i, 0], i, 0)
    rest = tir.for_range(j, 5, tir.store(y, y[i, j] + x[i, j + 1], i, j + 1))
    return tir.for_range(i, 4, tir.seq(first, rest), tir.ForKind.PARALLEL)


def test_extern_between_computes() -> None:
    a = te.placeholder((4, 6), "float32", "A")
    b = te.compute((4, 6), lambda i, j: a[i, j] * 2.0, "B")
    c = te.extern((4, 6), [b], _cumsum, name="cumsum")
    d = te.compute((4, 6), lambda i, j: tir.max(c[i, j] - 3.0, 0.0), "D")
    f = te.lower(d, name="ext")
    text = str(f)
    assert "cumsum = allocate" in text and "B = allocate" in text
    x = RNG.random((4, 6), dtype="float32") * 2
    out = np.zeros_like(x)
    tir.interpret(f, [x, out])
    np.testing.assert_allclose(out, np.maximum(np.cumsum(2 * x, 1) - 3, 0), rtol=1e-6)


def test_multi_output_extern_as_arguments() -> None:
    a = te.placeholder((3, 5), "float32", "A")

    def argmax(ins: list[tir.Buffer], outs: list[tir.Buffer]) -> tir.Stmt:
        x, val, idx = ins[0], outs[0], outs[1]
        i, j = tir.Var("i"), tir.Var("j")
        better = x[i, j] > val[i]
        update = tir.IfThenElse(better, tir.seq(tir.store(val, x[i, j], i), tir.store(idx, j, i)))
        init = tir.seq(tir.store(val, x[i, 0], i), tir.store(idx, 0, i))
        return tir.for_range(i, 3, tir.seq(init, tir.for_range(j, 5, update)))

    vals, idxs = te.extern([(3,), (3,)], [a], argmax, name="argmax", dtype=["float32", "int32"])
    assert (vals.name, idxs.name, idxs.value_index, idxs.dtype) == (
        "argmax_0",
        "argmax_1",
        1,
        "int32",
    )
    f = te.lower([vals, idxs], name="argmax")
    assert [p.name for p in f.params] == ["A", "argmax_0", "argmax_1"]
    x = RNG.random((3, 5), dtype="float32")
    v, k = np.zeros(3, "float32"), np.zeros(3, "int32")
    tir.interpret(f, [x, v, k])
    assert k.tolist() == x.argmax(1).tolist()
    np.testing.assert_allclose(v, x.max(1))


def test_extern_with_call_extern_body() -> None:
    a = te.placeholder((8,), "float32", "A")
    out = te.extern(
        (8,),
        [a],
        lambda ins, outs: tir.call_extern("int32", "copy8", outs[0].data, ins[0].data),
        name="copied",
    )
    f = te.lower(out, name="copy")
    assert 'call_extern("int32", "copy8", copied, A)' in str(f)

    def copy8(dst: list[float], src: list[float]) -> int:
        dst[:] = src
        return 0

    x = RNG.random(8, dtype="float32")
    y = np.zeros(8, "float32")
    tir.interpret(f, [x, y], externs={"copy8": copy8})
    np.testing.assert_allclose(y, x)


def test_extern_errors() -> None:
    a = te.placeholder((4, 6), "float32", "A")
    b = te.compute((4, 6), lambda i, j: a[i, j] + 1.0, "B")
    c = te.extern((4, 6), [b], _cumsum, name="cs")
    s = te.create_schedule(c)
    s[b].compute_inline()
    with pytest.raises(IRError, match="needs it in memory"):
        te.lower(s, [a, c], name="x")
    s2 = te.create_schedule(c)
    with pytest.raises(IRError, match="extern stage cannot be inlined"):
        s2[c].compute_inline()
    d = te.compute((4, 6), lambda i, j: c[i, j], "D")
    s3 = te.create_schedule(d)
    with pytest.raises(IRError, match="cannot be computed at"):
        s3[c].compute_at(s3[d], d.op.axis[0])
    with pytest.raises(IRError, match="give dtype"):
        te.extern((2,), [], lambda ins, outs: tir.Evaluate(tir.const(0)), name="none")
    with pytest.raises(IRError, match="must return a loop-IR statement"):
        te.extern((2,), [a], lambda ins, outs: None, name="bad")  # type: ignore[arg-type,return-value]
