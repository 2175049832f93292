"""guard_bounds: a tail tile's guards as the bounds of its loops.

The partial copy of a tiled nest (ember.tir.te.full_tiles) keeps the tail guards of its
stores, ``if t * 64 + j < 197`` inside the loop over ``j``: a compare per element that
keeps a vectorized loop from running whole vectors (gcc masks every lane, or gives up).
``guard_bounds`` rewrites, innermost first, a loop from 0 whose body is a guard without
an else branch:

* conjuncts that do not depend on the loop (nor on anything bound inside it) move out of
  it, as a guard around the loop;
* a conjunct ``v + r < b`` on the loop's variable ``v`` (coefficient one, ``r`` and ``b``
  free of ``v`` and of the body's variables) becomes the loop's extent,
  ``min(extent, b - r)``: the loop then runs exactly the elements the guard let through.

So ``for j in 0..64: if t * 64 + j < 197: S`` becomes ``for j in 0..min(64, 197 - t *
64): S``, which gcc vectorizes with one masked remainder. The rewrite keeps every store's
condition and order, so it never changes what a nest computes; nests without such guards
are returned unchanged.
"""

from __future__ import annotations

from dataclasses import replace

from ember.tir.expr import LT, And, IntImm, PrimExpr, Var, const
from ember.tir.functor import IRMutator, free_vars, post_order_visit
from ember.tir.op import min as tir_min
from ember.tir.simplify import _collect, conjuncts, simplify
from ember.tir.stmt import For, IfThenElse, LetStmt, PrimFunc, Stmt

__all__ = ["guard_bounds"]


def _all(conds: list[PrimExpr]) -> PrimExpr:
    out = conds[0]
    for c in conds[1:]:
        out = And(out, c)
    return out


def _bound_inside(stmt: Stmt) -> set[Var]:
    """The variables ``stmt`` binds (its loops' and lets')."""
    bound: set[Var] = set()

    def visit(node: object) -> None:
        if isinstance(node, For):
            bound.add(node.loop_var)
        elif isinstance(node, LetStmt):
            bound.add(node.var)

    post_order_visit(stmt, visit)
    return bound


def _limit(cond: PrimExpr, v: Var, inner: set[Var]) -> PrimExpr | None:
    """``b - r`` when ``cond`` is ``v + r < b`` with ``r`` and ``b`` free of ``v`` and of
    ``inner``; else None."""
    if not isinstance(cond, LT) or free_vars(cond.b) & (inner | {v}):
        return None
    terms, k = _collect(simplify(cond.a))
    if terms is None or terms.get(v) != 1:
        return None
    rest: PrimExpr = const(k, v.dtype)
    for term, coef in terms.items():
        if term is v:
            continue
        if free_vars(term) & (inner | {v}):
            return None
        rest = rest + term * coef
    return simplify(cond.b - rest)


class _GuardBounds(IRMutator):
    def visit_For(self, op: For) -> Stmt:  # noqa: N802 - visitor naming
        node = self.generic_stmt(op)
        assert isinstance(node, For)
        body = node.body
        if not isinstance(body, IfThenElse) or body.else_case is not None:
            return node
        if not (isinstance(node.min, IntImm) and node.min.value == 0):
            return node
        v = node.loop_var
        inner = _bound_inside(body.then_case)
        outside: list[PrimExpr] = []
        kept: list[PrimExpr] = []
        extent = node.extent
        for c in conjuncts(body.condition):
            used = free_vars(c)
            if v not in used and not used & inner:
                outside.append(c)
                continue
            limit = _limit(c, v, inner)
            if limit is not None:
                extent = tir_min(extent, limit)
                continue
            kept.append(c)
        if not outside and extent is node.extent:
            return node
        new_body = IfThenElse(_all(kept), body.then_case, None) if kept else body.then_case
        loop: Stmt = replace(node, extent=simplify(extent), body=new_body)
        return IfThenElse(_all(outside), loop, None) if outside else loop


def guard_bounds(func: PrimFunc) -> PrimFunc:
    """``func`` with its loops' tail guards as loop bounds (see the module docstring)."""
    return _GuardBounds().visit_func(func)
