"""partition_loops: a vectorized loop whose selects switch at fixed positions becomes one
loop per stretch where every such select goes one way.

Pad along the last axis reads ``x[.., select(j - 1 >= 128, 255 - j, select(j - 1 < 0,
1 - j, j - 1))]`` (reflect; edge clamps with min/max, wrap and constant mode select too):
a per-lane index, so gcc gathers or gives up, and constant mode masks every load. Each
comparison (or min/max) whose two sides differ by ``c * j + k`` (nothing but the loop's
variable, a constant coefficient) changes its outcome at one position; ``partition_loops``
cuts the loop's constant range at those positions (at most ``MAX_PIECES`` pieces), and in
each piece replaces every such comparison by its constant outcome, so the reflected
border loops are a few scalar iterations and the interior is ``x[.., j - 1]``: a plain
vector copy. Comparisons that also involve other variables (the row's own pad test) stay.
The pieces run in order over the same positions, each with the body's value there, so the
nest computes exactly what it did.

Pad of 1x64x128x128 by 1 on H and W at one thread (onnxruntime's): reflect 326 -> 68 us
(111), edge 319 -> 67 (112), wrap 327 -> 80 (141), constant 76 -> 81 (103, unchanged
within noise); Concat of three 1x64x56x56 on the last axis 31 -> 26 (55).
"""

from __future__ import annotations

from dataclasses import replace

from ember.tir.expr import (
    GE,
    GT,
    LE,
    LT,
    IntImm,
    Max,
    Min,
    PrimExpr,
    Var,
)
from ember.tir.functor import IRMutator, post_order_visit, substitute
from ember.tir.simplify import _collect, simplify
from ember.tir.stmt import For, ForKind, PrimFunc, SeqStmt, Stmt

__all__ = ["partition_loops"]

#: at most this many loops replace one (a concat of many pieces along the axis stays whole).
MAX_PIECES = 5
#: a piece shorter than this runs as a plain (serial) loop.
MIN_VECTOR_PIECE = 4

_COMPARE = (LT, LE, GT, GE)


def _slope(a: PrimExpr, b: PrimExpr, v: Var) -> tuple[int, int] | None:
    """``(c, k)`` when ``a - b`` is ``c * v + k`` with ``c != 0``, else None."""
    if a.dtype != b.dtype or not a.dtype.startswith("int"):
        return None
    terms, k = _collect(simplify(a - b))
    if terms is None or set(terms) != {v}:
        return None
    return terms[v], k


def _decision(e: PrimExpr, v: Var) -> tuple[int, int] | None:
    if isinstance(e, (*_COMPARE, Min, Max)):
        return _slope(e.a, e.b, v)  # type: ignore[attr-defined]
    return None


def _holds(e: PrimExpr, d: int) -> bool:
    """The outcome of comparison ``e`` when ``a - b == d`` (min and max: whether ``a`` is
    the result)."""
    if isinstance(e, Min):
        return d <= 0
    if isinstance(e, Max):
        return d >= 0
    outcome: dict[type, bool] = {LT: d < 0, LE: d <= 0, GT: d > 0, GE: d >= 0}
    return outcome[type(e)]


def _cuts(body: Stmt, v: Var, lo: int, hi: int) -> list[int]:
    """The positions in (lo, hi) where a decision on ``v`` alone may change."""
    out: set[int] = set()

    def visit(node: object) -> None:
        if not isinstance(node, PrimExpr):
            return
        d = _decision(node, v)
        if d is None:
            return
        c, k = d
        zero = -k // c  # c * v + k crosses zero next to here
        for p in range(zero - 1, zero + 3):
            if lo < p < hi and _holds(node, c * (p - 1) + k) != _holds(node, c * p + k):
                out.add(p)

    post_order_visit(body, visit)
    return sorted(out)


class _Fold(IRMutator):
    """Decisions on ``v`` alone that go one way over [lo, hi) replaced by that way."""

    def __init__(self, v: Var, lo: int, hi: int) -> None:
        self.v, self.lo, self.hi = v, lo, hi

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        e = super().visit_expr(e)  # inner decisions first: max(min(v - 1, 127), 0)
        d = _decision(e, self.v)
        if d is not None:
            c, k = d
            first = _holds(e, c * self.lo + k)  # a - b is monotone in v: both ends agree
            if first == _holds(e, c * (self.hi - 1) + k):
                if isinstance(e, Min | Max):
                    return e.a if first else e.b
                return IntImm(e.dtype, int(first))
        return e


class _Partition(IRMutator):
    def visit_For(self, op: For) -> Stmt:  # noqa: N802 - visitor naming
        node = self.generic_stmt(op)
        assert isinstance(node, For)
        if node.kind != ForKind.VECTORIZED:
            return node
        if not isinstance(node.min, IntImm) or not isinstance(node.extent, IntImm):
            return node
        lo, hi = node.min.value, node.min.value + node.extent.value
        cuts = _cuts(node.body, node.loop_var, lo, hi)
        if not cuts or len(cuts) + 1 > MAX_PIECES:
            return node
        pieces: list[Stmt] = []
        bounds = [lo, *cuts, hi]
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            v = Var(node.loop_var.name, node.loop_var.dtype)
            body = _Fold(node.loop_var, a, b).visit_stmt(node.body)
            body = simplify(substitute(body, {node.loop_var: v}), {v: (a, b - 1)})
            kind = node.kind if b - a >= MIN_VECTOR_PIECE else ForKind.SERIAL
            lo_b, ext = IntImm(node.min.dtype, a), IntImm(node.extent.dtype, b - a)
            piece = replace(node, loop_var=v, min=lo_b, extent=ext, kind=kind, body=body)
            # a decision inside another (edge's clamp) has its cut once the outer one went
            again = self.visit_For(piece) if kind == ForKind.VECTORIZED else piece
            pieces.extend(again.seq if isinstance(again, SeqStmt) else [again])
        return SeqStmt(tuple(pieces))


def partition_loops(func: PrimFunc) -> PrimFunc:
    """``func`` with its vectorized loops cut where their selects switch (see the module
    docstring)."""
    return _Partition().visit_func(func)
