"""Full and partial tiles: an attached reduction's tail guards leave the full tiles."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.tir import te
from ember.tir.expr import LT, Var, const
from ember.tir.stmt import BufferStore, For, ForKind, IfThenElse, seq
from ember.tir.te.full_tiles import range_of, split_full_tiles

RNG = np.random.default_rng(5)


def _tiled_matmul(n: int, m: int, k: int, rows: int):  # type: ignore[no-untyped-def]
    a = te.placeholder((n, k), "float32", "A")
    b = te.placeholder((k, m), "float32", "B")
    r = te.reduce_axis(k, "k")
    acc = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), "acc")
    out = te.compute((n, m), lambda i, j: acc[i, j] * 2.0, "out")
    s = te.create_schedule(out)
    io, ii = s[out].split(out.op.axis[0], factor=rows)
    s[acc].compute_at(s[out], io)
    s[acc].reorder(r, *acc.op.axis)
    s[acc].unroll(acc.op.axis[0])
    return te.lower(s, [a, b, out], name="mm"), (a, b)


def _ifs(stmt: object) -> list[IfThenElse]:
    found: list[IfThenElse] = []
    tir.post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, IfThenElse) else None)
    return found


@pytest.mark.parametrize(("n", "rows"), [(10, 4), (7, 3), (5, 8), (9, 1)])
def test_tail_guards_leave_full_tiles_and_results_hold(n: int, rows: int) -> None:
    f, _ = _tiled_matmul(n, 6, 5, rows)
    ifs = _ifs(f.body)
    if n % rows and rows < n:
        # one split at the tile: the full copy has no guard, the partial copy keeps them
        top = [s for s in ifs if s.else_case is not None]
        assert len(top) == 1 and not _ifs(top[0].then_case) and _ifs(top[0].else_case)
    else:  # no tail, or a single partial tile: nothing to split
        assert not [s for s in ifs if s.else_case is not None]
    x = RNG.standard_normal((n, 5)).astype("float32")
    y = RNG.standard_normal((5, 6)).astype("float32")
    z = np.zeros((n, 6), "float32")
    tir.interpret(f, [x, y, z])
    np.testing.assert_allclose(z, 2 * (x @ y), rtol=1e-5, atol=1e-5)


def test_nest_without_hoistable_guard_is_unchanged() -> None:
    i, t = Var("i"), Var("t")
    buf = tir.decl_buffer((8,), "float32", "B")
    store = BufferStore(buf, const(1.0, "float32"), (i,))
    plain = For(i, const(0), const(8), ForKind.SERIAL, store)
    assert split_full_tiles(plain) is plain
    # a guard on a variable of the nest that is not linear (i * i) stays put
    odd = For(i, const(0), const(8), ForKind.SERIAL, IfThenElse(LT(i * i, t), store))
    assert split_full_tiles(odd) is odd
    # a guard whose bound is set inside the nest cannot move out of it
    inner = For(t, const(0), const(2), ForKind.SERIAL, IfThenElse(LT(i, t), store))
    assert split_full_tiles(seq(inner)) is inner


def test_guard_split_names_the_full_condition() -> None:
    i, t = Var("i"), Var("t")
    buf = tir.decl_buffer((20,), "float32", "B")
    guarded = IfThenElse(LT(t * 14 + i, const(20)), BufferStore(buf, const(1.0, "float32"), (i,)))
    nest = For(i, const(0), const(14), ForKind.UNROLLED, guarded)
    out = split_full_tiles(nest)
    assert isinstance(out, IfThenElse) and out.else_case is nest
    assert str(out.condition) == "t * 14 + 13 < 20"
    assert not _ifs(out.then_case)
    assert range_of(t * 14 + i, {i: (const(0), const(13))}) is not None
    assert range_of(i * i, {i: (const(0), const(13))}) is None
