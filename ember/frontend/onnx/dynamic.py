"""ONNX handlers for ops whose output shape depends on input values: NonZero, Unique,
NonMaxSuppression. ember compiles static shapes, so these import only when every input is
known at build time (initializers, constants, or computations over them): the node is
then evaluated once, with onnx's reference implementation, into constants. Otherwise the
import fails naming the node and the input whose values set the shape.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import ALL_TYPES, NUMERIC_TYPES, onnx_op
from ember.ir.expr import Constant, Expr

#: op -> (first opset, names of its inputs for messages).
_OPS: dict[str, tuple[int, tuple[str, ...]]] = {
    "NonZero": (9, ("X",)),
    "Unique": (11, ("X",)),
    "NonMaxSuppression": (
        10,
        ("boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"),
    ),
    "StringSplit": (20, ("X",)),  # the number of pieces sets the shape (docs/strings.md)
}


def _evaluate(ctx: ConvertContext, node: NodeView, names: Sequence[str]) -> list[Expr | None]:
    """The node's outputs as constants computed by onnx's reference implementation."""
    values: list[np.ndarray | None] = []
    for i, expr in enumerate(node.inputs):
        what = names[i] if i < len(names) else f"input {i}"
        if expr is None:
            values.append(None)
            continue
        values.append(
            ctx.require_const(expr, f"{what} (its values set the output shape of {node.op_type})")
        )
    in_names = [f"i{i}" if v is not None else "" for i, v in enumerate(values)]
    out_names = [f"o{i}" for i in range(node.num_outputs)]
    one = helper.make_node(node.op_type, in_names, out_names, **dict(node.attrs))
    inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in zip(in_names, values, strict=True)
        if v is not None
    ]
    outputs = [helper.make_empty_tensor_value_info(n) for n in out_names]
    graph = helper.make_graph([one], "fold", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", node.opset)])
    feeds = {n: v for n, v in zip(in_names, values, strict=True) if v is not None}
    try:
        results = ReferenceEvaluator(model).run(None, feeds)
    except Exception as err:
        ctx.fail(node, f"evaluating the node at build time failed: {err}")
    return [Constant(np.asarray(r)) for r in results]


#: the public name of the build-time evaluation (strings.py: StringNormalizer with stopwords)
evaluate_node = _evaluate


def _register(op: str, since: int, names: tuple[str, ...]) -> None:
    dtypes = ALL_TYPES | {"string"} if op != "NonMaxSuppression" else NUMERIC_TYPES

    @onnx_op(op, since=since, dtypes=dtypes)
    def handler(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
        return _evaluate(ctx, node, names)

    handler.__doc__ = f"{op}: evaluated at build time (its output shape depends on values)."


for _op, (_since, _names) in _OPS.items():
    _register(_op, _since, _names)
