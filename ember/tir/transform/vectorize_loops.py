"""vectorize_loops: turn simple vectorized loops into explicit vector code (TVM's VectorizeLoop).

A ``For`` of kind VECTORIZED with a constant power-of-two extent (2..64) whose body is only
buffer stores becomes those stores on vectors: the loop variable becomes
``Ramp(min, 1, lanes)``, loop-invariant operands become ``Broadcast``, a ``Let`` whose value
moves with the loop binds a vector variable, and index arithmetic keeps ramps as ramps
(``i * 8 + ramp(0, 1, 8)`` -> ``ramp(i * 8, 1, 8)``). Any loop it cannot
vectorize completely (nested loops, branches, floor division of vectors, extern calls,
gathers along two dimensions, stores that do not move with the loop) is left as it was, so
the pass never changes what a kernel computes. The LLVM backend relies on it; the C backend
works with or without it.
"""

from __future__ import annotations

from ember.tir import dtype as dt
from ember.tir.expr import (
    Add,
    And,
    BinaryOp,
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    CmpOp,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)
from ember.tir.functor import IRMutator
from ember.tir.simplify import simplify
from ember.tir.stmt import BufferStore, For, ForKind, PrimFunc, SeqStmt, Stmt, seq

MAX_LANES = 64


class _CannotVectorize(Exception):
    """Internal: the loop keeps its scalar form."""


class _Vectorizer:
    def __init__(self, var: Var, start: PrimExpr, lanes: int) -> None:
        self.var = var
        self.start = start
        self.lanes = lanes
        # Let variables whose value moves with the loop, and their vector replacements
        self.lets: dict[Var, Var] = {}

    def widen(self, e: PrimExpr) -> PrimExpr:
        """``e`` as a vector (a broadcast if it does not depend on the loop)."""
        return e if dt.lanes_of(e.dtype) > 1 else Broadcast(e, self.lanes)

    def expr(self, e: PrimExpr) -> PrimExpr:
        if e is self.var:
            return Ramp(self.start, IntImm(e.dtype, 1), self.lanes)
        if isinstance(e, Var):
            return self.lets.get(e, e)
        if isinstance(e, IntImm | FloatImm):
            return e
        if isinstance(e, Let):
            return self.let(e)
        if isinstance(e, BinaryOp):
            return self.binary(e)
        if isinstance(e, CmpOp | And | Or):
            a, b = self.expr(e.a), self.expr(e.b)
            if a is e.a and b is e.b:
                return e
            return type(e)(self.widen(a), self.widen(b))
        if isinstance(e, Not):
            a = self.expr(e.a)
            return e if a is e.a else Not(a)
        if isinstance(e, Select):
            parts = [self.expr(x) for x in (e.condition, e.true_value, e.false_value)]
            if all(
                p is q
                for p, q in zip(parts, (e.condition, e.true_value, e.false_value), strict=True)
            ):
                return e
            c, t, f = (self.widen(p) for p in parts)
            return Select(c, t, f)
        if isinstance(e, Cast):
            v = self.expr(e.value)
            if v is e.value:
                return e
            return Cast(dt.with_lanes(e.dtype, self.lanes), self.widen(v))
        if isinstance(e, Call):
            args = [self.expr(a) for a in e.args]
            if all(a is b for a, b in zip(args, e.args, strict=True)):
                return e
            if e.kind != "intrin":
                raise _CannotVectorize
            vec = tuple(self.widen(a) for a in args)
            return Call(dt.with_lanes(e.dtype, self.lanes), e.op, vec, e.kind)
        if isinstance(e, BufferLoad):
            indices = self.indices(e.indices)
            return e if indices is None else BufferLoad(e.buffer, indices)
        raise _CannotVectorize

    def let(self, e: Let) -> PrimExpr:
        """A Let whose value moves with the loop binds a vector variable of its lanes."""
        value = self.expr(e.value)
        if value is e.value:  # invariant value: the scalar binding stays
            body = self.expr(e.body)
            return e if body is e.body else Let(e.var, e.value, body)
        if isinstance(value, Ramp):
            raise _CannotVectorize  # a vector index variable would hide the ramp
        vvar = Var(e.var.name, value.dtype)
        self.lets[e.var] = vvar
        body = self.widen(self.expr(e.body))
        del self.lets[e.var]
        return Let(vvar, value, body)

    def binary(self, e: BinaryOp) -> PrimExpr:
        a, b = self.expr(e.a), self.expr(e.b)
        if a is e.a and b is e.b:
            return e
        scalar_a, scalar_b = dt.lanes_of(a.dtype) == 1, dt.lanes_of(b.dtype) == 1
        # keep index arithmetic on ramps as ramps
        if isinstance(e, Add) and isinstance(b, Ramp) and scalar_a:
            return Ramp(simplify(a + b.base), b.stride, b.lanes)
        if isinstance(e, Add | Sub) and isinstance(a, Ramp) and scalar_b:
            base = a.base + b if isinstance(e, Add) else a.base - b
            return Ramp(simplify(base), a.stride, a.lanes)
        if isinstance(e, Mul) and isinstance(a, Ramp) and isinstance(b, IntImm):
            return Ramp(simplify(a.base * b), simplify(a.stride * b), a.lanes)
        if isinstance(e, Mul) and isinstance(b, Ramp) and isinstance(a, IntImm):
            return Ramp(simplify(b.base * a), simplify(b.stride * a), b.lanes)
        if isinstance(e, FloorDiv | FloorMod) or (
            isinstance(e, Div | Mod) and dt.is_integral(e.dtype)
        ):
            raise _CannotVectorize  # no vector integer division in the backends yet
        return type(e)(self.widen(a), self.widen(b))

    def indices(self, idx: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...] | None:
        new = tuple(self.expr(i) for i in idx)
        moving = [i for i in new if dt.lanes_of(i.dtype) > 1]
        if not moving:
            return None
        if len(moving) != 1 or not isinstance(moving[0], Ramp):
            raise _CannotVectorize  # a gather along several dimensions
        return new

    def store(self, s: BufferStore) -> BufferStore:
        indices = self.indices(s.indices)
        if indices is None:
            raise _CannotVectorize  # every lane would write the same element
        return BufferStore(s.buffer, self.widen(self.expr(s.value)), indices)


def _stores(body: Stmt) -> list[BufferStore] | None:
    parts = body.seq if isinstance(body, SeqStmt) else (body,)
    if all(isinstance(p, BufferStore) for p in parts):
        return list(parts)  # type: ignore[arg-type]
    return None


class _Pass(IRMutator):
    def visit_For(self, op: For) -> Stmt:
        op = self.generic_stmt(op)  # type: ignore[assignment]
        if op.kind is not ForKind.VECTORIZED or not isinstance(op.extent, IntImm):
            return op
        lanes = op.extent.value
        if lanes < 2 or lanes > MAX_LANES or lanes & (lanes - 1):
            return op
        stores = _stores(op.body)
        if stores is None:
            return op
        vec = _Vectorizer(op.loop_var, op.min, lanes)
        try:
            return seq([vec.store(s) for s in stores])
        except _CannotVectorize:
            return op


def vectorize_loops(func: PrimFunc) -> PrimFunc:
    """``func`` with every simple vectorized loop replaced by explicit vector code."""
    return _Pass().visit_func(func)


__all__ = ["vectorize_loops"]
