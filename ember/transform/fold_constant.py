"""fold_constant: IRModule -> IRModule, evaluating every call whose arguments are all
constants with the ops' numpy references.

A folded call becomes a Constant (a tuple-valued call becomes a Tuple of Constants, and
``TupleGetItem`` of a Tuple becomes the field). Folding is skipped when the result would
be large (more than :data:`MAX_FOLD_ELEMENTS` elements) and bigger than every input, so a
``broadcast_to`` or ``tile`` of a small constant does not blow up the parameters, while
e.g. transposing a big weight is still folded. Whatever the inputs, a result of more than
:data:`MAX_FOLD_OUTPUT_ELEMENTS` elements is never folded (it is computed at run time), so
compile time and memory stay bounded however a model declares its constants.

Fills that are weights are the exception: fold_weight_fills materializes them first (a
weight of a convolution or matrix product is then packed at build time).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ember.ir.evaluate import evaluate_expr
from ember.ir.expr import Call, Constant, Expr, Tuple, TupleGetItem
from ember.ir.module import IRModule
from ember.ir.types import TensorType, TupleType, Type
from ember.transform._util import map_bodies, rewrite_graph
from ember.transform.fold_weight_fills import fold_weight_fills

#: folded results above this many elements are kept only if an input was as large.
MAX_FOLD_ELEMENTS = 1_000_000
#: no folded result is larger than this many elements (256 Mi), whatever its inputs.
MAX_FOLD_OUTPUT_ELEMENTS = 1 << 28


def _num_elements(ty: Type) -> int:
    if isinstance(ty, TensorType):
        return ty.size
    if isinstance(ty, TupleType):
        return sum(_num_elements(f) for f in ty.fields)
    return 0


def _as_expr(value: object) -> Expr:
    """A Constant (or a Tuple of them) holding an evaluated value."""
    if isinstance(value, tuple):
        return Tuple(tuple(_as_expr(v) for v in value))
    return Constant(np.asarray(value))


def _fold(old: Expr, node: Expr, new: Mapping[int, Expr]) -> Expr | None:
    if isinstance(node, TupleGetItem) and isinstance(node.tuple_value, Tuple):
        return node.tuple_value.fields[node.index]
    if not isinstance(node, Call) or not all(isinstance(a, Constant) for a in node.args):
        return None
    if not getattr(node.op, "pure", True):  # seeded random generators run at run time
        return None
    size = _num_elements(node.type)
    biggest = max((a.tensor_type.size for a in node.args), default=0)
    if (size > MAX_FOLD_ELEMENTS and size > biggest) or size > MAX_FOLD_OUTPUT_ELEMENTS:
        return None
    with np.errstate(all="ignore"):  # same numerics as the evaluator; no warning noise
        value = evaluate_expr(node, {})
    folded = _as_expr(value)
    return folded if folded.type == node.type else None


def fold_constant(mod: IRModule) -> IRModule:
    """Fold every call whose inputs are all constants (see the module docstring)."""
    mod = fold_weight_fills(mod)
    return map_bodies(mod, lambda body: rewrite_graph(body, _fold))
