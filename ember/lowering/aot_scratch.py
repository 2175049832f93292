"""Kernel scratch in the AOT workspace: a kernel's own heap buffers become planned memory.

A kernel may allocate scratch per call (e.g. a padded copy of a convolution's input) with
``Allocate(storage=HEAP)``, which the C back end turns into a runtime workspace request.
In an AOT build, :func:`plan_scratch` rewrites every such allocation that sits outside
parallel loops into ``STATIC`` memory of a new last parameter ``scratch`` (a handle) at
an aligned offset; the run function then passes, for each call, a slice of the workspace
that the memory planner placed like any other buffer, live for that one call. The model
then runs with no allocation at all, and ``workspace_size_bytes`` counts the scratch too.
Heap allocations inside parallel loops (one per iteration) stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ember.formats.dtypes import numpy_dtype
from ember.support.memory_plan import align_up
from ember.tir import PrimFunc, Var
from ember.tir.buffer import Buffer
from ember.tir.functor import IRMutator
from ember.tir.simplify import const_int
from ember.tir.stmt import Allocate, For, ForKind, Stmt, StorageKind

#: the name of the scratch parameter a rewritten kernel takes last.
SCRATCH_PARAM = "scratch"


@dataclass(frozen=True)
class ScratchKernel:
    """A kernel with its heap buffers moved into ``scratch_bytes`` of a scratch parameter."""

    func: PrimFunc
    scratch_bytes: int


def static_nbytes(buffer: Buffer) -> int | None:
    """Bytes of ``buffer`` when its shape is static, else None."""
    count = 1
    for d in buffer.shape:
        value = const_int(d)
        if value is None:
            return None
        count *= value
    return count * numpy_dtype(buffer.dtype).itemsize


class _ToStatic(IRMutator):
    """HEAP allocations outside parallel loops -> STATIC at offsets of the scratch pool."""

    def __init__(self, alignment: int) -> None:
        self.alignment = alignment
        self.size = 0
        self.parallel = 0

    def visit_For(self, op: For) -> Stmt:  # noqa: N802 - the mutator's dispatch name
        self.parallel += op.kind is ForKind.PARALLEL
        try:
            return self.generic_stmt(op)
        finally:
            self.parallel -= op.kind is ForKind.PARALLEL

    def visit_Allocate(self, op: Allocate) -> Stmt:  # noqa: N802
        new = self.generic_stmt(op)
        assert isinstance(new, Allocate)
        if op.storage is not StorageKind.HEAP or self.parallel:
            return new
        nbytes = static_nbytes(op.buffer)
        if nbytes is None:
            return new  # a symbolic size stays on the heap
        offset = align_up(self.size, self.alignment)
        self.size = offset + nbytes
        return replace(new, storage=StorageKind.STATIC, pool=SCRATCH_PARAM, offset=offset)


def plan_scratch(func: PrimFunc, alignment: int) -> ScratchKernel:
    """``func`` with its top-level heap buffers in a scratch parameter (unchanged if none)."""
    mutator = _ToStatic(alignment)
    body = mutator.visit_stmt(func.body)
    if mutator.size == 0:
        return ScratchKernel(func, 0)
    params = (*func.params, Var(SCRATCH_PARAM, "handle"))
    return ScratchKernel(replace(func.with_body(body), params=params), mutator.size)
