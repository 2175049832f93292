"""ONNX handlers for the loss ops usable at inference: NegativeLogLikelihoodLoss and
SoftmaxCrossEntropyLoss, by decomposition into existing IR ops (no op of their own).

With ``x`` of shape (N, C, d1..dk), integer ``target`` of shape (N, d1..dk) and optional
class ``weight`` (C,), the per-element loss is ``-x[n, target[n, d], d] * weight[target]``,
0 where ``target == ignore_index``; ``reduction`` is none, sum, or mean (the sum divided
by the sum of the weights used). SoftmaxCrossEntropyLoss is the same over
``log_softmax(scores, axis=1)``, which it may also return.
"""

from __future__ import annotations

import numpy as np

from ember.frontend.onnx import common
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import FLOAT_TYPES, onnx_op
from ember.ir.expr import Constant, Expr, call

_REDUCTIONS = ("none", "sum", "mean")


def _reduction(ctx: ConvertContext, node: NodeView) -> str:
    value = node.attr("reduction", "mean")
    text = value.decode() if isinstance(value, bytes) else str(value)
    if text not in _REDUCTIONS:
        ctx.fail(node, f"reduction '{text}' is not one of {', '.join(_REDUCTIONS)}")
    return text


def nll(
    ctx: ConvertContext,
    node: NodeView,
    logp: Expr,
    target: Expr,
    weight: Expr | None,
) -> Expr:
    """The reduced negative log-likelihood of ``logp`` (N, C, ...) at ``target``."""
    xt, tt = common.ttype(logp), common.ttype(target)
    if xt.ndim < 2 or tt.shape != (xt.shape[0], *xt.shape[2:]):
        ctx.fail(
            node,
            f"input {xt.shape} and target {tt.shape} do not fit: target must be "
            "(N, d1, ..., dk) for input (N, C, d1, ..., dk)",
        )
    if tt.dtype not in ("int32", "int64"):
        ctx.fail(node, f"target must be int32 or int64, got {tt.dtype}")
    name, dtype = node.name, xt.dtype
    ignore = node.attr("ignore_index", None)
    mask: Expr | None = None
    safe = target
    if ignore is not None:
        mask = call("not_equal", target, common.scalar_const(int(ignore), tt.dtype))
        safe = call("where", mask, target, common.scalar_const(0, tt.dtype), name=f"{name}_t")
    index = call("reshape", safe, newshape=(tt.shape[0], 1, *tt.shape[1:]))
    picked = call("gather_elements", logp, index, axis=1, name=f"{name}_pick")
    picked = call("reshape", picked, newshape=tt.shape)
    w: Expr
    if weight is not None:
        w = call("take", weight, safe, axis=0, name=f"{name}_w")
    else:
        w = Constant(np.ones(tt.shape, dtype=np.dtype(dtype)))
    if mask is not None:
        w = call("where", mask, w, common.scalar_const(0, dtype), name=f"{name}_wmask")
    loss = call("negative", call("multiply", picked, w), name=f"{name}_elem")
    reduction = _reduction(ctx, node)
    if reduction == "none":
        return loss
    axes = tuple(range(len(tt.shape)))
    total = call("sum", loss, axes=axes, keepdims=False, name=f"{name}_sum")
    if reduction == "sum":
        return total
    count = call("sum", w, axes=axes, keepdims=False, name=f"{name}_wsum")
    return call("divide", total, count, name=name)


@onnx_op("NegativeLogLikelihoodLoss", since=12, dtypes=FLOAT_TYPES)
def negative_log_likelihood_loss(ctx: ConvertContext, node: NodeView) -> Expr:
    """NegativeLogLikelihoodLoss over log-probabilities (N, C, d1..dk)."""
    x = common.arg(ctx, node, 0, "input")
    target = common.arg(ctx, node, 1, "target")
    return nll(ctx, node, x, target, node.input(2))


@onnx_op("SoftmaxCrossEntropyLoss", since=12, dtypes=FLOAT_TYPES)
def softmax_cross_entropy_loss(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """SoftmaxCrossEntropyLoss: NLL of log_softmax over the class axis (and log_prob)."""
    scores = common.arg(ctx, node, 0, "scores")
    labels = common.arg(ctx, node, 1, "labels")
    logp = call("nn.log_softmax", scores, axis=1, name=f"{node.name}_log_prob")
    loss = nll(ctx, node, logp, labels, node.input(2))
    return [loss, logp if node.output_used(1) else None]
