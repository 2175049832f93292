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

Only for CPUs with BRANCH_ALLOC_REGISTERS vector registers (the build's ``Options``): on
AVX2's 16 the tiles are sized to the last register (6 x 2 accumulators, a weight pair
and a broadcast), and with the split LLVM's register allocator spilled two accumulators
in the reduction loop of yolo's 1x1 tiles with SiLU (1.5-1.9x those kernels' time,
``-mcpu=haswell`` on Zen 5), where the shared buffer had left them all in registers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ember.tir.expr import BufferLoad
from ember.tir.functor import IRMutator, post_order_visit
from ember.tir.stmt import Allocate, IfThenElse, PrimFunc, Stmt, StorageKind

#: the fewest vector registers of a CPU whose builds split branch allocations (AVX-512's
#: 32; Zen 5, one thread, thread CPU time, llvm/c with 14-column tiles: yolo 0.97 -> 0.90,
#: resnet8 0.89 -> 0.87, mobilenet_v2 1.07 -> 1.03; AVX2's 16: see the module text)
BRANCH_ALLOC_REGISTERS = 32


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


__all__ = ["split_branch_allocs", "BRANCH_ALLOC_REGISTERS"]
