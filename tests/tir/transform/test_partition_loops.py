"""partition_loops (ember.tir.transform.partition_loops): a vectorized loop whose selects,
comparisons or min/max switch at fixed positions of its variable becomes one loop per
stretch with those decisions folded; decisions on other variables stay; the rewritten nest
computes the same values."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.tir.buffer import decl_buffer
from ember.tir.expr import FloorDiv, IntImm, Select
from ember.tir.expr import Var as TVar
from ember.tir.functor import post_order_visit
from ember.tir.stmt import BufferStore, For, ForKind, PrimFunc, SeqStmt
from ember.tir.transform.partition_loops import MAX_PIECES, partition_loops

W = 6  # input row length; rows of W + 2 with one pad each side


def _i(v: int) -> IntImm:
    return IntImm("int32", v)


def _pad_row(index: object, rows: int = 3, width: int = W + 2) -> PrimFunc:
    """out[r, j] = x[r, index(r, j)] over a vectorized j."""
    x = decl_buffer((rows, W), "float32", "x")
    out = decl_buffer((rows, width), "float32", "out")
    r, j = TVar("r", "int32"), TVar("j", "int32")
    value = index(x, r, j)  # type: ignore[operator]
    inner = For(j, _i(0), _i(width), ForKind.VECTORIZED, BufferStore(out, value, (r, j)))
    return PrimFunc("pad", (x, out), For(r, _i(0), _i(rows), ForKind.SERIAL, inner))


def _reflect(x: tir.Buffer, r: TVar, j: TVar) -> tir.PrimExpr:
    pos = j - 1
    low = Select(pos < 0, 0 - pos, pos)
    return x[r, Select(pos >= W, 2 * (W - 1) - pos, low)]


def _edge(x: tir.Buffer, r: TVar, j: TVar) -> tir.PrimExpr:
    return x[r, tir.max(tir.min(j - 1, W - 1), 0)]


def _constant(x: tir.Buffer, r: TVar, j: TVar) -> tir.PrimExpr:
    ok = tir.logical_and(j - 1 >= 0, j - 1 < W, r < 2)  # r < 2: not on j, stays
    return tir.if_then_else(ok, x[r, tir.max(j - 1, 0)], tir.const(-1.0, "float32"))


def _run(func: PrimFunc, width: int = W + 2) -> np.ndarray:
    x = np.arange(3 * W, dtype=np.float32).reshape(3, W)
    out = np.zeros((3, width), np.float32)
    tir.interpret(func, [x, out])
    return out


def _loops(func: PrimFunc) -> list[For]:
    out: list[For] = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, For) else None)
    return [f for f in out if f.loop_var.name == "j"]


@pytest.mark.parametrize("index", [_reflect, _edge, _constant], ids=["reflect", "edge", "const"])
def test_border_loops_and_a_plain_interior(index: object) -> None:
    func = _pad_row(index)
    new = partition_loops(func)
    outer = new.body
    assert isinstance(outer, For) and isinstance(outer.body, SeqStmt)
    pieces = _loops(new)
    spans = [(p.min.value, p.extent.value, p.kind) for p in pieces]  # type: ignore[attr-defined]
    assert spans == [(0, 1, ForKind.SERIAL), (1, W, ForKind.VECTORIZED), (W + 1, 1, ForKind.SERIAL)]
    interior = str(pieces[1].body).strip()
    if index is _constant:  # the row's own test stays
        assert interior == "out[r, j] = select(r < 2, x[r, j - 1], -1.0f)"
    else:
        assert interior == "out[r, j] = x[r, j - 1]"
    np.testing.assert_array_equal(_run(new), _run(func))


def test_decisions_on_other_variables_stay() -> None:
    func = _pad_row(lambda x, r, j: x[r, tir.min(j + r, W - 1)], width=W)
    assert partition_loops(func) is func


def test_too_many_pieces_keep_the_loop() -> None:
    def steps(x: tir.Buffer, r: TVar, j: TVar) -> tir.PrimExpr:
        col: tir.PrimExpr = j % W
        for k in range(MAX_PIECES):
            col = Select(j < k + 1, tir.const(k, "int32"), col)
        return x[r, col]

    func = _pad_row(steps, width=W)
    assert partition_loops(func) is func
    fewer = _pad_row(lambda x, r, j: x[r, Select(j < 2, j + 1, j % W)], width=W)
    new = partition_loops(fewer)
    assert len(_loops(new)) == 2
    np.testing.assert_array_equal(_run(new, W), _run(fewer, W))


def test_each_piece_is_simplified_with_its_own_inclusive_range():
    """Regression: the pieces were simplified with (start, extent) as the variable's
    inclusive bounds; the last piece, [129, 130), then had the bounds (129, 1), and
    ``j // 128`` folded to 0 there (it is 1)."""
    out = decl_buffer((130,), "float32", "out")
    j = TVar("j", "int32")
    shifted = Select(j - 1 >= 128, _i(100), _i(0)) + FloorDiv(j, _i(128))
    store = BufferStore(out, tir.cast("float32", shifted), (j,))
    func = PrimFunc("p", (out,), For(j, _i(0), _i(130), ForKind.VECTORIZED, store))
    parts = partition_loops(func)
    assert isinstance(parts.body, SeqStmt)
    want, got = np.zeros(130, np.float32), np.zeros(130, np.float32)
    tir.interpret(func, [want])
    tir.interpret(parts, [got])
    np.testing.assert_array_equal(got, want)
    assert got[129] == 101.0
