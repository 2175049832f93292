"""Pool parameters: handle parameters a kernel's static allocations live in, and their size.

A kernel whose buffers were planned into memory passed by the caller (an AOT run
function's ``workspace``, a kernel's ``scratch``) takes that memory as a ``handle``
parameter; each ``Allocate`` with ``storage=STATIC`` and ``pool`` equal to the
parameter's name sits at a fixed offset of it. :func:`pool_param_bytes` gives the bytes
each such parameter must hold, so that the packed entry point can refuse a smaller buffer
instead of writing past it (the size a caller allocates comes from data: ``graph.json``'s
``scratch_bytes``, ``metadata.json``'s ``workspace_size_bytes``).
"""

from __future__ import annotations

from typing import Any

from ember.errors import CompileError
from ember.tir import dtype as dt
from ember.tir.expr import IntImm, Var
from ember.tir.functor import post_order_visit
from ember.tir.stmt import Allocate, PrimFunc, StorageKind


def pool_param_bytes(func: PrimFunc) -> dict[str, int]:
    """Per handle parameter used as a static pool: the bytes its allocations span."""
    handles = {p.name for p in func.params if isinstance(p, Var) and dt.is_handle(p.dtype)}
    need: dict[str, int] = {}

    def visit(node: Any) -> None:
        if not (isinstance(node, Allocate) and node.storage is StorageKind.STATIC):
            return
        if node.pool not in handles:
            return
        count = node.buffer.num_elements()
        if not isinstance(count, IntImm):
            raise CompileError(
                f"{func.name}: static allocation of '{node.buffer.name}' in pool "
                f"'{node.pool}' needs a constant size"
            )
        end = node.offset + count.value * dt.bytes_of(node.buffer.dtype)
        need[node.pool] = max(need.get(node.pool, 0), end)

    post_order_visit(func.body, visit)
    return need
