"""unroll_loops: replace short loops marked ``unrolled`` by copies of their body.

A ``For`` of kind UNROLLED with constant min and extent (at most MAX_UNROLL iterations)
becomes its body once per iteration, the loop variable replaced by the constant. Constant
indices are what lets LLVM's SROA keep a register tile (a small local buffer indexed by the
unrolled loop) in registers instead of storing it on every step of the reduction around it.
Longer or non-constant loops stay loops.
"""

from __future__ import annotations

from ember.tir.expr import IntImm, const
from ember.tir.functor import substitute
from ember.tir.simplify import simplify
from ember.tir.stmt import For, ForKind, PrimFunc, Stmt, seq
from ember.tir.transform.constant_loops import ConstantLoopRewriter

#: unrolled loops with more iterations than this stay loops.
MAX_UNROLL = 64


class _Pass(ConstantLoopRewriter):
    kind = ForKind.UNROLLED

    def rewrite(self, op: For, extent: int) -> Stmt:
        if extent > MAX_UNROLL:
            return op
        assert isinstance(op.min, IntImm)
        start, dtype = op.min.value, op.loop_var.dtype
        copies = [
            simplify(substitute(op.body, {op.loop_var: const(start + k, dtype)}))
            for k in range(extent)
        ]
        return seq(copies)


def unroll_loops(func: PrimFunc) -> PrimFunc:
    """``func`` with every short constant loop marked ``unrolled`` written out."""
    return _Pass().visit_func(func)


__all__ = ["unroll_loops"]
