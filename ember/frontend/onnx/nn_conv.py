"""ONNX handlers for convolutions and matrix products: Conv, ConvTranspose, Gemm, MatMul.
A bias becomes ``add(y, reshape(B, (C, 1, ...)))``."""

from __future__ import annotations

from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.nn_common import (
    required,
    reshape,
    resolve_pads,
    scale_by,
    spatial_attr,
    ttype,
)
from ember.frontend.onnx.registry import FLOAT_TYPES, NUMERIC_TYPES, onnx_op
from ember.ir.expr import Expr, call


def _add_bias(ctx: ConvertContext, node: NodeView, y: Expr, nsp: int) -> Expr:
    bias = node.input(2)
    if bias is None:
        return y
    channels = ttype(ctx, node, y).shape[1]
    if ttype(ctx, node, bias).shape != (channels,):
        ctx.fail(node, f"bias must have shape ({channels},), got {bias.type}")
    shaped = reshape(ctx, bias, (channels,) + (1,) * nsp, name=f"{node.name}_bias_shape")
    return call("add", y, shaped, name=f"{node.name}_bias")


def _kernel(ctx: ConvertContext, node: NodeView, weight_shape: tuple[int, ...]) -> list[int]:
    kernel = list(weight_shape[2:])
    given = node.attr("kernel_shape", kernel)
    if list(given) != kernel:
        ctx.fail(node, f"kernel_shape {list(given)} disagrees with the weight's {kernel}")
    return kernel


@onnx_op("Conv", since=1, dtypes=FLOAT_TYPES)
def conv(ctx: ConvertContext, node: NodeView) -> Expr:
    """Conv (1-D/2-D/3-D, groups, dilations, auto_pad) plus an optional bias."""
    x = required(ctx, node, 0, "X")
    w = required(ctx, node, 1, "W")
    xt, wt = ttype(ctx, node, x), ttype(ctx, node, w)
    nsp = xt.ndim - 2
    kernel = _kernel(ctx, node, wt.shape)
    strides = spatial_attr(ctx, node, "strides", nsp, 1)
    dilations = spatial_attr(ctx, node, "dilations", nsp, 1)
    pads = resolve_pads(ctx, node, xt.shape[2:], kernel, strides, dilations)
    y = call(
        "nn.conv",
        x,
        w,
        strides=strides,
        padding=pads,
        dilation=dilations,
        groups=node.attr("group", 1),
        name=node.name,
    )
    return _add_bias(ctx, node, y, nsp)


@onnx_op("ConvTranspose", since=1, dtypes=FLOAT_TYPES)
def conv_transpose(ctx: ConvertContext, node: NodeView) -> Expr:
    """ConvTranspose with output_padding, output_shape or auto_pad, groups and bias."""
    x = required(ctx, node, 0, "X")
    w = required(ctx, node, 1, "W")
    xt, wt = ttype(ctx, node, x), ttype(ctx, node, w)
    nsp = xt.ndim - 2
    kernel = _kernel(ctx, node, wt.shape)
    strides = spatial_attr(ctx, node, "strides", nsp, 1)
    dilations = spatial_attr(ctx, node, "dilations", nsp, 1)
    extra = spatial_attr(ctx, node, "output_padding", nsp, 0)
    auto_pad = node.attr("auto_pad", "NOTSET")
    out_shape = [int(v) for v in node.attr("output_shape", [])][-nsp:] if nsp else []
    if not out_shape and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [size * s for size, s in zip(xt.shape[2:], strides, strict=True)]
    if out_shape:
        if len(out_shape) != nsp:
            ctx.fail(node, f"output_shape needs {nsp} spatial sizes, got {out_shape}")
        begin, end = [], []
        for i in range(nsp):
            full = strides[i] * (xt.shape[2 + i] - 1) + extra[i] + dilations[i] * (kernel[i] - 1)
            total = full + 1 - out_shape[i]
            if total < 0:  # a larger requested output: grow the end by output padding
                extra[i] -= total
                total = 0
            small, large = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else large)
            end.append(large if auto_pad == "SAME_UPPER" else small)
        pads = begin + end
    elif auto_pad == "VALID":
        pads = [0] * (2 * nsp)
    else:
        pads = [int(p) for p in node.attr("pads", [0] * (2 * nsp))]
    y = call(
        "nn.conv_transpose",
        x,
        w,
        strides=strides,
        padding=pads,
        dilation=dilations,
        groups=node.attr("group", 1),
        output_padding=extra,
        name=node.name,
    )
    return _add_bias(ctx, node, y, nsp)


@onnx_op("Gemm", since=1, dtypes=NUMERIC_TYPES)
def gemm(ctx: ConvertContext, node: NodeView) -> Expr:
    """Gemm: alpha * A' @ B' + beta * C, as nn.dense (transB) or nn.matmul plus scaling."""
    a = required(ctx, node, 0, "A")
    b = required(ctx, node, 1, "B")
    dtype = ttype(ctx, node, a).dtype
    for what, expr in (("A", a), ("B", b)):
        if ttype(ctx, node, expr).ndim != 2:
            ctx.fail(node, f"{what} must be a matrix, got {expr.type}")
    if node.attr("transA", 0):
        a = call("transpose", a, axes=(1, 0), name=f"{node.name}_transA")
    y: Expr
    if node.attr("transB", 0):
        y = call("nn.dense", a, b, name=node.name)
    else:
        y = call("nn.matmul", a, b, name=node.name)
    y = scale_by(y, node.attr("alpha", 1.0), dtype, name=f"{node.name}_alpha")
    c = node.input(2)
    beta = node.attr("beta", 1.0)
    if c is not None and beta != 0.0:
        c = scale_by(c, beta, dtype, name=f"{node.name}_beta")
        y = call("add", y, c, name=f"{node.name}_bias")
    return y


@onnx_op("MatMul", since=1, dtypes=NUMERIC_TYPES)
def matmul(ctx: ConvertContext, node: NodeView) -> Expr:
    """MatMul with numpy semantics (1-D operands, batch broadcasting)."""
    a = required(ctx, node, 0, "A")
    b = required(ctx, node, 1, "B")
    return call("nn.matmul", a, b, name=node.name)
