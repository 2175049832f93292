"""eliminate_common_subexpr: IRModule -> IRModule, sharing one node among equal computations.

Two calls are the same when they apply the same op (or the same Function object) with equal
attributes to the same argument nodes; tuples and tuple items likewise. Constants are the
same when dtype, shape and bytes are equal (hashed once each, then compared exactly), so
duplicated weights are stored once. Variables are only ever equal to themselves. One pass
children-first suffices: arguments are already canonical when their users are looked up.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Mapping

from ember.ir.expr import Call, Constant, Expr, Function, Tuple, TupleGetItem
from ember.ir.module import IRModule
from ember.ir.structural import constants_equal, data_bytes
from ember.transform._util import map_bodies, rewrite_graph


def _const_key(c: Constant) -> Hashable:
    digest = hashlib.blake2b(data_bytes(c.data), digest_size=16).digest()
    return ("const", c.type.dtype, c.type.shape, digest)


def _key(node: Expr) -> Hashable | None:
    if isinstance(node, Call):
        op = ("fn", id(node.op)) if isinstance(node.op, Function) else node.op.name
        key = ("call", op, node.attrs, tuple(id(a) for a in node.args))
        try:
            hash(key)
        except TypeError:  # an attribute of kind "any" holding an unhashable value
            return None
        return key
    if isinstance(node, Tuple):
        return ("tuple", tuple(id(f) for f in node.fields))
    if isinstance(node, TupleGetItem):
        return ("get", id(node.tuple_value), node.index)
    if isinstance(node, Constant):
        return _const_key(node)
    return None


def _eliminate(body: Expr) -> Expr:
    seen: dict[Hashable, Expr] = {}

    def rule(old: Expr, node: Expr, new: Mapping[int, Expr]) -> Expr | None:
        key = _key(node)
        if key is None:
            return None
        prev = seen.get(key)
        if prev is None:
            seen[key] = node
            return None
        if isinstance(node, Constant):
            return prev if isinstance(prev, Constant) and constants_equal(prev, node) else None
        return prev

    return rewrite_graph(body, rule)


def eliminate_common_subexpr(mod: IRModule) -> IRModule:
    """Share equal calls, tuples and constants (see the module docstring)."""
    return map_bodies(mod, _eliminate)
