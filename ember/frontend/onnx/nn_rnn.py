"""ONNX handlers for recurrent layers: RNN, GRU, LSTM (forward, reverse, bidirectional,
any listed activations, clip, optional B / sequence_lens / initial states / peepholes,
layout 0 and 1). Omitted optional inputs become zero constants; sequence_lens that are
statically all equal to the sequence length are dropped."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.nn_common import required, ttype
from ember.frontend.onnx.registry import FLOAT_TYPES, onnx_op
from ember.ir.expr import Constant, Expr, TupleGetItem, call


def _recurrent(ctx: ConvertContext, node: NodeView, op: str, gates: int) -> list[Expr | None]:
    has_c = op == "nn.lstm"
    x = required(ctx, node, 0, "X")
    w = required(ctx, node, 1, "W")
    r = required(ctx, node, 2, "R")
    layout = node.attr("layout", 0)
    if layout not in (0, 1):
        ctx.fail(node, f"layout must be 0 or 1, got {layout}")
    if layout == 1:
        x = call("transpose", x, axes=(1, 0, 2), name=f"{node.name}_time_major")
    xt, wt = ttype(ctx, node, x), ttype(ctx, node, w)
    if xt.ndim != 3 or wt.ndim != 3:
        ctx.fail(node, f"X and W must be 3-D, got {xt} and {wt}")
    seq, batch, _ = xt.shape
    dirs = wt.shape[0]
    hidden = int(node.attr("hidden_size", ttype(ctx, node, r).shape[-1]))
    dtype = xt.dtype

    def optional(i: int, shape: tuple[int, ...], batch_major: bool = False) -> Expr:
        value = node.input(i)
        if value is None:
            return Constant(np.zeros(shape, dtype))
        if batch_major and layout == 1:
            return call("transpose", value, axes=(1, 0, 2), name=f"{node.name}_state{i}")
        return value

    args = [
        x,
        w,
        r,
        optional(3, (dirs, 2 * gates * hidden)),
        optional(5, (dirs, batch, hidden), batch_major=True),
    ]
    if has_c:
        args.append(optional(6, (dirs, batch, hidden), batch_major=True))
        args.append(optional(7, (dirs, 3 * hidden)))
    lens = node.input(4)
    if lens is not None:
        value = ctx.const_value(lens)
        if value is None or not np.all(value == seq):
            args.append(lens)
    attrs: dict[str, Any] = {
        "hidden_size": hidden,
        "direction": node.attr("direction", "forward"),
        "activations": node.attr("activations", []),
        "activation_alpha": node.attr("activation_alpha", []),
        "activation_beta": node.attr("activation_beta", []),
        "clip": node.attr("clip", None),
    }
    if op == "nn.gru":
        attrs["linear_before_reset"] = bool(node.attr("linear_before_reset", 0))
    if has_c:
        attrs["input_forget"] = bool(node.attr("input_forget", 0))
    out = call(op, *args, name=node.name, **attrs)
    y: Expr = TupleGetItem(out, 0)
    states: list[Expr] = [TupleGetItem(out, i) for i in range(1, 3 if has_c else 2)]
    if layout == 1:
        y = call("transpose", y, axes=(2, 0, 1, 3), name=f"{node.name}_Y")
        states = [call("transpose", s, axes=(1, 0, 2)) for s in states]
    results: list[Expr | None] = [y, *states]
    return results[: max(node.num_outputs, 1)]


@onnx_op("RNN", since=1, dtypes=FLOAT_TYPES)
def rnn(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """RNN (Elman): outputs Y, Y_h."""
    return _recurrent(ctx, node, "nn.rnn", 1)


@onnx_op("GRU", since=1, dtypes=FLOAT_TYPES)
def gru(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """GRU: outputs Y, Y_h."""
    return _recurrent(ctx, node, "nn.gru", 3)


@onnx_op("LSTM", since=1, dtypes=FLOAT_TYPES)
def lstm(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """LSTM: outputs Y, Y_h, Y_c."""
    return _recurrent(ctx, node, "nn.lstm", 4)
