"""dead_code_elimination: IRModule -> IRModule, removing values nothing needs.

The IR has no statements: a function is the graph reachable from its body, so anything
unreachable is already gone when a pass drops its last reference. What remains dead are
tuples built only to be taken apart again:

* ``TupleGetItem(Tuple(f0, f1, ...), i)`` becomes ``fi`` (the other fields are dropped);
* ``Tuple(TupleGetItem(t, 0), ..., TupleGetItem(t, n-1))`` of an n-tuple ``t`` becomes ``t``.

Function parameters are kept even when unused: they are the calling convention.
"""

from __future__ import annotations

from collections.abc import Mapping

from ember.ir.expr import Expr, Tuple, TupleGetItem
from ember.ir.module import IRModule
from ember.ir.types import TupleType
from ember.transform._util import map_bodies, rewrite_graph


def _rule(old: Expr, node: Expr, new: Mapping[int, Expr]) -> Expr | None:
    if isinstance(node, TupleGetItem) and isinstance(node.tuple_value, Tuple):
        return node.tuple_value.fields[node.index]
    if isinstance(node, Tuple) and node.fields:
        first = node.fields[0]
        if not isinstance(first, TupleGetItem):
            return None
        src = first.tuple_value
        ty = src.type
        if not isinstance(ty, TupleType) or len(ty.fields) != len(node.fields):
            return None
        for i, f in enumerate(node.fields):
            if not (isinstance(f, TupleGetItem) and f.tuple_value is src and f.index == i):
                return None
        return src
    return None


def dead_code_elimination(mod: IRModule) -> IRModule:
    """Remove tuples that are built only to be taken apart (see the module docstring)."""
    return map_bodies(mod, lambda body: rewrite_graph(body, _rule))
