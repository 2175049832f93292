"""The loop-IR verifier: scoping of variables and buffers, and dtype consistency.

``verify(func)`` raises ``IRError`` naming the function, the problem and the offending
statement; the pipeline calls it at every boundary that produces loop IR.
"""

from __future__ import annotations

from typing import Any

from ember.errors import IRError
from ember.tir import dtype as dt
from ember.tir.buffer import Buffer
from ember.tir.expr import (
    And,
    BinaryOp,
    Broadcast,
    BufferLoad,
    Call,
    CmpOp,
    Let,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    Var,
)
from ember.tir.op import MATH_INTRINSICS
from ember.tir.stmt import (
    Allocate,
    AssertStmt,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
)


class _Verifier:
    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.vars: set[Var] = set()
        self.bufs: set[Buffer] = set()
        self.where: Stmt | None = None

    def fail(self, msg: str) -> None:
        where = f"\n  in: {str(self.where).strip().splitlines()[0]}" if self.where else ""
        raise IRError(f"loop IR of '{self.func.name}' is invalid: {msg}{where}")

    def define(self, v: Var) -> None:
        if v in self.vars:
            self.fail(f"variable '{v.name}' is defined twice in nested scopes; use a fresh Var")
        self.vars.add(v)

    def run(self) -> None:
        for p in self.func.params:
            if isinstance(p, Buffer):
                self.bufs.add(p)
                self.vars.add(p.data)
            elif isinstance(p, Var):
                self.vars.add(p)
            else:
                self.fail(f"parameter {p!r} is neither a Buffer nor a Var")
        for p in self.func.params:  # symbolic extents of parameter buffers define their vars
            if isinstance(p, Buffer):
                for e in (*p.shape, *p.strides):
                    if isinstance(e, Var):
                        self.vars.add(e)
        self.stmt(self.func.body)

    def stmt(self, s: Stmt) -> None:
        if not isinstance(s, Stmt):
            self.fail(f"expected a statement, got {s!r}")
        self.where = s
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, For):
            self.int_expr(s.min, "loop start")
            self.int_expr(s.extent, "loop extent")
            if s.loop_var.dtype != s.extent.dtype or s.loop_var.dtype != s.min.dtype:
                self.fail(
                    f"loop variable '{s.loop_var.name}' is {s.loop_var.dtype} but its range is "
                    f"{s.min.dtype}/{s.extent.dtype}; cast the bounds"
                )
            self.define(s.loop_var)
            self.stmt(s.body)
            self.vars.discard(s.loop_var)
        elif isinstance(s, BufferStore):
            if not isinstance(s.buffer, Buffer):
                self.fail(f"store to {s.buffer!r}, which is not a Buffer")
            self.access(s.buffer, s.indices)
            self.expr(s.value)
            want = dt.with_lanes(
                s.buffer.dtype, max([dt.lanes_of(i.dtype) for i in s.indices] or [1])
            )
            if s.value.dtype != want:
                self.fail(
                    f"store of a {s.value.dtype} value into {s.buffer.name} ({want}); "
                    "cast the value"
                )
        elif isinstance(s, LetStmt):
            self.expr(s.value)
            if s.value.dtype != s.var.dtype:
                self.fail(f"let '{s.var.name}': {s.var.dtype} bound to a {s.value.dtype} value")
            self.define(s.var)
            self.stmt(s.body)
            self.vars.discard(s.var)
        elif isinstance(s, IfThenElse):
            self.bool_expr(s.condition, "if condition")
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
        elif isinstance(s, Allocate):
            b = s.buffer
            if b in self.bufs:
                self.fail(f"buffer '{b.name}' is allocated twice")
            for e in b.shape:
                self.int_expr(e, "allocation extent")
            self.bufs.add(b)
            self.define(b.data)
            self.stmt(s.body)
            self.bufs.discard(b)
            self.vars.discard(b.data)
        elif isinstance(s, Evaluate):
            self.expr(s.value)
        elif isinstance(s, AssertStmt):
            self.bool_expr(s.condition, "assert condition")
            self.stmt(s.body)
        else:
            self.fail(f"unknown statement {type(s).__name__}")

    def access(self, b: Buffer, indices: tuple[PrimExpr, ...]) -> None:
        if b not in self.bufs:
            self.fail(f"buffer '{b.name}' is used but neither a parameter nor allocated here")
        if len(indices) != len(b.shape):
            self.fail(f"buffer '{b.name}' has {len(b.shape)} dims, indexed with {len(indices)}")
        for i in indices:
            self.int_expr(i, f"index of {b.name}")

    def int_expr(self, e: PrimExpr, what: str) -> None:
        self.expr(e)
        if not dt.is_integral(e.dtype):
            self.fail(f"{what} {e} must be an integer, got {e.dtype}")

    def bool_expr(self, e: PrimExpr, what: str) -> None:
        self.expr(e)
        if not dt.is_bool(e.dtype):
            self.fail(f"{what} {e} must be bool, got {e.dtype}")

    def same(self, node: PrimExpr, *parts: PrimExpr) -> None:
        kinds = {p.dtype for p in parts}
        if len(kinds) != 1:
            detail = ", ".join(f"{p} : {p.dtype}" for p in parts)
            self.fail(
                f"operands of {type(node).__name__} have different dtypes ({detail}); cast one"
            )

    def expr(self, e: Any) -> None:
        if not isinstance(e, PrimExpr):
            self.fail(f"expected an expression, got {e!r}")
        if isinstance(e, Var):
            if e not in self.vars:
                self.fail(f"variable '{e.name}' is used outside the scope that defines it")
            return
        if isinstance(e, BinaryOp):
            self.expr(e.a)
            self.expr(e.b)
            self.same(e, e.a, e.b)
            if e.dtype != e.a.dtype:
                self.fail(f"{type(e).__name__} has dtype {e.dtype} but operands are {e.a.dtype}")
        elif isinstance(e, CmpOp):
            self.expr(e.a)
            self.expr(e.b)
            self.same(e, e.a, e.b)
        elif isinstance(e, And | Or):
            self.bool_expr(e.a, type(e).__name__)
            self.bool_expr(e.b, type(e).__name__)
        elif isinstance(e, Not):
            self.bool_expr(e.a, "not")
        elif isinstance(e, Select):
            self.bool_expr(e.condition, "select condition")
            self.expr(e.true_value)
            self.expr(e.false_value)
            self.same(e, e.true_value, e.false_value)
        elif isinstance(e, BufferLoad):
            self.access(e.buffer, e.indices)
        elif isinstance(e, Call):
            for a in e.args:
                self.expr(a)
            if e.kind == "intrin" and e.op not in MATH_INTRINSICS:
                self.fail(f"unknown intrinsic '{e.op}'; use call_extern for C functions")
        elif isinstance(e, Let):
            self.expr(e.value)
            self.define(e.var)
            self.expr(e.body)
            self.vars.discard(e.var)
        elif isinstance(e, Ramp):
            self.int_expr(e.base, "ramp base")
            self.int_expr(e.stride, "ramp stride")
        elif isinstance(e, Broadcast):
            self.expr(e.value)
        else:
            for name in ("value", "a"):
                sub = getattr(e, name, None)
                if isinstance(sub, PrimExpr):
                    self.expr(sub)


def verify(func: PrimFunc) -> PrimFunc:
    """Check ``func`` and return it unchanged; raise IRError on the first problem."""
    if not isinstance(func, PrimFunc):
        raise IRError(f"verify expects a PrimFunc, got {type(func).__name__}")
    _Verifier(func).run()
    return func
