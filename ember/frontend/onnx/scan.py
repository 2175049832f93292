"""ONNX handlers of the scan family: TopK and the running reductions CumSum and CumProd."""

from __future__ import annotations

import numpy as np

from ember.frontend.onnx.common import arg, ttype
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import NUMERIC_TYPES, HandlerFn, onnx_op
from ember.ir.expr import Expr, call
from ember.ir.ops.common import normalize_axis


@onnx_op("TopK", since=1, dtypes=NUMERIC_TYPES)
def topk(ctx: ConvertContext, node: NodeView) -> Expr:
    """TopK: K is an attribute before opset 10 and a constant input after."""
    x = arg(ctx, node, 0)
    if node.opset < 10:
        k = int(node.attr("k"))
    else:
        k = int(np.asarray(ctx.require_const(node.input(1), "K")).reshape(-1)[0])
    axis = normalize_axis(int(node.attr("axis", -1)), ttype(x).ndim)
    return call(
        "topk",
        x,
        k=k,
        axis=axis,
        largest=bool(node.attr("largest", 1)),
        sorted=bool(node.attr("sorted", 1)),
        name=node.name,
    )


def _scan_handler(ir_op: str) -> HandlerFn:
    def handler(ctx: ConvertContext, node: NodeView) -> Expr:
        x = arg(ctx, node, 0)
        raw = np.asarray(ctx.require_const(node.input(1), "axis")).reshape(-1)
        if raw.size != 1:
            ctx.fail(node, f"axis must be a scalar, got {raw.size} values")
        return call(
            ir_op,
            x,
            axis=normalize_axis(int(raw[0]), ttype(x).ndim),
            exclusive=bool(node.attr("exclusive", 0)),
            reverse=bool(node.attr("reverse", 0)),
            name=node.name,
        )

    handler.__doc__ = f"ONNX running reduction -> IR '{ir_op}' (constant axis input)."
    return handler


onnx_op("CumSum", since=11, dtypes=NUMERIC_TYPES)(_scan_handler("cumsum"))
onnx_op("CumProd", since=26, dtypes=NUMERIC_TYPES)(_scan_handler("cumprod"))
