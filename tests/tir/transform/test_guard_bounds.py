"""guard_bounds (ember.tir.transform.guard_bounds): a loop's tail guard becomes its bound,
guards that do not depend on the loop move out of it, anything else stays; the rewritten
nest computes the same values."""

from __future__ import annotations

import numpy as np

from ember import tir
from ember.tir.buffer import decl_buffer
from ember.tir.expr import LT, And, IntImm
from ember.tir.expr import Var as TVar
from ember.tir.stmt import BufferStore, For, ForKind, IfThenElse, PrimFunc
from ember.tir.transform.guard_bounds import guard_bounds


def _i(v: int) -> IntImm:
    return IntImm("int32", v)


def _tiles(width: int, tile: int, rows: int, extra: bool = False) -> PrimFunc:
    """out[r, t * tile + j] = a[r, t * tile + j] + 1 over the tiles t of ``width`` columns,
    guarded ``t * tile + j < width`` and ``r < rows`` inside the loop over j (``extra``: a
    guard on j no bound can take, ``j % 2 < 1``)."""
    a = decl_buffer((rows, width), "float32", "a")
    out = decl_buffer((rows, width), "float32", "out")
    r, t, j = TVar("r", "int32"), TVar("t", "int32"), TVar("j", "int32")
    col = t * _i(tile) + j
    cond = And(LT(col, _i(width)), LT(r, _i(rows)))
    if extra:
        cond = And(cond, LT(tir.FloorMod(j, _i(2)), _i(1)))
    body = IfThenElse(cond, BufferStore(out, a[r, col] + tir.const(1.0, "float32"), (r, col)))
    inner = For(j, _i(0), _i(tile), ForKind.VECTORIZED, body)
    tiles = For(t, _i(0), _i(-(-width // tile)), ForKind.SERIAL, inner)
    return PrimFunc("f", (a, out), For(r, _i(0), _i(rows), ForKind.SERIAL, tiles))


def _run(func: PrimFunc, rows: int, width: int) -> np.ndarray:
    a = np.arange(rows * width, dtype=np.float32).reshape(rows, width)
    out = np.zeros((rows, width), np.float32)
    tir.interpret(func, [a, out])
    return out


def test_tail_guard_becomes_the_loop_bound() -> None:
    func = _tiles(13, 4, 2)
    new = guard_bounds(func)
    text = str(new)
    assert "min(4, " in text  # the j loop runs min(4, 13 - t * 4) columns
    # r < 2 moved out of the j and t loops and became the r loop's bound (2): no guard left
    rows, tiles = new.body, new.body.body
    assert isinstance(rows, For) and isinstance(tiles, For)
    assert int(rows.extent.value) == 2
    assert isinstance(tiles.body, For) and not isinstance(tiles.body.body, IfThenElse)
    np.testing.assert_array_equal(_run(new, 2, 13), _run(func, 2, 13))
    np.testing.assert_array_equal(_run(new, 2, 13)[:, :13], np.arange(26).reshape(2, 13) + 1)


def test_other_guards_stay_and_unguarded_nests_are_unchanged() -> None:
    func = _tiles(10, 4, 3, extra=True)
    new = guard_bounds(func)
    assert "% 2" in str(new) and "min(4, " in str(new)
    np.testing.assert_array_equal(_run(new, 3, 10), _run(func, 3, 10))
    a = decl_buffer((8,), "float32", "a")
    i = TVar("i", "int32")
    plain = PrimFunc("g", (a,), For(i, _i(0), _i(8), ForKind.SERIAL, BufferStore(a, a[i], (i,))))
    assert guard_bounds(plain) == plain
