"""Generic traversal of the loop IR: a rebuilding mutator, a visitor, substitution.

``IRMutator`` dispatches on the node class name (``visit_For``, ``visit_Add``, ...) and
falls back to rebuilding a node from its mutated children, returning the very same object
when nothing changed (so passes preserve sharing). Example::

    class RenameLoops(IRMutator):
        def visit_For(self, op):
            op = self.generic_stmt(op)
            return replace(op, annotations=(("seen", True),))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from typing import Any

from ember.tir.buffer import Buffer
from ember.tir.expr import PrimExpr, Var
from ember.tir.stmt import PrimFunc, Stmt

Node = PrimExpr | Stmt


def _children_fields(node: Any) -> list[str]:
    cached = _FIELDS.get(type(node))
    if cached is None:
        cached = [f.name for f in fields(node)]
        _FIELDS[type(node)] = cached
    return cached


_FIELDS: dict[type, list[str]] = {}


class IRMutator:
    """Rebuild IR bottom-up; override ``visit_<Class>`` for the nodes you change."""

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        """Dispatch an expression."""
        method = getattr(self, "visit_" + type(e).__name__, None)
        if method is not None:
            return method(e)  # type: ignore[no-any-return]
        return self.generic_expr(e)

    def visit_stmt(self, s: Stmt) -> Stmt:
        """Dispatch a statement."""
        method = getattr(self, "visit_" + type(s).__name__, None)
        if method is not None:
            return method(s)  # type: ignore[no-any-return]
        return self.generic_stmt(s)

    def visit_buffer(self, b: Buffer) -> Buffer:
        """Map a buffer reference (identity by default)."""
        return b

    def _value(self, v: Any) -> Any:
        if isinstance(v, PrimExpr):
            return self.visit_expr(v)
        if isinstance(v, Stmt):
            return self.visit_stmt(v)
        if isinstance(v, Buffer):
            return self.visit_buffer(v)
        if isinstance(v, tuple) and v and isinstance(v[0], PrimExpr | Stmt):
            new = tuple(self._value(x) for x in v)
            return v if all(a is b for a, b in zip(new, v, strict=True)) else new
        return v

    def generic_expr(self, e: PrimExpr) -> PrimExpr:
        """Rebuild ``e`` from its mutated children."""
        if isinstance(e, Var):
            return e
        return self._rebuild(e)  # type: ignore[no-any-return]

    def generic_stmt(self, s: Stmt) -> Stmt:
        """Rebuild ``s`` from its mutated children."""
        return self._rebuild(s)  # type: ignore[no-any-return]

    def _rebuild(self, node: Any) -> Any:
        changes: dict[str, Any] = {}
        for name in _children_fields(node):
            old = getattr(node, name)
            new = self._value(old)
            if new is not old:
                changes[name] = new
        return replace(node, **changes) if changes else node

    def visit_func(self, f: PrimFunc) -> PrimFunc:
        """Mutate a function body."""
        body = self.visit_stmt(f.body)
        return f if body is f.body else f.with_body(body)


class IRVisitor:
    """Walk IR pre-order; override ``visit_<Class>`` and call ``generic_visit`` to recurse."""

    def visit(self, node: Any) -> None:
        """Dispatch a node."""
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            method(node)
        else:
            self.generic_visit(node)

    def visit_buffer(self, b: Buffer) -> None:
        """Called for each buffer reference (no-op by default)."""

    def generic_visit(self, node: Any) -> None:
        """Visit every child of ``node``."""
        if isinstance(node, Var):
            return
        for name in _children_fields(node):
            v = getattr(node, name)
            if isinstance(v, PrimExpr | Stmt):
                self.visit(v)
            elif isinstance(v, Buffer):
                self.visit_buffer(v)
            elif isinstance(v, tuple):
                for x in v:
                    if isinstance(x, PrimExpr | Stmt):
                        self.visit(x)


def post_order_visit(node: Node, fn: Callable[[Any], None]) -> None:
    """Call ``fn`` on every expression and statement below (and including) ``node``."""

    class _V(IRVisitor):
        def visit(self, n: Any) -> None:
            self.generic_visit(n)
            fn(n)

    _V().visit(node)


class _Substituter(IRMutator):
    def __init__(self, vmap: Mapping[Var, PrimExpr], bmap: Mapping[Buffer, Buffer]) -> None:
        self.vmap = vmap
        self.bmap = bmap

    def visit_Var(self, v: Var) -> PrimExpr:
        return self.vmap.get(v, v)

    def visit_buffer(self, b: Buffer) -> Buffer:
        return self.bmap.get(b, b)


def substitute(
    node: Any, vmap: Mapping[Var, PrimExpr], bmap: Mapping[Buffer, Buffer] | None = None
) -> Any:
    """Replace variables (and optionally buffers) in an expression or statement."""
    sub = _Substituter(vmap, bmap or {})
    if isinstance(node, PrimExpr):
        return sub.visit_expr(node)
    return sub.visit_stmt(node)


def free_vars(node: Node) -> set[Var]:
    """Variables used in ``node`` (including bound ones; callers filter)."""
    out: set[Var] = set()

    def fn(n: Any) -> None:
        if isinstance(n, Var):
            out.add(n)

    post_order_visit(node, fn)
    return out


def exceeds(e: PrimExpr, max_depth: int, max_nodes: int) -> bool:
    """Whether expression ``e`` is deeper than ``max_depth`` or has more than ``max_nodes``
    nodes as printed (a node shared by two parents counts twice).

    Iterative, and linear in the number of distinct nodes: safe on any input, unlike the
    recursive visitors it protects.
    """
    depth: dict[int, int] = {}
    size: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(e, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in depth:
            continue
        kids = _expr_children(node)
        if not done:
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in depth)
            continue
        depth[id(node)] = 1 + max((depth[id(k)] for k in kids), default=0)
        size[id(node)] = 1 + sum(size[id(k)] for k in kids)
        if depth[id(node)] > max_depth or size[id(node)] > max_nodes:
            return True
    return False


def _expr_children(node: Any) -> list[PrimExpr]:
    if not isinstance(node, PrimExpr) or isinstance(node, Var):
        return []
    out: list[PrimExpr] = []
    for name in _children_fields(node):
        v = getattr(node, name)
        if isinstance(v, PrimExpr):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, PrimExpr))
    return out
