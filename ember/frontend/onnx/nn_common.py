"""Helpers shared by the nn-family ONNX handlers: required inputs, tensor types,
``auto_pad`` resolution, and constant-aware reshapes/scalars."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import OpNotSupportedError
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.ir.expr import Constant, Expr, call
from ember.ir.types import TensorType


def required(ctx: ConvertContext, node: NodeView, i: int, what: str) -> Expr:
    """Input ``i`` of ``node``; FrontendError when it is omitted."""
    expr = node.input(i)
    if expr is None:
        ctx.fail(node, f"{what} (input {i}) is required but omitted")
    return expr


def ttype(ctx: ConvertContext, node: NodeView, expr: Expr) -> TensorType:
    """The tensor type of ``expr`` (FrontendError for a tuple)."""
    if not isinstance(expr.type, TensorType):
        ctx.fail(node, f"expected a tensor input, got {expr.type}")
    return expr.type


def unsupported(ctx: ConvertContext, node: NodeView, what: str) -> OpNotSupportedError:
    """An OpNotSupportedError naming the node and the unsupported feature."""
    return OpNotSupportedError(f"{ctx.where(node)}: {what} is not supported by ember")


def check_unused_outputs(ctx: ConvertContext, node: NodeView, first: int, what: str) -> None:
    """Raise OpNotSupportedError if any output from index ``first`` on is used."""
    for i in range(first, node.num_outputs):
        if node.output_used(i):
            raise unsupported(ctx, node, f"output {i} ({what})")


def spatial_attr(
    ctx: ConvertContext, node: NodeView, name: str, nsp: int, default: int
) -> list[int]:
    """Integer attribute ``name`` with one value per spatial axis (default when absent)."""
    value = [int(v) for v in node.attr(name, [default] * nsp)]
    if not value:
        value = [default] * nsp
    if len(value) != nsp:
        ctx.fail(node, f"attribute '{name}' has {len(value)} values, expected {nsp}")
    return value


def resolve_pads(
    ctx: ConvertContext,
    node: NodeView,
    sizes: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> list[int]:
    """The explicit ``begin..., end...`` pads of a conv/pool node, applying ``auto_pad``."""
    nsp = len(sizes)
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", ""):
        pads = [int(p) for p in node.attr("pads", [0] * (2 * nsp))]
        if len(pads) != 2 * nsp:
            ctx.fail(node, f"attribute 'pads' has {len(pads)} values, expected {2 * nsp}")
        return pads
    if auto_pad == "VALID":
        return [0] * (2 * nsp)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        known = "NOTSET, VALID, SAME_UPPER, SAME_LOWER"
        ctx.fail(node, f"unknown auto_pad {auto_pad!r}; known: {known}")
    begin, end = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        out = -(-size // s)
        total = max(0, (out - 1) * s + d * (k - 1) + 1 - size)
        small, large = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else large)
        end.append(large if auto_pad == "SAME_UPPER" else small)
    return begin + end


def reshape(ctx: ConvertContext, expr: Expr, shape: Sequence[int], name: str = "") -> Expr:
    """``expr`` reshaped: a new Constant when its value is static, else a reshape call."""
    shape = tuple(int(d) for d in shape)
    if isinstance(expr, Constant):
        return Constant(np.reshape(expr.data, shape))
    if isinstance(expr.type, TensorType) and expr.type.shape == shape:
        return expr
    return call("reshape", expr, newshape=shape, name=name)


def scalar(value: float, dtype: str) -> Constant:
    """A 0-d constant of ``dtype``."""
    return Constant(np.asarray(value).astype(dtype))


def scale_by(expr: Expr, factor: float, dtype: str, name: str = "") -> Expr:
    """``expr * factor`` (``expr`` itself when the factor is 1)."""
    if factor == 1.0:
        return expr
    return call("multiply", expr, scalar(factor, dtype), name=name)
