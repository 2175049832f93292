"""Full and partial tiles: take the tail guards of a tile's loop nest out of full tiles.

A split that does not divide its extent leaves guards such as ``t * 14 + i < 20`` on the
stores of the tile's nest (i runs 0..13 inside the tile). Inside a reduction they cost a
compare and a branch per multiply-add, and LLVM turns an unrolled column of them into a
branch chain. ``split_full_tiles(nest)`` rewrites the nest as::

    if t * 14 + 13 < 20:   # the tile is full: every guard holds for every i
        nest without those guards
    else:
        nest as it was

Only guards that are linear in the nest's own constant-range loops and whose other terms
are defined outside the nest are taken out; anything else stays where it is (in both
copies). A nest with no such guard is returned unchanged.
"""

from __future__ import annotations

from ember.tir.expr import GE, LT, And, IntImm, PrimExpr, Var, const
from ember.tir.functor import IRMutator, free_vars, post_order_visit
from ember.tir.simplify import _collect, conjuncts, simplify
from ember.tir.stmt import For, IfThenElse, LetStmt, Stmt

Range = dict[Var, tuple[PrimExpr, PrimExpr]]


def range_of(e: PrimExpr, rng: Range) -> tuple[PrimExpr, PrimExpr] | None:
    """Inclusive (low, high) of the linear integer expression ``e`` when the variables of
    ``rng`` run over their ranges (None when ``e`` is not linear in them)."""
    terms, k = _collect(e)
    if terms is None:
        return None
    lo: PrimExpr = const(k, e.dtype)
    hi: PrimExpr = const(k, e.dtype)
    for term, coef in terms.items():
        if isinstance(term, Var) and term in rng:
            a, b = rng[term]
            lo = lo + (a if coef > 0 else b) * coef
            hi = hi + (b if coef > 0 else a) * coef
            continue
        if free_vars(term) & set(rng):
            return None
        lo = lo + term * coef
        hi = hi + term * coef
    return simplify(lo), simplify(hi)


def _inner_scope(nest: Stmt) -> tuple[Range, set[Var]]:
    """The constant ranges of the nest's loops and every variable the nest binds."""
    rng: Range = {}
    bound: set[Var] = set()

    def visit(node: object) -> None:
        if isinstance(node, For):
            bound.add(node.loop_var)
            if isinstance(node.min, IntImm) and isinstance(node.extent, IntImm):
                rng[node.loop_var] = (node.min, const(node.min.value + node.extent.value - 1))
        elif isinstance(node, LetStmt):
            bound.add(node.var)

    post_order_visit(nest, visit)
    return rng, bound


def _hoisted(cond: PrimExpr, rng: Range, bound: set[Var]) -> PrimExpr | None:
    """``cond`` (``e < b`` or ``e >= b``) made to hold for the whole nest, or None."""
    if not isinstance(cond, LT | GE) or free_vars(cond.b) & bound:
        return None
    lohi = range_of(simplify(cond.a), rng)
    if lohi is None or free_vars(lohi[0]) & bound or free_vars(lohi[1]) & bound:
        return None
    out = simplify(LT(lohi[1], cond.b) if isinstance(cond, LT) else GE(lohi[0], cond.b))
    return None if isinstance(out, IntImm) else out


class _Drop(IRMutator):
    """Remove the guard conjuncts whose hoisted form is one of ``full``."""

    def __init__(self, rng: Range, bound: set[Var], full: list[PrimExpr]) -> None:
        self.rng, self.bound, self.full = rng, bound, full

    def visit_IfThenElse(self, op: IfThenElse) -> Stmt:
        node = self.generic_stmt(op)
        assert isinstance(node, IfThenElse)
        if node.else_case is not None:
            return node
        keep = [
            c
            for c in conjuncts(node.condition)
            if not any(h == f for h in [_hoisted(c, self.rng, self.bound)] for f in self.full)
        ]
        if keep and len(keep) == len(conjuncts(node.condition)):
            return node
        if not keep:
            return node.then_case
        cond = keep[0]
        for c in keep[1:]:
            cond = And(cond, c)
        return IfThenElse(cond, node.then_case, node.else_case)


def split_full_tiles(nest: Stmt) -> Stmt:
    """``nest`` split into a guard-free copy for full tiles and the original for the rest
    (see the module docstring); ``nest`` itself when it has no guard to take out."""
    rng, bound = _inner_scope(nest)
    full: list[PrimExpr] = []

    def collect(node: object) -> None:
        if isinstance(node, IfThenElse) and node.else_case is None:
            for c in conjuncts(node.condition):
                h = _hoisted(c, rng, bound)
                if h is not None and not any(h == f for f in full):
                    full.append(h)

    post_order_visit(nest, collect)
    if not full:
        return nest
    cond = full[0]
    for c in full[1:]:
        cond = And(cond, c)
    return IfThenElse(cond, _Drop(rng, bound, full).visit_stmt(nest), nest)
