"""ONNX handlers for normalisations: BatchNormalization (inference, and training mode by
decomposition), InstanceNormalization, GroupNormalization, LayerNormalization
(Mean/InvStdDev outputs by decomposition when used), LRN, Softmax, LogSoftmax and Hardmax
(opset < 13 coerces to 2-D), LpNormalization."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ember.frontend.onnx import common
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.nn_common import (
    check_unused_outputs,
    required,
    reshape,
    scalar,
    ttype,
    unsupported,
)
from ember.frontend.onnx.registry import FLOAT_TYPES, onnx_op
from ember.ir.expr import Expr, call
from ember.ir.ops.common import normalize_axis


def _as_dtype(ctx: ConvertContext, node: NodeView, expr: Expr, dtype: str) -> Expr:
    if ttype(ctx, node, expr).dtype == dtype:
        return expr
    return call("cast", expr, dtype=dtype, name=f"{node.name}_cast")


def _moments(x: Expr, axes: Sequence[int], name: str) -> tuple[Expr, Expr, Expr]:
    """(mean, x - mean, biased variance) over ``axes``, reductions keeping dims."""
    mean = call("mean", x, axes=tuple(axes), keepdims=True, name=f"{name}_mean")
    centered = call("subtract", x, mean, name=f"{name}_centered")
    square = call("multiply", centered, centered, name=f"{name}_square")
    var = call("mean", square, axes=tuple(axes), keepdims=True, name=f"{name}_var")
    return mean, centered, var


@onnx_op("BatchNormalization", since=1, dtypes=FLOAT_TYPES)
def batch_norm(ctx: ConvertContext, node: NodeView) -> Expr | list[Expr | None]:
    """BatchNormalization: nn.batch_norm in inference; batch statistics in training mode."""
    x = required(ctx, node, 0, "X")
    xt = ttype(ctx, node, x)
    params = [
        _as_dtype(ctx, node, required(ctx, node, i, what), xt.dtype)
        for i, what in enumerate(("scale", "B", "input_mean", "input_var"), start=1)
    ]
    if node.opset < 9 and node.attr("spatial", 1) == 0:
        raise unsupported(ctx, node, "BatchNormalization with spatial=0")
    eps = node.attr("epsilon", 1e-5)
    if node.opset >= 14 and node.attr("training_mode", 0):
        return _batch_norm_training(ctx, node, x, params, eps)
    check_unused_outputs(ctx, node, 1, "training statistics outside training_mode")
    return call("nn.batch_norm", x, *params, epsilon=eps, name=node.name)


def _batch_norm_training(
    ctx: ConvertContext, node: NodeView, x: Expr, params: list[Expr], eps: float
) -> list[Expr | None]:
    xt = ttype(ctx, node, x)
    channels = xt.shape[1]
    axes = [0, *range(2, xt.ndim)]
    scale, bias, run_mean, run_var = params
    mean, centered, var = _moments(x, axes, node.name)
    shape = (channels,) + (1,) * (xt.ndim - 2)
    denom = call("sqrt", call("add", var, scalar(eps, xt.dtype)))
    y = call("multiply", call("divide", centered, denom), reshape(ctx, scale, shape))
    y = call("add", y, reshape(ctx, bias, shape), name=node.name)
    momentum = node.attr("momentum", 0.9)
    outs: list[Expr | None] = [y]
    for running, current in ((run_mean, mean), (run_var, var)):
        kept = call("multiply", running, scalar(momentum, xt.dtype))
        new = call("multiply", reshape(ctx, current, (channels,)), scalar(1 - momentum, xt.dtype))
        outs.append(call("add", kept, new))
    return outs


@onnx_op("InstanceNormalization", since=1, dtypes=FLOAT_TYPES)
def instance_norm(ctx: ConvertContext, node: NodeView) -> Expr:
    """InstanceNormalization."""
    x = required(ctx, node, 0, "input")
    scale = required(ctx, node, 1, "scale")
    bias = required(ctx, node, 2, "B")
    eps = node.attr("epsilon", 1e-5)
    return call("nn.instance_norm", x, scale, bias, epsilon=eps, name=node.name)


@onnx_op("GroupNormalization", since=18, dtypes=FLOAT_TYPES)
def group_norm(ctx: ConvertContext, node: NodeView) -> Expr:
    """GroupNormalization: nn.group_norm; opset 18's per-group scale and bias are repeated
    over each group's channels (opset 21 has them per channel)."""
    x = required(ctx, node, 0, "X")
    xt = ttype(ctx, node, x)
    groups = int(node.attr("num_groups"))
    if xt.ndim < 2 or groups < 1 or xt.shape[1] % groups:
        ctx.fail(node, f"num_groups {groups} must divide the channels of X {list(xt.shape)}")
    channels = xt.shape[1]
    params = [required(ctx, node, 1, "scale"), required(ctx, node, 2, "bias")]
    if node.opset < 21:
        per_group = [reshape(ctx, p, (groups, 1)) for p in params]
        params = [
            reshape(ctx, call("broadcast_to", p, shape=(groups, channels // groups)), (channels,))
            for p in per_group
        ]
    stash = "float32" if node.attr("stash_type", 1) == 1 else xt.dtype
    data = _as_dtype(ctx, node, x, stash)
    params = [_as_dtype(ctx, node, p, stash) for p in params]
    flat = xt.ndim == 2  # (N, C): one unit spatial axis
    if flat:
        data = reshape(ctx, data, (*xt.shape, 1))
    eps = node.attr("epsilon", 1e-5)
    y: Expr = call("nn.group_norm", data, *params, num_groups=groups, epsilon=eps, name=node.name)
    if flat:
        y = reshape(ctx, y, xt.shape)
    return _as_dtype(ctx, node, y, xt.dtype)


@onnx_op("LayerNormalization", since=17, dtypes=FLOAT_TYPES)
def layer_norm(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """LayerNormalization; Mean and InvStdDev are computed only when used."""
    x = required(ctx, node, 0, "X")
    xt = ttype(ctx, node, x)
    axis = node.attr("axis", -1)
    if not -xt.ndim <= axis < xt.ndim:
        ctx.fail(node, f"axis {axis} is out of range for X of rank {xt.ndim}")
    axis %= xt.ndim
    eps = node.attr("epsilon", 1e-5)
    args = [x, required(ctx, node, 1, "Scale")]
    bias = node.input(2)
    if bias is not None:
        args.append(bias)
    y = call("nn.layer_norm", *args, axis=axis, epsilon=eps, name=node.name)
    outs: list[Expr | None] = [y, None, None]
    if node.output_used(1) or node.output_used(2):
        stash = "float32" if node.attr("stash_type", 1) == 1 else xt.dtype
        xs = _as_dtype(ctx, node, x, stash)
        mean, _, var = _moments(xs, range(axis, xt.ndim), node.name)
        std = call("sqrt", call("add", var, scalar(eps, stash)))
        outs[1] = mean
        outs[2] = call("reciprocal", std, name=f"{node.name}_inv_std")
    return outs[: max(node.num_outputs, 1)]


@onnx_op("LRN", since=1, dtypes=FLOAT_TYPES)
def lrn(ctx: ConvertContext, node: NodeView) -> Expr:
    """LRN across channels."""
    return call(
        "nn.lrn",
        required(ctx, node, 0, "X"),
        size=node.attr("size"),
        alpha=node.attr("alpha", 1e-4),
        beta=node.attr("beta", 0.75),
        bias=node.attr("bias", 1.0),
        name=node.name,
    )


def _softmax(ctx: ConvertContext, node: NodeView, op: str) -> Expr:
    x = required(ctx, node, 0, "input")
    xt = ttype(ctx, node, x)
    rank = max(xt.ndim, 1)
    axis = node.attr("axis", 1 if node.opset < 13 else -1)
    if not -rank <= axis < rank:
        ctx.fail(node, f"axis {axis} is out of range for an input of rank {xt.ndim}")
    axis %= rank
    if node.opset >= 13 or axis == xt.ndim - 1:
        return call(op, x, axis=axis, name=node.name)
    # Before opset 13 the input is coerced to 2-D [prod(shape[:axis]), prod(shape[axis:])].
    flat = (math.prod(xt.shape[:axis]), math.prod(xt.shape[axis:]))
    y = call(op, reshape(ctx, x, flat, name=f"{node.name}_2d"), axis=1, name=node.name)
    return reshape(ctx, y, xt.shape, name=f"{node.name}_restore")


@onnx_op("Softmax", since=1, dtypes=FLOAT_TYPES)
def softmax(ctx: ConvertContext, node: NodeView) -> Expr:
    """Softmax."""
    return _softmax(ctx, node, "nn.softmax")


@onnx_op("LogSoftmax", since=1, dtypes=FLOAT_TYPES)
def log_softmax(ctx: ConvertContext, node: NodeView) -> Expr:
    """LogSoftmax."""
    return _softmax(ctx, node, "nn.log_softmax")


@onnx_op("Hardmax", since=1, dtypes=FLOAT_TYPES)
def hardmax(ctx: ConvertContext, node: NodeView) -> Expr:
    """Hardmax: 1 at the first maximum along ``axis``, 0 elsewhere (2-D coercion < 13)."""
    x = common.arg(ctx, node, 0)
    shape = common.ttype(x).shape
    dtype = common.ttype(x).dtype
    legacy = node.opset < 13
    axis = normalize_axis(int(node.attr("axis", 1 if legacy else -1)), len(shape))
    work = x
    if legacy:
        rows = math.prod(shape[:axis])
        work = call("reshape", x, newshape=(rows, math.prod(shape) // max(rows, 1)))
        axis = 1
    depth = common.ttype(work).shape[axis]
    idx = call("argmax", work, axis=axis, keepdims=False)
    out = call(
        "one_hot",
        idx,
        common.scalar_const(1, dtype),
        common.scalar_const(0, dtype),
        depth=depth,
        axis=axis,
    )
    if legacy:
        out = call("reshape", out, newshape=shape)
    return out


@onnx_op("LpNormalization", since=1, dtypes=FLOAT_TYPES)
def lp_normalization(ctx: ConvertContext, node: NodeView) -> Expr:
    """LpNormalization: x divided by its L1 or L2 norm along ``axis`` (0 where the norm is 0,
    whose elements are all 0: the norm is replaced by 1 there)."""
    x = required(ctx, node, 0, "input")
    xt = ttype(ctx, node, x)
    p = int(node.attr("p", 2))
    if p not in (1, 2):
        ctx.fail(node, f"p must be 1 or 2, got {p}")
    axis = normalize_axis(int(node.attr("axis", -1)), xt.ndim)
    if p == 1:
        norm = call("sum", call("abs", x), axes=(axis,), keepdims=True)
    else:
        square = call("multiply", x, x)
        norm = call("sqrt", call("sum", square, axes=(axis,), keepdims=True))
    zero = call("equal", norm, scalar(0.0, xt.dtype))
    safe = call("where", zero, scalar(1.0, xt.dtype), norm)
    return call("divide", x, safe, name=node.name)
