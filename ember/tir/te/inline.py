"""Inlining of compute_inline stages with linear code size and bounded expression depth.

A consumer that reads an inlined producer more than once at the same indices (ReLU's
``x < 0 ? 0 : x``) gets the producer's value bound once by a ``Let`` placed at the smallest
subexpression holding every such read, instead of one copy per read: code size stays
linear in the number of fused operators, never exponential. An inlined stage whose body
grows deeper than ``MAX_INLINE_DEPTH`` or larger than ``MAX_INLINE_NODES`` is computed into
a buffer of its own instead (``lower`` calls these stages *materialized*), which keeps every
expression shallow enough for the recursive passes, printer and code generator.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import fields, replace
from typing import Any

from ember.tir.expr import Let, PrimExpr, Var
from ember.tir.functor import IRMutator, exceeds, post_order_visit, substitute
from ember.tir.te.tensor import ComputeOp, Reduce, TensorLoad

#: deepest expression an inlined stage may have before it is computed into a buffer
MAX_INLINE_DEPTH = 48
#: largest expression (nodes, counting repeats) an inlined stage may have likewise
MAX_INLINE_NODES = 4096

_Key = tuple[int, tuple[PrimExpr, ...]]


class Inliner(IRMutator):
    """Replace reads of inlined stages by their (already inlined) bodies."""

    def __init__(self, bodies: dict[ComputeOp, PrimExpr]) -> None:
        self.bodies = bodies

    def visit_TensorLoad(self, e: TensorLoad) -> PrimExpr:
        """A read of an inlined stage becomes its body at the read's indices."""
        e = self.generic_expr(e)  # type: ignore[assignment]
        op = e.tensor.op
        if isinstance(op, ComputeOp) and op in self.bodies:
            vmap = {iv.var: i for iv, i in zip(op.axis, e.indices, strict=True)}
            return substitute(self.bodies[op], vmap)  # type: ignore[no-any-return]
        return e


def inline_body(body: PrimExpr, inlined: dict[ComputeOp, PrimExpr]) -> PrimExpr:
    """``body`` with every read of an inlined stage replaced, repeated reads bound once."""
    if isinstance(body, Reduce):
        source = inline_body(body.source, inlined)
        init = Inliner(inlined).visit_expr(body.init) if body.init is not None else None
        if source is body.source and init is body.init:
            return body
        return replace(body, source=source, init=init)
    return Inliner(inlined).visit_expr(bind_shared(body, inlined))


def bind_shared(body: PrimExpr, inlined: dict[ComputeOp, PrimExpr]) -> PrimExpr:
    """Bind each inlined producer read more than once at the same indices with a ``Let``."""
    loads: list[TensorLoad] = []
    post_order_visit(body, lambda n: loads.append(n) if isinstance(n, TensorLoad) else None)
    counts: Counter[_Key] = Counter()
    for load in loads:
        if load.tensor.op in inlined and not _has_load(load.indices):
            counts[(id(load.tensor), load.indices)] += 1
    shared = {k: n for k, n in counts.items() if n > 1}
    if not shared:
        return body
    binder = _Binder(shared)
    out, _ = binder.rewrite(body)
    return out


def _has_load(indices: tuple[PrimExpr, ...]) -> bool:
    found: list[bool] = []
    for i in indices:
        post_order_visit(i, lambda n: found.append(True) if isinstance(n, TensorLoad) else None)
    return bool(found)


class _Binder:
    """Rewrite a (small, not yet inlined) compute body, placing each Let at the lowest
    subexpression that holds all reads of its key."""

    def __init__(self, shared: dict[_Key, int]) -> None:
        self.shared = shared
        self.vars: dict[_Key, Var] = {}
        self.loads: dict[_Key, TensorLoad] = {}

    def rewrite(self, e: Any) -> tuple[Any, Counter[_Key]]:
        if isinstance(e, TensorLoad):
            key = (id(e.tensor), e.indices)
            if key in self.shared:
                if key not in self.vars:
                    self.vars[key] = Var(_var_name(e.tensor.op.name), e.dtype)
                    self.loads[key] = e
                return self.vars[key], Counter({key: 1})
        if not isinstance(e, PrimExpr) or isinstance(e, Var):
            return e, Counter()
        seen: Counter[_Key] = Counter()
        changes: dict[str, Any] = {}
        for f in fields(e):  # type: ignore[arg-type]
            old = getattr(e, f.name)
            if isinstance(old, tuple):
                parts = [self.rewrite(x) for x in old]
                new: Any = tuple(p[0] for p in parts)
                for p in parts:
                    seen.update(p[1])
                if all(a is b for a, b in zip(new, old, strict=True)):
                    new = old
            else:
                new, sub = self.rewrite(old)
                seen.update(sub)
            if new is not old:
                changes[f.name] = new
        out: PrimExpr = replace(e, **changes) if changes else e  # type: ignore[type-var]
        for key in sorted(seen, key=lambda k: self.vars[k].name):
            if seen[key] == self.shared[key]:
                out = Let(self.vars[key], self.loads[key], out)
                del seen[key]
        return out, seen


def _var_name(op_name: str) -> str:
    text = "".join(c if (c.isascii() and c.isalnum()) or c == "_" else "_" for c in op_name)
    return "v_" + text


def too_big(e: PrimExpr) -> bool:
    """Whether an inlined body exceeds ``MAX_INLINE_DEPTH`` or ``MAX_INLINE_NODES``."""
    return exceeds(e, MAX_INLINE_DEPTH, MAX_INLINE_NODES)
