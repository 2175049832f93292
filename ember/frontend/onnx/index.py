"""ONNX handlers of the index family: Gather, GatherElements, GatherND, Scatter,
ScatterElements, ScatterND, OneHot, EyeLike, Compress (constant condition), Trilu."""

from __future__ import annotations

import numpy as np

from ember.frontend.onnx.common import arg, ttype
from ember.frontend.onnx.context import ConvertContext, NodeView, onnx_elem_dtype
from ember.frontend.onnx.registry import ALL_TYPES, NUMERIC_TYPES, onnx_op
from ember.frontend.onnx.transform import const_ints
from ember.ir.expr import Constant, Expr, call
from ember.ir.ops.common import normalize_axis, np_dtype


@onnx_op("Gather", since=1, dtypes=ALL_TYPES)
def gather(ctx: ConvertContext, node: NodeView) -> Expr:
    """Gather slices along ``axis`` (negative indices count from the end)."""
    data = arg(ctx, node, 0)
    axis = normalize_axis(int(node.attr("axis", 0)), ttype(data).ndim)
    indices = arg(ctx, node, 1, "indices")
    _check_static_indices(ctx, indices, ttype(data).shape[axis])
    return call("take", data, indices, axis=axis, name=node.name)


def _check_static_indices(ctx: ConvertContext, indices: Expr, dim: int) -> None:
    """Report constant indices outside ``[-dim, dim)`` at import time, naming the node."""
    value = ctx.const_value(indices)
    if value is not None and value.size:
        bad = value[(value < -dim) | (value >= dim)]
        if bad.size:
            ctx.fail(None, f"index {int(bad.flat[0])} is out of range for an axis of size {dim}")


@onnx_op("GatherElements", since=11, dtypes=ALL_TYPES)
def gather_elements(ctx: ConvertContext, node: NodeView) -> Expr:
    """GatherElements along ``axis``."""
    data = arg(ctx, node, 0)
    axis = normalize_axis(int(node.attr("axis", 0)), ttype(data).ndim)
    indices = arg(ctx, node, 1, "indices")
    _check_static_indices(ctx, indices, ttype(data).shape[axis])
    return call("gather_elements", data, indices, axis=axis, name=node.name)


@onnx_op("Trilu", since=14, dtypes=ALL_TYPES)
def trilu(ctx: ConvertContext, node: NodeView) -> Expr:
    """Trilu: keep the upper/lower triangle of the last two axes, offset by constant k."""
    k = const_ints(ctx, node, 1, "k")
    return call(
        "trilu",
        arg(ctx, node, 0),
        upper=bool(node.attr("upper", 1)),
        k=0 if not k else k[0],
        name=node.name,
    )


@onnx_op("GatherND", since=11, dtypes=ALL_TYPES)
def gather_nd(ctx: ConvertContext, node: NodeView) -> Expr:
    """GatherND with ``batch_dims`` (opset 12)."""
    batch_dims = int(node.attr("batch_dims", 0))
    indices = arg(ctx, node, 1, "indices")
    return call("gather_nd", arg(ctx, node, 0), indices, batch_dims=batch_dims, name=node.name)


def _reduction(ctx: ConvertContext, node: NodeView) -> str:
    reduction = str(node.attr("reduction", "none"))
    if reduction not in ("none", "add", "mul", "max", "min"):
        ctx.fail(node, f"reduction {reduction!r} is not one of none, add, mul, max, min")
    return reduction


@onnx_op("ScatterElements", since=11, dtypes=ALL_TYPES)
def scatter_elements(ctx: ConvertContext, node: NodeView) -> Expr:
    """ScatterElements along ``axis``, with ``reduction`` from opset 16."""
    data = arg(ctx, node, 0)
    axis = normalize_axis(int(node.attr("axis", 0)), ttype(data).ndim)
    return call(
        "scatter_elements",
        data,
        arg(ctx, node, 1, "indices"),
        arg(ctx, node, 2, "updates"),
        axis=axis,
        reduction=_reduction(ctx, node),
        name=node.name,
    )


onnx_op("Scatter", since=9, dtypes=ALL_TYPES)(scatter_elements)


@onnx_op("ScatterND", since=11, dtypes=ALL_TYPES)
def scatter_nd(ctx: ConvertContext, node: NodeView) -> Expr:
    """ScatterND, with ``reduction`` from opset 16."""
    return call(
        "scatter_nd",
        arg(ctx, node, 0),
        arg(ctx, node, 1, "indices"),
        arg(ctx, node, 2, "updates"),
        reduction=_reduction(ctx, node),
        name=node.name,
    )


def _scalar_at(values: Expr, i: int) -> Expr:
    """Element ``i`` of a 1-D tensor as a rank-0 tensor."""
    part = call("strided_slice", values, begin=(i,), end=(i + 1,), strides=(1,))
    return call("reshape", part, newshape=())


@onnx_op("OneHot", since=9, dtypes=NUMERIC_TYPES)
def one_hot(ctx: ConvertContext, node: NodeView) -> Expr:
    """OneHot(indices, depth, values=[off, on]); negative indices wrap by depth."""
    indices = arg(ctx, node, 0)
    depth = int(np.asarray(ctx.require_const(node.input(1), "depth")).reshape(-1)[0])
    values = arg(ctx, node, 2, "values")
    if ttype(values).shape != (2,):
        ctx.fail(node, f"values must hold [off_value, on_value], got shape {ttype(values).shape}")
    if ttype(indices).dtype not in ("int32", "int64"):
        indices = call("cast", indices, dtype="int64")
    axis = normalize_axis(int(node.attr("axis", -1)), ttype(indices).ndim + 1)
    on, off = _scalar_at(values, 1), _scalar_at(values, 0)
    return call("one_hot", indices, on, off, depth=depth, axis=axis, name=node.name)


@onnx_op("EyeLike", since=9, dtypes=ALL_TYPES)
def eye_like(ctx: ConvertContext, node: NodeView) -> Expr:
    """EyeLike: a constant with ones on diagonal ``k`` and the input's 2-D shape."""
    x = arg(ctx, node, 0)
    shape = ttype(x).shape
    if len(shape) != 2:
        ctx.fail(node, f"the input must be 2-D, got shape {shape}")
    to = node.attr("dtype", None)
    dtype = ttype(x).dtype if to is None else onnx_elem_dtype(int(to), ctx.where(node))
    eye = np.eye(shape[0], shape[1], int(node.attr("k", 0)))
    return Constant(eye.astype(np_dtype(dtype)))


@onnx_op("Compress", since=9, dtypes=ALL_TYPES)
def compress(ctx: ConvertContext, node: NodeView) -> Expr:
    """Compress with a constant condition: a ``take`` of the selected positions (along
    ``axis``, or of the flattened input without one)."""
    x = arg(ctx, node, 0)
    cond = np.asarray(ctx.require_const(node.input(1), "condition")).reshape(-1).astype(bool)
    axis_attr = node.attr("axis", None)
    if axis_attr is None:
        x = call("reshape", x, newshape=(ttype(x).size,))
        axis = 0
    else:
        axis = normalize_axis(int(axis_attr), ttype(x).ndim)
    dim = ttype(x).shape[axis]
    picked = np.nonzero(cond[:dim])[0].astype(np.int64)
    return call("take", x, Constant(picked), axis=axis, name=node.name)
