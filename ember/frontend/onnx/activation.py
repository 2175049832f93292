"""ONNX handlers for activations that are compositions of IR ops: Celu, Mish, Swish,
Shrink and Hardmax (argmax + one_hot)."""

from __future__ import annotations

import math

from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.elemwise import arg, scalar_const, ttype
from ember.frontend.onnx.registry import FLOAT_TYPES, NUMERIC_TYPES, onnx_op
from ember.ir.expr import Expr, call
from ember.ir.ops.common import normalize_axis


@onnx_op("Celu", since=12, dtypes=FLOAT_TYPES)
def celu(ctx: ConvertContext, node: NodeView) -> Expr:
    """Celu: x if x > 0 else alpha * (exp(x / alpha) - 1)."""
    x = arg(ctx, node, 0)
    dtype = ttype(x).dtype
    alpha = scalar_const(float(node.attr("alpha", 1.0)), dtype)
    neg = call(
        "multiply", alpha, call("subtract", call("exp", call("divide", x, alpha)), one(dtype))
    )
    return call("where", call("greater", x, scalar_const(0, dtype)), x, neg, name=node.name)


def one(dtype: str) -> Expr:
    """The scalar 1 of ``dtype``."""
    return scalar_const(1, dtype)


@onnx_op("Mish", since=18, dtypes=FLOAT_TYPES)
def mish(ctx: ConvertContext, node: NodeView) -> Expr:
    """Mish: x * tanh(softplus(x))."""
    x = arg(ctx, node, 0)
    return call("multiply", x, call("tanh", call("softplus", x)), name=node.name)


@onnx_op("Swish", since=24, dtypes=FLOAT_TYPES)
def swish(ctx: ConvertContext, node: NodeView) -> Expr:
    """Swish: x * sigmoid(alpha * x)."""
    x = arg(ctx, node, 0)
    alpha = float(node.attr("alpha", 1.0))
    scaled = x if alpha == 1.0 else call("multiply", x, scalar_const(alpha, ttype(x).dtype))
    return call("multiply", x, call("sigmoid", scaled), name=node.name)


@onnx_op("Shrink", since=9, dtypes=NUMERIC_TYPES)
def shrink(ctx: ConvertContext, node: NodeView) -> Expr:
    """Shrink: x - bias above lambd, x + bias below -lambd, else 0."""
    x = arg(ctx, node, 0)
    dtype = ttype(x).dtype
    lambd = float(node.attr("lambd", 0.5))
    bias = scalar_const(float(node.attr("bias", 0.0)), dtype)
    zero = scalar_const(0, dtype)
    if dtype in FLOAT_TYPES:
        hi, lo = scalar_const(lambd, dtype), scalar_const(-lambd, dtype)
        above, below = call("greater", x, hi), call("less", x, lo)
    else:  # integers compare exactly with the real threshold
        above = call("greater", x, scalar_const(math.floor(lambd), dtype))
        below = call("less", x, scalar_const(math.ceil(-lambd), dtype))
    inner = call("where", below, call("add", x, bias), zero)
    return call("where", above, call("subtract", x, bias), inner, name=node.name)


@onnx_op("Hardmax", since=1, dtypes=FLOAT_TYPES)
def hardmax(ctx: ConvertContext, node: NodeView) -> Expr:
    """Hardmax: 1 at the first maximum along ``axis``, 0 elsewhere (2-D coercion < 13)."""
    x = arg(ctx, node, 0)
    shape = ttype(x).shape
    dtype = ttype(x).dtype
    legacy = node.opset < 13
    axis = normalize_axis(int(node.attr("axis", 1 if legacy else -1)), len(shape))
    work = x
    if legacy:
        rows = math.prod(shape[:axis])
        work = call("reshape", x, newshape=(rows, math.prod(shape) // max(rows, 1)))
        axis = 1
    depth = ttype(work).shape[axis]
    idx = call("argmax", work, axis=axis, keepdims=False)
    out = call("one_hot", idx, one(dtype), scalar_const(0, dtype), depth=depth, axis=axis)
    if legacy:
        out = call("reshape", out, newshape=shape)
    return out
