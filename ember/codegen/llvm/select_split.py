"""split_select_loops: vectorized loops that pick a source by their own index, split.

A channels-last concatenate is one vectorized loop over the output channels choosing the
input by comparisons of the loop variable with constants::

    for i3 in vectorized(128):
        out[.., i3] = select(i3 < 64, select(i3 < 32, p0[.., i3], p1[.., i3 - 32]), ...)

The loads may fault, so the back end branches between them and LLVM's loop vectorizer
if-converts the loop into masked gathers of every input (yolo's 4 x 32 -> 128 concatenate
ran 2.5x c's time). Here such a loop becomes one loop per interval on which every such
condition is constant, the selects resolved: ``for i in 0..32: out[i] = p0[i]``, ... each
a contiguous copy that ``vectorize_loops`` / ``split_vector_loops`` write as vector code.

Only vectorized loops of constant bounds whose selects compare the loop variable itself
with an integer constant are split, into at most ``MAX_PIECES`` loops.
"""

from __future__ import annotations

from typing import Any

from ember.tir.expr import GE, GT, LE, LT, CmpOp, IntImm, PrimExpr, Select, Var
from ember.tir.functor import IRMutator, post_order_visit, substitute
from ember.tir.simplify import simplify
from ember.tir.stmt import For, ForKind, PrimFunc, Stmt, seq
from ember.tir.transform.constant_loops import ConstantLoopRewriter

#: the most loops one loop is split into
MAX_PIECES = 8


def _threshold(cond: PrimExpr, var: Var) -> int | None:
    """``t`` when ``cond`` is a comparison of ``var`` with a constant that is constant
    for ``var < t`` and for ``var >= t`` (its value changes at ``t``), else None."""
    if not isinstance(cond, LT | LE | GT | GE):
        return None
    a, b = cond.a, cond.b
    if a is var and isinstance(b, IntImm):
        c, var_left = b.value, True
    elif b is var and isinstance(a, IntImm):
        c, var_left = a.value, False
    else:
        return None
    # var < c, var >= c, c > var, c <= var change at c; the others at c + 1
    at_c = isinstance(cond, LT | GE) if var_left else isinstance(cond, GT | LE)
    return c if at_c else c + 1


def _holds(cond: CmpOp, var: Var, value: int) -> bool:
    """``cond`` (a comparison of ``var`` with a constant) at ``var == value``."""
    a = value if cond.a is var else cond.a.value  # type: ignore[attr-defined]
    b = value if cond.b is var else cond.b.value  # type: ignore[attr-defined]
    if isinstance(cond, LT):
        return bool(a < b)
    if isinstance(cond, LE):
        return bool(a <= b)
    if isinstance(cond, GT):
        return bool(a > b)
    return bool(a >= b)


class _Resolve(IRMutator):
    """Selects on comparisons of ``var`` replaced by the side taken at ``var == value``."""

    def __init__(self, var: Var, value: int) -> None:
        self.var, self.value = var, value

    def visit_Select(self, e: Select) -> PrimExpr:
        if _threshold(e.condition, self.var) is not None:
            taken = e.true_value if _holds(e.condition, self.var, self.value) else e.false_value  # type: ignore[arg-type]
            return self.visit_expr(taken)
        return self.generic_expr(e)


def _cuts(op: For) -> list[int]:
    """The thresholds of ``op``'s selects strictly inside its range, sorted."""
    lo = op.min.value  # type: ignore[attr-defined]
    hi = lo + op.extent.value  # type: ignore[attr-defined]
    cuts: set[int] = set()

    def fn(n: Any) -> None:
        if isinstance(n, Select):
            t = _threshold(n.condition, op.loop_var)
            if t is not None and lo < t < hi:
                cuts.add(t)

    post_order_visit(op.body, fn)
    return sorted(cuts)


def _split(op: For, cuts: list[int]) -> Stmt:
    lo = op.min.value  # type: ignore[attr-defined]
    bounds = [lo, *cuts, lo + op.extent.value]  # type: ignore[attr-defined]
    pieces: list[Stmt] = []
    for start, stop in zip(bounds, bounds[1:], strict=False):
        body = _Resolve(op.loop_var, start).visit_stmt(op.body)
        dtype = op.loop_var.dtype
        if stop - start == 1:
            pieces.append(substitute(body, {op.loop_var: IntImm(dtype, start)}))
            continue
        v = Var(f"{op.loop_var.name}_s{start}", dtype)
        shifted = substitute(body, {op.loop_var: simplify(v + IntImm(dtype, start))})
        pieces.append(For(v, IntImm(dtype, 0), IntImm(dtype, stop - start), op.kind, shifted))
    return seq(pieces)


class _Split(ConstantLoopRewriter):
    kind = ForKind.VECTORIZED

    def rewrite(self, op: For, extent: int) -> Stmt:
        cuts = _cuts(op)
        if not cuts or len(cuts) + 1 > MAX_PIECES:
            return op
        return _split(op, cuts)


def split_select_loops(func: PrimFunc) -> PrimFunc:
    """``func`` with each vectorized loop that selects by comparing its own variable with
    constants split into loops on which those selects are resolved (run before
    ``split_vector_loops`` and ``vectorize_loops``)."""
    return _Split().visit_func(func)


__all__ = ["split_select_loops", "MAX_PIECES"]
