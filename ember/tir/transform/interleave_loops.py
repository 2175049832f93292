"""interleave_loops: vectorized loops whose elements come from ``g`` places in turn.

A vectorized loop whose body reads its variable as ``i % g`` (a channel shuffle: ShuffleNet's
reshape-transpose-reshape of g groups, inlined with the concatenation of the groups that
produced them) computed, for every element, which of the g sources it reads and a chain of
selects over them. ``interleave_loops`` rewrites such a loop of ``n`` iterations as a loop
of ``n / g`` iterations over g copies of its body, copy ``l`` with ``i = o * g + l``: the
simplifier then folds ``i % g`` to ``l`` and ``i // g`` to ``o``, so each copy reads one
source at consecutive addresses and the C compiler folds the selects against the loop's
range. The same values, element for element.

A loop whose body reads ``i % m`` for a larger ``m`` (at least MIN_BLOCK, dividing ``n``:
attention heads merged back, ``transpose(0, 2, 1, 3)`` then a reshape, reads runs of 64)
becomes a serial loop over the ``n / m`` blocks around a vectorized loop of ``m``, each
block one contiguous run instead of a gather (Whisper-tiny's head merge, 1500 x 384:
345 -> ~100 us).
"""

from __future__ import annotations

from typing import Any

from ember.tir.expr import FloorMod, IntImm, Mod, Var, const
from ember.tir.functor import post_order_visit, substitute
from ember.tir.simplify import simplify
from ember.tir.stmt import For, ForKind, PrimFunc, Stmt, seq
from ember.tir.transform.constant_loops import ConstantLoopRewriter

__all__ = ["MAX_INTERLEAVE", "interleave_loops", "interleave_of"]

#: the most sources a loop is interleaved over (copies of its body).
MAX_INTERLEAVE = 8
#: the shortest run (``i % m``) a vectorized loop is split into blocks of.
MIN_BLOCK = 16


def _modulus(loop: For, extent: int, lo: int, hi: int) -> int:
    """The smallest ``m`` in lo..hi, dividing ``extent`` and below it, of the loop's body's
    ``var % m``; 0 for none."""
    var = loop.loop_var
    found: list[int] = []

    def visit(node: Any) -> None:
        if isinstance(node, FloorMod | Mod) and node.a is var and isinstance(node.b, IntImm):
            m = int(node.b.value)
            if lo <= m <= hi and m < extent and extent % m == 0:
                found.append(m)

    post_order_visit(loop.body, visit)
    return min(found) if found else 0


def block_of(loop: For, extent: int) -> int:
    """The ``m`` (MIN_BLOCK.., dividing ``extent`` and below it) of the loop's body's
    ``var % m``, the smallest if several; 0 for none."""
    return _modulus(loop, extent, MIN_BLOCK, extent)


def interleave_of(loop: For, extent: int) -> int:
    """The ``g`` (2..MAX_INTERLEAVE, dividing ``extent`` and below it) of the loop's body's
    ``var % g``, the smallest if several; 0 for none."""
    return _modulus(loop, extent, 2, MAX_INTERLEAVE)


class _Interleave(ConstantLoopRewriter):
    kind = ForKind.VECTORIZED

    def rewrite(self, op: For, extent: int) -> Stmt:
        if int(op.min.value) != 0:  # type: ignore[attr-defined]
            return op
        g = interleave_of(op, extent)
        if not g:
            return self.blocks(op, extent)
        var = op.loop_var
        outer = Var(var.name + "_o", var.dtype)
        copies = [
            simplify(
                substitute(op.body, {var: outer * const(g, var.dtype) + const(lane, var.dtype)})
            )
            for lane in range(g)
        ]
        return For(outer, const(0, var.dtype), const(extent // g, var.dtype), op.kind, seq(*copies))

    def blocks(self, op: For, extent: int) -> Stmt:
        """``op`` as blocks of its body's ``var % m`` (see the module docstring)."""
        m = block_of(op, extent)
        if not m:
            return op
        var = op.loop_var
        outer, inner = Var(var.name + "_b", var.dtype), Var(var.name + "_l", var.dtype)
        body = substitute(op.body, {var: outer * const(m, var.dtype) + inner})
        body = simplify(body, {inner: (0, m - 1), outer: (0, extent // m - 1)})
        vector = For(inner, const(0, var.dtype), const(m, var.dtype), op.kind, body)
        return For(
            outer, const(0, var.dtype), const(extent // m, var.dtype), ForKind.SERIAL, vector
        )


def interleave_loops(func: PrimFunc) -> PrimFunc:
    """``func`` with its interleaved vectorized loops rewritten (see the module docstring)."""
    body = _Interleave().visit_stmt(func.body)
    return func if body is func.body else func.with_body(body)
