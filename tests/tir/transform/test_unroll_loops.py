"""tir.transform.unroll_loops: short constant loops marked unrolled are written out."""

from __future__ import annotations

import numpy as np

from ember import tir
from ember.tir import te
from ember.tir.stmt import For, ForKind
from ember.tir.transform import unroll_loops, vectorize_loops
from ember.tir.transform.unroll_loops import MAX_UNROLL


def _loops(func: tir.PrimFunc) -> list[For]:
    found: list[For] = []
    tir.post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, For) else None)
    return found


def _tile(rows: int, n: int = 16) -> tuple[tir.PrimFunc, list[te.Tensor]]:
    a = te.placeholder((rows, 8), "float32", "A")
    b = te.placeholder((8, n), "float32", "B")
    k = te.reduce_axis(8, "k")
    c = te.compute((rows, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), "C")
    s = te.create_schedule(c)
    s[c].reorder(k, *c.op.axis)
    s[c].unroll(c.op.axis[0])
    s[c].vectorize(c.op.axis[1])
    return te.lower(s, [a, b, c], name="tile"), [a, b, c]


def test_unrolled_tile_has_constant_rows_and_same_results() -> None:
    func, _ = _tile(4)
    out = unroll_loops(vectorize_loops(func))
    kinds = [f.kind for f in _loops(out)]
    assert ForKind.UNROLLED not in kinds and ForKind.VECTORIZED not in kinds
    assert "C[3, ramp(0, 1, 16)]" in str(out)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8)).astype("float32")
    y = rng.standard_normal((8, 16)).astype("float32")
    want, got = np.zeros((4, 16), "float32"), np.zeros((4, 16), "float32")
    tir.interpret(func, [x, y, want])
    tir.interpret(out, [x, y, got])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, x @ y, rtol=1e-5, atol=1e-5)


def test_long_unrolled_loops_stay_loops() -> None:
    func, _ = _tile(MAX_UNROLL + 1, 4)
    out = unroll_loops(func)
    assert ForKind.UNROLLED in [f.kind for f in _loops(out)]
