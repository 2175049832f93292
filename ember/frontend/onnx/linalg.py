"""ONNX handlers for linear algebra: Det (opset 11)."""

from __future__ import annotations

from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.nn_common import required, ttype
from ember.frontend.onnx.registry import FLOAT_TYPES, onnx_op
from ember.ir.expr import Expr, call


@onnx_op("Det", since=11, dtypes=FLOAT_TYPES)
def det(ctx: ConvertContext, node: NodeView) -> Expr:
    """Det: (..., M, M) -> (...)."""
    x = required(ctx, node, 0, "X")
    xt = ttype(ctx, node, x)
    if xt.ndim < 2 or xt.shape[-1] != xt.shape[-2]:
        ctx.fail(node, f"X must hold square matrices (..., M, M), got {xt}")
    return call("linalg.det", x, name=node.name)
