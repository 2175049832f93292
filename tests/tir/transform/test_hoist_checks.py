"""hoist_checks (ember.tir.transform.hoist_checks): index checks that do not depend on a loop
move in front of it, innermost loop first and further out where they can; checks under a
condition, in a loop that may not run, or on the loop's variable stay; the rewritten nest
computes the same values and raises the same errors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ember import tir
from ember.errors import EmberError
from ember.tir.buffer import decl_buffer
from ember.tir.expr import LT, Call, IntImm, Select
from ember.tir.expr import Var as TVar
from ember.tir.functor import post_order_visit
from ember.tir.op import CHECK_KIND
from ember.tir.stmt import BufferStore, For, ForKind, IfThenElse, LetStmt, PrimFunc, Stmt
from ember.tir.transform.hoist_checks import hoist_checks

ROWS, DIM, N = 3, 8, 5


def _i(v: int) -> IntImm:
    return IntImm("int32", v)


def _take(value: object = None, extent: int = DIM, row: object = None) -> PrimFunc:
    """out[r, j] = data[check(ids[r]), j] (``row``: the checked expression instead; ``value``:
    a function of the load giving the stored value)."""
    data = decl_buffer((N, DIM), "float32", "data")
    ids = decl_buffer((ROWS,), "int64", "ids")
    out = decl_buffer((ROWS, DIM), "float32", "out")
    r, j = TVar("r", "int32"), TVar("j", "int32")
    pos = tir.index_check(ids[r] if row is None else row(ids, r, j), N, "the ids")  # type: ignore[operator]
    load = data[pos, j]
    stored = load if value is None else value(load, r, j)  # type: ignore[operator]
    inner = For(j, _i(0), _i(extent), ForKind.VECTORIZED, BufferStore(out, stored, (r, j)))
    return PrimFunc("take", (data, ids, out), For(r, _i(0), _i(ROWS), ForKind.SERIAL, inner))


def _checks_under(stmt: Stmt) -> int:
    found: list[object] = []
    post_order_visit(
        stmt, lambda n: found.append(n) if isinstance(n, Call) and n.kind == CHECK_KIND else None
    )
    return len(found)


def _run(func: PrimFunc, ids: list[int]) -> np.ndarray:
    data = np.arange(N * DIM, dtype=np.float32).reshape(N, DIM)
    out = np.zeros((ROWS, DIM), np.float32)
    tir.interpret(func, [data, np.array(ids, np.int64), out])
    return out


def test_checked_row_moves_in_front_of_the_vectorized_loop() -> None:
    func = _take()
    new = hoist_checks(func)
    outer = new.body
    assert isinstance(outer, For) and isinstance(outer.body, LetStmt)
    assert isinstance(outer.body.body, For) and _checks_under(outer.body.body) == 0
    for ids in ([0, -1, 4], [-5, 2, 2]):
        np.testing.assert_array_equal(_run(new, ids), _run(func, ids))
    for bad in ([0, 5, 1], [-6, 0, 0]):
        with pytest.raises(EmberError, match="out of range"):
            _run(new, bad)


def test_check_free_of_every_loop_moves_out_of_both_once() -> None:
    new = hoist_checks(_take(row=lambda ids, r, j: ids[0]))
    assert isinstance(new.body, LetStmt) and isinstance(new.body.body, For)
    assert _checks_under(new.body.body) == 0
    assert not isinstance(new.body.body.body, LetStmt)  # the inner loop's let is dropped
    np.testing.assert_array_equal(_run(new, [-2, 0, 0])[2], np.arange(3 * DIM, 4 * DIM))


@pytest.mark.parametrize(
    "func",
    [
        _take(row=lambda ids, r, j: ids[r] + tir.Cast("int64", j) * 0),  # uses the loop var
        _take(extent=0),  # a loop that does not run raises nothing
        _take(value=lambda x, r, j: Select(LT(j, _i(4)), x, tir.const(0.0, "float32"))),
    ],
    ids=["loop-variant", "empty-loop", "select-arm"],
)
def test_checks_that_may_not_run_stay(func: PrimFunc) -> None:
    inner = func.body.body  # type: ignore[attr-defined]
    new = hoist_checks(func)
    assert isinstance(new.body, For) and new.body.body == inner


def test_check_under_an_if_stays() -> None:
    func = _take()
    outer = func.body
    assert isinstance(outer, For) and isinstance(outer.body, For)
    inner = outer.body
    guarded = IfThenElse(LT(outer.loop_var, _i(2)), inner.body)
    func = func.with_body(replace(outer, body=replace(inner, body=guarded)))
    assert hoist_checks(func) is func


def test_check_reading_a_buffer_the_loop_writes_stays() -> None:
    func = _take()
    outer = func.body
    assert isinstance(outer, For) and isinstance(outer.body, For)
    ids = func.params[1]
    assert isinstance(ids, tir.Buffer)
    write = BufferStore(ids, tir.const(1, "int64"), (outer.loop_var,))
    func = func.with_body(replace(outer, body=tir.SeqStmt((write, outer.body))))
    new = hoist_checks(func)
    assert isinstance(new.body, For) and _checks_under(new.body.body) == 1
    assert not isinstance(new.body.body, LetStmt)
    np.testing.assert_array_equal(_run(new, [9, 9, 9]), _run(func, [9, 9, 9]))
