"""split_vector_loops: vectorized loops of an odd constant extent as explicit vector chunks.

``tir.transform.vectorize_loops`` writes explicit vector code only for a power-of-two
extent; any other vectorized loop (a depthwise row of 28 or 56 columns) was left to
LLVM's loop vectorizer, which picked 4 lanes, interleaved them twice and finished with a
scalar loop (28 = 24 + 4), so the row's accumulators sat in a stack buffer loaded and
stored on every kernel tap. Here such a loop of ``VECTOR_CHUNK < n <= MAX_SPLIT``
iterations whose body is only stores becomes chunks of ``VECTOR_CHUNK`` lanes and a
power-of-two remainder (28 = 8 + 8 + 8 + 4), each an explicit vector store at a constant
offset: the accumulators then stay in registers across the taps (SROA), as gcc keeps them.

A loop stays as it was when any chunk would not vectorize completely or would read
lanes with a stride other than 1 (a strided copy: lane-by-lane loads, where LLVM's
vectorizer loads wide and shuffles), so only contiguous rows change.
"""

from __future__ import annotations

from typing import Any

from ember.tir.expr import IntImm, Ramp, Var
from ember.tir.functor import post_order_visit, substitute
from ember.tir.simplify import simplify
from ember.tir.stmt import BufferStore, For, ForKind, PrimFunc, SeqStmt, Stmt, seq
from ember.tir.transform import vectorize_loops
from ember.tir.transform.constant_loops import ConstantLoopRewriter

#: lanes of a chunk (an AVX2 vector of float32)
VECTOR_CHUNK = 8
#: the longest loop split (16 chunks)
MAX_SPLIT = 128


def _chunks(n: int) -> list[tuple[int, int]]:
    """(offset, lanes) pieces of ``n`` iterations: VECTOR_CHUNK lanes, then powers of two."""
    out = [(k, VECTOR_CHUNK) for k in range(0, n - n % VECTOR_CHUNK, VECTOR_CHUNK)]
    off = n - n % VECTOR_CHUNK
    lanes = VECTOR_CHUNK // 2
    while off < n:
        if n - off >= lanes:
            out.append((off, lanes))
            off += lanes
        lanes //= 2
    return out


def _only_stores(body: Stmt) -> bool:
    parts = body.seq if isinstance(body, SeqStmt) else (body,)
    return all(isinstance(p, BufferStore) for p in parts)


def _contiguous(s: Stmt) -> bool:
    """True when every ramp in ``s`` has stride 1 and no vectorized loop is left."""
    bad: list[bool] = []

    def fn(n: Any) -> None:
        strided = isinstance(n, Ramp) and not (isinstance(n.stride, IntImm) and n.stride.value == 1)
        if strided or (isinstance(n, For) and n.kind is ForKind.VECTORIZED):
            bad.append(True)

    post_order_visit(s, fn)
    return not bad


def _split(op: For) -> Stmt | None:
    """The chunks of loop ``op`` as explicit vector code, or None to keep it."""
    assert isinstance(op.extent, IntImm)
    pieces: list[Stmt] = []
    for off, lanes in _chunks(op.extent.value):
        start = simplify(op.min + IntImm(op.loop_var.dtype, off))
        if lanes == 1:
            pieces.append(substitute(op.body, {op.loop_var: start}))
            continue
        v = Var(f"{op.loop_var.name}_c{off}", op.loop_var.dtype)
        body = substitute(op.body, {op.loop_var: start + v})
        loop = For(v, IntImm(v.dtype, 0), IntImm(v.dtype, lanes), ForKind.VECTORIZED, body)
        pieces.append(loop)
    wrapped = PrimFunc("chunks", (), seq(pieces))
    out = vectorize_loops(wrapped).body
    return out if _contiguous(out) else None


class _Split(ConstantLoopRewriter):
    kind = ForKind.VECTORIZED
    constant_min = False

    def rewrite(self, op: For, n: int) -> Stmt:
        if n <= VECTOR_CHUNK or n > MAX_SPLIT or n & (n - 1) == 0 or not _only_stores(op.body):
            return op
        return _split(op) or op


def split_vector_loops(func: PrimFunc) -> PrimFunc:
    """``func`` with its contiguous vectorized loops of odd constant extents written as
    explicit vector chunks (run before ``vectorize_loops``)."""
    return _Split().visit_func(func)


__all__ = ["split_vector_loops", "VECTOR_CHUNK", "MAX_SPLIT"]
