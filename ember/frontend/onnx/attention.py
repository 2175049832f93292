"""ONNX handlers of the attention family: TensorScatter (the KV-cache update) and
FlexAttention (``ai.onnx.preview``).

FlexAttention is defined by ONNX as a context-dependent function whose body inlines the
node's ``score_mod`` and ``prob_mod`` subgraphs (scores and probabilities of shape
(B, H, L, S) in, same out); the handler asks onnx for that body at the node's opset and
input types and converts it inline, so the model's own ops (MatMul, Softmax and whatever
the subgraphs use) become the kernels.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ember.frontend.onnx.common import arg, ttype
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.expand import add_default_attributes, function_body
from ember.frontend.onnx.registry import ALL_TYPES, FLOAT_TYPES, onnx_op
from ember.ir.expr import Constant, Expr, call
from ember.ir.ops.common import normalize_axis
from ember.support import dtypes

#: the domain of the preview ops.
PREVIEW_DOMAIN = "ai.onnx.preview"


@onnx_op("TensorScatter", since=24, dtypes=ALL_TYPES)
def tensor_scatter(ctx: ConvertContext, node: NodeView) -> Expr:
    """TensorScatter: the cache with each batch row's update written at its write index."""
    past = arg(ctx, node, 0, "past_cache")
    update = arg(ctx, node, 1, "update")
    shape = ttype(past).shape
    write = node.input(2)
    if write is None:
        write = Constant(np.zeros((shape[0],), np.int64))
    axis = normalize_axis(int(node.attr("axis", -2)), len(shape))
    mode = str(node.attr("mode", "linear"))
    return call("tensor_scatter", past, update, write, axis=axis, mode=mode, name=node.name)


def _type_proto(expr: Expr) -> onnx.TypeProto:
    ty = ttype(expr)
    elem = dtypes.dtype_info(ty.dtype).onnx or 0
    return helper.make_tensor_type_proto(elem, list(ty.shape))


@onnx_op("FlexAttention", since=1, domain=PREVIEW_DOMAIN, dtypes=FLOAT_TYPES)
def flex_attention(ctx: ConvertContext, node: NodeView) -> list[Expr]:
    """FlexAttention: onnx's function body for this node (score_mod/prob_mod inlined)."""
    inputs = [arg(ctx, node, i) for i in range(len(node.inputs))]
    proto = onnx.NodeProto()
    proto.CopyFrom(node.proto)
    add_default_attributes(proto, node.opset)
    body = function_body(proto, node.opset, [_type_proto(e) for e in inputs])
    if body is None:
        ctx.fail(node, "onnx gives no function body for this node; check its attributes")
    if ctx.convert_subgraph is None:
        ctx.fail(node, "function bodies can only be converted by the importer (from_onnx)")
    graph = helper.make_graph(
        list(body.node),
        f"{node.name}_body",
        [],
        [helper.make_empty_tensor_value_info(name) for name in body.output],
    )
    outer = ctx.env
    ctx.env = {**outer, **dict(zip(body.input, inputs, strict=False))}
    try:
        outputs = ctx.convert_subgraph(ctx, graph)
    finally:
        ctx.env = outer
    return list(outputs)
