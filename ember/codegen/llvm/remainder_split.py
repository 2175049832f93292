"""Vectorized loops that take ``i // m`` and ``i % m`` of their own variable: split by ``m``.

LLVM must not vectorize a loop whose body takes a power-of-two remainder of its own
variable (``loop_hints.unsafe_to_vectorize``: LLVM 22 miscompiles it), so such a loop ran
one scalar lane at a time, its whole body included: dbnet's output head
(``sigmoid(p0[.., i // 2, .., r % 2 * 2 + i % 2] + b)`` over rows of 320, a depth-to-space
read) took 0.43 ms on llvm against c's 0.07. When ``m`` (a power of two up to MAX_FACTOR)
divides the loop's constant extent, ``for i in vectorized(n)`` becomes ``for o in
vectorized(n / m)`` over the ``m`` copies of its body with ``i // m = o`` and ``i % m = r``
(r = 0 .. m - 1, constants): the accesses are strided in ``o``, no remainder of it is
left, and LLVM vectorizes the loop (its interleaved loads and stores). Each element is
computed by the same operations: results stay bitwise equal. Loops still unsafe after the
split, or whose variable is divided by two different factors, stay as they were.
"""

from __future__ import annotations

from ember.codegen.llvm.loop_hints import unsafe_to_vectorize
from ember.tir.expr import FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Var
from ember.tir.functor import IRMutator, post_order_visit, substitute
from ember.tir.simplify import simplify
from ember.tir.stmt import For, ForKind, PrimFunc, Stmt, seq

#: the largest factor split out (the body is written out this many times)
MAX_FACTOR = 8


def _factors(var: Var, body: Stmt) -> set[int]:
    """The divisors ``m`` of the ``var // m`` and ``var % m`` in ``body`` (of ``var`` itself)."""
    found: set[int] = set()

    def fn(n: object) -> None:
        if isinstance(n, FloorDiv | FloorMod) and (n.a is var or n.a == var):
            b = n.b
            found.add(b.value if isinstance(b, IntImm) else -1)

    post_order_visit(body, fn)
    return found


class _Replace(IRMutator):
    """``var // m`` -> ``outer``, ``var % m`` -> ``rest``."""

    def __init__(self, var: Var, m: int, outer: PrimExpr, rest: PrimExpr) -> None:
        self.var, self.m, self.outer, self.rest = var, m, outer, rest

    def _match(self, e: FloorDiv | FloorMod) -> bool:
        return e.a == self.var and isinstance(e.b, IntImm) and e.b.value == self.m

    def visit_FloorDiv(self, e: FloorDiv) -> PrimExpr:
        return self.outer if self._match(e) else self.generic_expr(e)

    def visit_FloorMod(self, e: FloorMod) -> PrimExpr:
        return self.rest if self._match(e) else self.generic_expr(e)


class _Split(IRMutator):
    def visit_For(self, op: For) -> Stmt:
        op = self.generic_stmt(op)  # type: ignore[assignment]
        if (
            op.kind is not ForKind.VECTORIZED
            or not isinstance(op.extent, IntImm)
            or op.min != IntImm(op.min.dtype, 0)
        ):
            return op
        factors = _factors(op.loop_var, op.body)
        if len(factors) != 1:
            return op
        (m,) = factors
        n = op.extent.value
        if not 1 < m <= MAX_FACTOR or m & (m - 1) or n % m:
            return op
        var = op.loop_var
        outer = Var(var.name + "_o", var.dtype)
        bodies = []
        for r in range(m):
            rest = IntImm(var.dtype, r)
            body = _Replace(var, m, outer, rest).visit_stmt(op.body)
            whole = Mul(outer, IntImm(var.dtype, m)) + rest
            bodies.append(simplify(substitute(body, {var: whole})))
        split = For(outer, op.min, IntImm(op.extent.dtype, n // m), op.kind, seq(*bodies))
        return op if unsafe_to_vectorize(split) else split


def split_remainder_loops(func: PrimFunc) -> PrimFunc:
    """``func`` with each vectorized loop that divides its own variable by one power of two
    (up to MAX_FACTOR, dividing its extent) split by it (see the module text)."""
    return _Split().visit_func(func)


__all__ = ["MAX_FACTOR", "split_remainder_loops"]
