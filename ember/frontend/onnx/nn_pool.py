"""ONNX handlers for pooling: MaxPool, AveragePool, LpPool (N-d, pads, auto_pad,
dilations, ceil_mode, count_include_pad), GlobalAveragePool, GlobalMaxPool, GlobalLpPool.
MaxPool's Indices output becomes a separate nn.max_pool_argmax call. MaxUnpool scatters
into zeros."""

from __future__ import annotations

import math

import numpy as np

from ember.frontend.onnx import common
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.nn_common import (
    required,
    resolve_pads,
    spatial_attr,
    ttype,
)
from ember.frontend.onnx.registry import FLOAT_TYPES, onnx_op
from ember.ir.expr import Constant, Expr, call

_MAXPOOL_TYPES = FLOAT_TYPES | {"int8", "uint8"}


def _pool(ctx: ConvertContext, node: NodeView, op: str, **extra: object) -> Expr:
    x = required(ctx, node, 0, "X")
    xt = ttype(ctx, node, x)
    nsp = xt.ndim - 2
    if nsp < 1:
        ctx.fail(node, f"X must be (N, C, spatial...), got {xt}")
    kernel = [int(k) for k in node.attr("kernel_shape")]
    if len(kernel) != nsp:
        ctx.fail(node, f"kernel_shape {kernel} needs {nsp} sizes for input {xt}")
    strides = spatial_attr(ctx, node, "strides", nsp, 1)
    dilations = spatial_attr(ctx, node, "dilations", nsp, 1)
    pads = resolve_pads(ctx, node, xt.shape[2:], kernel, strides, dilations)
    return call(
        op,
        x,
        pool_size=kernel,
        strides=strides,
        padding=pads,
        dilation=dilations,
        ceil_mode=bool(node.attr("ceil_mode", 0)),
        name=node.name,
        **extra,
    )


@onnx_op("MaxPool", since=1, dtypes=_MAXPOOL_TYPES)
def max_pool(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """MaxPool; the Indices output (flat input positions) is computed only when used."""
    y = _pool(ctx, node, "nn.max_pool")
    if not node.output_used(1):
        return [y]
    order = node.attr("storage_order", 0)
    return [y, _pool(ctx, node, "nn.max_pool_argmax", storage_order=order)]


@onnx_op("AveragePool", since=1, dtypes=FLOAT_TYPES)
def avg_pool(ctx: ConvertContext, node: NodeView) -> Expr:
    """AveragePool with count_include_pad."""
    include = bool(node.attr("count_include_pad", 0))
    return _pool(ctx, node, "nn.avg_pool", count_include_pad=include)


@onnx_op("LpPool", since=1, dtypes=FLOAT_TYPES)
def lp_pool(ctx: ConvertContext, node: NodeView) -> Expr:
    """LpPool (p is a float attribute in opset 1, an int from opset 2)."""
    return _pool(ctx, node, "nn.lp_pool", p=float(node.attr("p", 2)))


@onnx_op("GlobalLpPool", since=1, dtypes=FLOAT_TYPES)
def global_lp_pool(ctx: ConvertContext, node: NodeView) -> Expr:
    """GlobalLpPool: an nn.lp_pool whose window is the whole spatial extent."""
    x = required(ctx, node, 0, "X")
    xt = ttype(ctx, node, x)
    if xt.ndim < 3:
        ctx.fail(node, f"X must be (N, C, spatial...), got {xt}")
    p = float(node.attr("p", 2))
    return call("nn.lp_pool", x, pool_size=xt.shape[2:], p=p, name=node.name)


@onnx_op("GlobalAveragePool", since=1, dtypes=FLOAT_TYPES)
def global_avg_pool(ctx: ConvertContext, node: NodeView) -> Expr:
    """GlobalAveragePool: mean over all spatial axes."""
    return call("nn.global_avg_pool", required(ctx, node, 0, "X"), name=node.name)


@onnx_op("GlobalMaxPool", since=1, dtypes=FLOAT_TYPES)
def global_max_pool(ctx: ConvertContext, node: NodeView) -> Expr:
    """GlobalMaxPool: max over all spatial axes."""
    return call("nn.global_max_pool", required(ctx, node, 0, "X"), name=node.name)


@onnx_op("MaxUnpool", since=9, dtypes=FLOAT_TYPES)
def max_unpool(ctx: ConvertContext, node: NodeView) -> Expr:
    """MaxUnpool: the values scattered to their (flat, whole-tensor) MaxPool indices in a
    zero tensor of the shape inferred from kernel, strides and pads (zero-padded at the end
    to ``output_shape`` when given)."""
    x = common.arg(ctx, node, 0, "X")
    indices = common.arg(ctx, node, 1, "I")
    xt = common.ttype(x)
    nsp = xt.ndim - 2
    kernel = [int(k) for k in node.attr("kernel_shape")]
    strides = [int(s) for s in node.attr("strides", [1] * nsp)]
    pads = [int(p) for p in node.attr("pads", [0] * (2 * nsp))]
    spatial = [
        (xt.shape[2 + i] - 1) * strides[i] - pads[i] - pads[nsp + i] + kernel[i] for i in range(nsp)
    ]
    inferred = (*xt.shape[:2], *spatial)
    out_shape = inferred
    given = node.input(2)
    if given is not None:
        out_shape = tuple(int(d) for d in ctx.require_const(given, "output_shape").reshape(-1))
        if len(out_shape) != xt.ndim or any(
            o < i for o, i in zip(out_shape, inferred, strict=True)
        ):
            ctx.fail(node, f"output_shape {out_shape} is smaller than the inferred {inferred}")
    size = math.prod(xt.shape)
    flat_x = call("reshape", x, newshape=(size,))
    flat_i = call("reshape", indices, newshape=(size,))
    zeros = Constant(np.zeros(math.prod(inferred), dtype=np.dtype(xt.dtype)))
    y = call("reshape", call("scatter_elements", zeros, flat_i, flat_x, axis=0), newshape=inferred)
    if out_shape == inferred:
        return y
    # As onnx's reference: indices address the inferred shape, placed at the origin of a
    # larger output_shape (zeros after it).
    pad_width = [0] * xt.ndim + [o - i for o, i in zip(out_shape, inferred, strict=True)]
    return call("nn.pad", y, pad_width=pad_width, pad_value=0.0, name=node.name)
