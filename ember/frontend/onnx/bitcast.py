"""ONNX handler of the bitcast family: BitCast (opset 26), the bits of each element read
as the ``to`` element type of the same width."""

from __future__ import annotations

from ember.frontend.onnx.common import arg, ttype
from ember.frontend.onnx.context import ConvertContext, NodeView, onnx_elem_dtype
from ember.frontend.onnx.registry import ALL_TYPES, onnx_op
from ember.ir.expr import Expr, call
from ember.ir.ops.bitcast import storage_bits


@onnx_op("BitCast", since=26, dtypes=ALL_TYPES)
def bitcast(ctx: ConvertContext, node: NodeView) -> Expr:
    """BitCast: same shape, same bits, another element type."""
    x = arg(ctx, node, 0)
    dtype = onnx_elem_dtype(int(node.attr("to")), ctx.where(node))
    src = ttype(x).dtype
    if storage_bits(src) != storage_bits(dtype):
        ctx.fail(
            node,
            f"'to' is {dtype} ({storage_bits(dtype)} bits) but the input is {src} "
            f"({storage_bits(src)} bits); BitCast needs types of one width",
        )
    if src == dtype:
        return x
    return call("bitcast", x, dtype=dtype, name=node.name)
