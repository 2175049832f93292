"""fold_weight_fills: IRModule -> IRModule, materializing constant fills that are weights.

ONNX models may make weights at run time from a scalar: ``ConstantOfShape`` or ``Expand``
of a constant (the ``light`` models shipped with onnx make every weight that way). Large
ones import as ``broadcast_to(Constant)``, which fold_constant leaves to run time on
purpose (see its MAX_FOLD_ELEMENTS: a broadcast must not blow up the parameters). When
the fill is a *weight* - it reaches argument 1 or later of a convolution or a matrix
product (WEIGHT_READERS), directly or through shape-only ops (PASS_THROUGH) - running it
costs a full write of the weight on every inference, and the reader cannot use its
build-time weight layouts (nn.conv_packed, the pre-transposed nn.matmul), which need a
Constant. This pass evaluates such fills into Constants (fold_constant then folds the
shape ops between fill and reader); fills of other values are left alone. A module's
materialized fills hold at most MAX_FILL_ELEMENTS elements in all (a small hostile model
must not make the compiler allocate without bound, docs/security.md): the fills beyond that
budget, in graph order, stay at run time.

The parameters then hold the weights in full, as onnxruntime's own constant folding does.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ember.ir.evaluate import evaluate_expr
from ember.ir.expr import Call, Constant, Expr, post_order
from ember.ir.module import IRModule
from ember.ir.op import OpDef
from ember.transform._util import map_bodies, rewrite_graph

#: the most elements this pass materializes per module (256 Mi: light_vgg19 needs 144 Mi).
MAX_FILL_ELEMENTS = 1 << 28
#: ops whose arguments from index 1 on are weights (the data is argument 0).
WEIGHT_READERS: frozenset[str] = frozenset(
    {"nn.conv", "nn.conv_transpose", "nn.dense", "nn.matmul", "nn.batch_matmul"}
)
#: shape-only ops a weight may pass through on its way from the fill to its reader.
PASS_THROUGH: frozenset[str] = frozenset(
    {"reshape", "transpose", "squeeze", "expand_dims", "cast", "nn.batch_flatten"}
)
#: the ops that fill a tensor from a constant.
FILLS: frozenset[str] = frozenset({"broadcast_to"})


def _op_name(node: Expr) -> str:
    if isinstance(node, Call) and isinstance(node.op, OpDef):
        return node.op.name
    return ""


def weight_fills(root: Expr) -> set[int]:
    """The ids of the fills of constants in ``root``'s graph that are weights, in graph
    order, up to MAX_FILL_ELEMENTS elements in all."""
    found: set[int] = set()
    budget = MAX_FILL_ELEMENTS
    for node in post_order(root):
        if _op_name(node) not in WEIGHT_READERS:
            continue
        assert isinstance(node, Call)
        for arg in node.args[1:]:
            while _op_name(arg) in PASS_THROUGH:
                assert isinstance(arg, Call)
                arg = arg.args[0]
            if _op_name(arg) not in FILLS or id(arg) in found:
                continue
            assert isinstance(arg, Call)
            size = arg.type.size  # type: ignore[attr-defined]
            if all(isinstance(a, Constant) for a in arg.args) and size <= budget:
                found.add(id(arg))
                budget -= size
    return found


def _fold_fills(root: Expr) -> Expr:
    fills = weight_fills(root)
    if not fills:
        return root

    def rule(old: Expr, node: Expr, new: Mapping[int, Expr]) -> Expr | None:
        if id(old) not in fills or not isinstance(node, Call):
            return None
        with np.errstate(all="ignore"):
            value = evaluate_expr(node, {})
        folded = Constant(np.asarray(value))
        return folded if folded.type == node.type else None

    return rewrite_graph(root, rule)


def fold_weight_fills(mod: IRModule) -> IRModule:
    """Materialize every constant fill that is a weight (see the module docstring)."""
    return map_bodies(mod, _fold_fills)
