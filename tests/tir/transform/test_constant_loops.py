"""ConstantLoopRewriter (ember.tir.transform.constant_loops): which loops reach ``rewrite``
(kind, constant extent, constant min unless the pass waives it), innermost first."""

from __future__ import annotations

from ember.tir.buffer import decl_buffer
from ember.tir.expr import IntImm, Var
from ember.tir.stmt import BufferStore, For, ForKind, PrimFunc, Stmt
from ember.tir.transform.constant_loops import ConstantLoopRewriter


class _Record(ConstantLoopRewriter):
    kind = ForKind.VECTORIZED

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def rewrite(self, op: For, extent: int) -> Stmt:
        self.seen.append((op.loop_var.name, extent))
        return op


def _nest() -> PrimFunc:
    """vectorized i in [0, 8) { vectorized j in [n, n + 4) { serial k in [0, 2) } }."""
    out = decl_buffer((64,), "float32", "out")
    i, j, k, n = (Var(x, "int32") for x in "ijkn")
    store = BufferStore(out, out[i], (i,))
    inner = For(k, IntImm("int32", 0), IntImm("int32", 2), ForKind.SERIAL, store)
    mid = For(j, n, IntImm("int32", 4), ForKind.VECTORIZED, inner)
    outer = For(i, IntImm("int32", 0), IntImm("int32", 8), ForKind.VECTORIZED, mid)
    return PrimFunc("f", (out, n), outer)


def test_only_loops_of_the_kind_with_constant_bounds_reach_rewrite():
    rec = _Record()
    func = _nest()
    assert rec.visit_func(func).body is func.body
    assert rec.seen == [("i", 8)]  # j has a variable min, k is serial


def test_a_pass_may_accept_a_variable_min_and_sees_inner_loops_first():
    rec = _Record()
    rec.constant_min = False
    rec.visit_func(_nest())
    assert rec.seen == [("j", 4), ("i", 8)]
