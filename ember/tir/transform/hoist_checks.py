"""hoist_checks: run-time index checks that do not depend on a loop move in front of it.

A ``tir.index_check`` (ONNX Gather's ids, ...) becomes a C helper call that wraps a negative
index and records an out-of-range one; having a side effect, gcc evaluates it once per
element. In ``take`` (Gather on axis 0) the checked row depends only on the outer loop, yet
it sat in the vectorized copy of the row: a call per float, no vector copy. Innermost loop
first, ``hoist_checks`` binds each check whose operands are free of the loop's variable
(and of everything bound inside the loop) to a ``LetStmt`` around the loop, so the row
becomes ``const int64_t row = check(ids[i]); for (j ...) out[i, j] = data[row, j]``; a
check hoisted from a loop can move further out of the enclosing one.

Only checks the loop evaluates on every iteration move, so no error is raised that the
original nest would not raise: the loop's extent must be a positive constant, and checks
under a condition (an ``if``, the arms of a ``Select``, the right side of ``&&`` / ``||``,
the body of an assertion) stay where they are, and so do checks reading a buffer the loop
writes or allocates; nothing moves across a call that may write memory. The index, its
wrapping and the error for an index outside ``[-n, n)`` are unchanged.

Gather of a 30000x256 float32 embedding by 1x512 int64 ids at one thread: 45 -> 8 us
(onnxruntime 17).
"""

from __future__ import annotations

from dataclasses import replace

from ember.tir.buffer import Buffer
from ember.tir.expr import And, BufferLoad, Call, IntImm, Let, Or, PrimExpr, Select, Var
from ember.tir.functor import IRMutator, _expr_children, free_vars, post_order_visit
from ember.tir.op import CHECK_KIND, CPACKED_KIND, PACKED_KIND
from ember.tir.stmt import (
    Allocate,
    BufferStore,
    Evaluate,
    For,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
)

__all__ = ["hoist_checks"]


def _inside(stmt: Stmt) -> tuple[set[Var], set[Buffer]]:
    """The variables ``stmt`` binds (its loops' and lets') and the buffers it writes or
    allocates: a check reading either must stay after them."""
    bound: set[Var] = set()
    written: set[Buffer] = set()

    def visit(node: object) -> None:
        if isinstance(node, For):
            bound.add(node.loop_var)
        elif isinstance(node, LetStmt | Let):
            bound.add(node.var)
        elif isinstance(node, BufferStore | Allocate):
            written.add(node.buffer)

    post_order_visit(stmt, visit)
    return bound, written


def _reads(e: PrimExpr) -> set[Buffer]:
    out: set[Buffer] = set()
    post_order_visit(e, lambda n: out.add(n.buffer) if isinstance(n, BufferLoad) else None)
    return out


def _always_run(loop: For) -> bool:
    return isinstance(loop.extent, IntImm) and loop.extent.value > 0


def _calls_out(stmt: Stmt) -> bool:
    """Whether ``stmt`` calls a function that may write memory (a packed call, an
    evaluated extern): no check moves across it."""
    found: list[object] = []

    def visit(node: object) -> None:
        evaluated = isinstance(node, Evaluate) and not isinstance(node.value, IntImm)
        if evaluated or isinstance(node, Call) and node.kind in (PACKED_KIND, CPACKED_KIND):
            found.append(node)

    post_order_visit(stmt, visit)
    return bool(found)


class _Collect:
    """The index checks evaluated unconditionally on every run of a statement."""

    def __init__(self, blocked: set[Var], written: set[Buffer]) -> None:
        self.blocked = blocked
        self.written = written
        self.found: list[Call] = []

    def invariant(self, e: Call) -> bool:
        return not free_vars(e) & self.blocked and not _reads(e) & self.written

    def expr(self, e: PrimExpr) -> None:
        if isinstance(e, Call) and e.kind == CHECK_KIND and self.invariant(e):
            if not any(c is e for c in self.found):
                self.found.append(e)
            return
        if isinstance(e, Select):
            self.expr(e.condition)
            return
        if isinstance(e, And | Or):
            self.expr(e.a)
            return
        for child in _expr_children(e):
            self.expr(child)

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, BufferStore):
            for i in s.indices:
                self.expr(i)
            self.expr(s.value)
        elif isinstance(s, LetStmt):
            self.expr(s.value)
            self.stmt(s.body)
        elif isinstance(s, Allocate):
            self.stmt(s.body)
        elif isinstance(s, For) and _always_run(s):
            self.expr(s.min)
            self.stmt(s.body)
        # IfThenElse, AssertStmt, loops that may not run: their checks are conditional


class _Replace(IRMutator):
    """Each hoisted check replaced by its variable; the let of an inner loop's hoisted
    check, whose variable now binds it further out, dropped."""

    def __init__(self, subst: list[tuple[Call, Var]]) -> None:
        self.subst = subst

    def visit_Call(self, e: Call) -> PrimExpr:  # noqa: N802 - visitor naming
        for call, var in self.subst:
            if call is e:
                return var
        return self.generic_expr(e)

    def visit_LetStmt(self, s: LetStmt) -> Stmt:  # noqa: N802 - visitor naming
        if any(call is s.value and var is s.var for call, var in self.subst):
            return self.visit_stmt(s.body)
        return self.generic_stmt(s)


def _let_vars(stmt: Stmt) -> dict[int, Var]:
    """The variables of the lets in ``stmt`` that bind an index check, by the check's id."""
    out: dict[int, Var] = {}

    def visit(node: object) -> None:
        value = node.value if isinstance(node, LetStmt) else None
        if isinstance(node, LetStmt) and isinstance(value, Call) and value.kind == CHECK_KIND:
            out[id(value)] = node.var

    post_order_visit(stmt, visit)
    return out


class _HoistChecks(IRMutator):
    def __init__(self) -> None:
        self.count = 0

    def visit_For(self, op: For) -> Stmt:  # noqa: N802 - visitor naming
        node = self.generic_stmt(op)
        assert isinstance(node, For)
        if not _always_run(node) or _calls_out(node.body):
            return node
        bound, written = _inside(node.body)
        collect = _Collect(bound | {node.loop_var}, written)
        collect.stmt(node.body)
        if not collect.found:
            return node
        lets = _let_vars(node.body)
        subst = []
        for call in collect.found:
            var = lets.get(id(call))
            if var is None:
                var = Var(f"checked{self.count}", call.dtype)
                self.count += 1
            subst.append((call, var))
        out: Stmt = replace(node, body=_Replace(subst).visit_stmt(node.body))
        for call, var in reversed(subst):
            out = LetStmt(var, call, out)
        return out


def hoist_checks(func: PrimFunc) -> PrimFunc:
    """``func`` with loop-invariant index checks bound in front of their loops (see the
    module docstring)."""
    return _HoistChecks().visit_func(func)
