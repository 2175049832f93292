"""ConstantLoopRewriter: the walk the loop-rewriting passes share.

``unroll_loops`` (unrolled loops), ``codegen.llvm.select_split`` and
``codegen.llvm.vector_split`` (vectorized loops) each rewrite, innermost first, the loops
of one kind whose bounds are integer constants and leave every other loop as it is. A pass
subclasses ``ConstantLoopRewriter``, names the ``kind`` and whether the loop's ``min``
must be constant too (``constant_min``), and writes ``rewrite(op, extent)``, which may
return ``op`` unchanged.

Example::

    class _Pass(ConstantLoopRewriter):
        kind = ForKind.UNROLLED

        def rewrite(self, op: For, extent: int) -> Stmt:
            return op if extent > 64 else ...
"""

from __future__ import annotations

from ember.tir.expr import IntImm
from ember.tir.functor import IRMutator
from ember.tir.stmt import For, ForKind, Stmt


class ConstantLoopRewriter(IRMutator):
    """Rewrites the loops of ``kind`` with a constant extent (and, with ``constant_min``,
    a constant min) by ``rewrite``, after their bodies."""

    #: the loops this pass rewrites
    kind: ForKind = ForKind.SERIAL
    #: whether the loop's min must be an integer constant too
    constant_min: bool = True

    def visit_For(self, op: For) -> Stmt:
        """Rewrite the body, then ``op`` itself when it qualifies."""
        op = self.generic_stmt(op)  # type: ignore[assignment]
        if op.kind is not self.kind or not isinstance(op.extent, IntImm):
            return op
        if self.constant_min and not isinstance(op.min, IntImm):
            return op
        return self.rewrite(op, op.extent.value)

    def rewrite(self, op: For, extent: int) -> Stmt:
        """The statement replacing loop ``op`` of ``extent`` iterations (``op`` to keep it)."""
        raise NotImplementedError


__all__ = ["ConstantLoopRewriter"]
