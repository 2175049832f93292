"""ONNX handler of the einsum family: Einsum, with numpy's equation syntax."""

from __future__ import annotations

from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.nn_common import required
from ember.frontend.onnx.registry import NUMERIC_TYPES, onnx_op
from ember.ir.expr import Expr, call


@onnx_op("Einsum", since=12, dtypes=NUMERIC_TYPES)
def einsum(ctx: ConvertContext, node: NodeView) -> Expr:
    """Einsum with numpy's equation syntax."""
    inputs = [required(ctx, node, i, f"input {i}") for i in range(len(node.inputs))]
    return call("einsum", *inputs, equation=node.attr("equation"), name=node.name)
