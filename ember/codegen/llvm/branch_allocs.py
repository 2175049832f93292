"""split_branch_allocs: a stack buffer whose scope is one if/else, allocated on each side.

A packed convolution's register tile is one stack buffer around a branch: the full tile
(every column in range, its epilogue unrolled) and the guarded tail tile (each column
behind a condition, its epilogue a loop)::

    conv = allocate(12 x 16 floats, stack)
    if col0 + 11 < 32: init / reduce / write conv[i] for constant i
    else:              ... if col0 + i < 32: conv[i] ...  (i a loop variable)

One ``alloca`` for both sides: the tail's loop indexes it with a variable, so SROA keeps
the whole buffer in memory, and the full tile, which has only constant indices, stored
every accumulator back to the stack on each step of its reduction (resnet8's 3x3 16->16
at 32x32 with 12-column tiles on AVX-512: 2.4x the time of the same kernel with
14-column tiles, where LLVM happened to unroll the tail). Here ``allocate(b, if c: A
else: B)`` becomes ``if c: allocate(b, A) else: allocate(b, B)``: two allocas, and the
full tile's is promoted to registers whatever happens to the tail's. The buffer is not
live across the branch (its scope is exactly the branch), so the result is the same.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ember.tir.expr import BufferLoad
from ember.tir.functor import IRMutator, post_order_visit
from ember.tir.stmt import Allocate, IfThenElse, PrimFunc, Stmt, StorageKind


def _reads(cond: Any, alloc: Allocate) -> bool:
    """True when ``cond`` loads from ``alloc``'s buffer."""
    found: list[bool] = []

    def fn(n: Any) -> None:
        if isinstance(n, BufferLoad) and n.buffer.data is alloc.buffer.data:
            found.append(True)

    post_order_visit(cond, fn)
    return bool(found)


class _Split(IRMutator):
    def visit_Allocate(self, op: Allocate) -> Stmt:
        op = self.generic_stmt(op)  # type: ignore[assignment]
        body = op.body
        if (
            op.storage is not StorageKind.STACK
            or not isinstance(body, IfThenElse)
            or body.else_case is None
            or _reads(body.condition, op)
        ):
            return op
        return IfThenElse(
            body.condition, replace(op, body=body.then_case), replace(op, body=body.else_case)
        )


def split_branch_allocs(func: PrimFunc) -> PrimFunc:
    """``func`` with each stack allocation whose body is an if/else moved into both sides."""
    return _Split().visit_func(func)


__all__ = ["split_branch_allocs"]
