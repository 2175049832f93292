"""Helpers shared by the graph passes: rebuilding a function body bottom-up while seeing both
the original and the rebuilt node, use counts, and applying a body rewrite to a module."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ember.ir.expr import (
    Call,
    Expr,
    Function,
    Tuple,
    TupleGetItem,
    children,
    post_order,
    with_children,
)
from ember.ir.module import IRModule

#: ``fn(old, rebuilt, new)``: ``rebuilt`` is ``old`` with rewritten children; ``new`` maps
#: ``id(original node)`` to its replacement. Return a replacement or None to keep ``rebuilt``.
Rule = Callable[[Expr, Expr, Mapping[int, Expr]], "Expr | None"]


def rewrite_graph(root: Expr, rule: Rule) -> Expr:
    """Rebuild ``root`` children-first, applying ``rule`` to every node once (iterative)."""
    new: dict[int, Expr] = {}
    for node in post_order(root):
        kids = tuple(new[id(c)] for c in children(node))
        rebuilt = with_children(node, kids)
        out = rule(node, rebuilt, new)
        new[id(node)] = rebuilt if out is None else out
    return new[id(root)]


def use_counts(root: Expr) -> dict[int, int]:
    """How many times each node (by id) is an argument in ``root``'s graph; the root counts
    one use, since it is the function's result."""
    counts: dict[int, int] = {id(root): 1}
    for node in post_order(root):
        for child in children(node):
            counts[id(child)] = counts.get(id(child), 0) + 1
    return counts


def map_bodies(mod: IRModule, body_fn: Callable[[Expr], Expr]) -> IRModule:
    """Apply ``body_fn`` to the body of every top-level function; unchanged ones are kept."""
    funcs: dict[str, Function] = {}
    changed = False
    for name, func in mod.functions.items():
        body = body_fn(func.body)
        if body is func.body:
            funcs[name] = func
        else:
            funcs[name] = Function(func.params, body, func.attrs)
            changed = True
    return IRModule(funcs, mod.attrs) if changed else mod


def count_nodes(mod: IRModule) -> int:
    """Number of calls, tuples and tuple items in all top-level functions (for reports)."""
    total = 0
    for func in mod.functions.values():
        for node in post_order(func.body):
            if isinstance(node, (Call, Tuple, TupleGetItem)):
                total += 1
    return total
