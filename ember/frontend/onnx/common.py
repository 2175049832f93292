"""Helpers shared by the ONNX handlers of every op family: required tensor inputs, tensor
types, scalar constants, and standard ops built by their own handlers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import helper

from ember.errors import OpNotSupportedError
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import find_handler
from ember.ir.expr import Constant, Expr
from ember.ir.ops.common import np_dtype
from ember.ir.types import TensorType


def arg(ctx: ConvertContext, node: NodeView, i: int, what: str = "") -> Expr:
    """Input ``i`` of ``node`` as a tensor expression; FrontendError if omitted."""
    expr = node.input(i)
    if expr is None:
        ctx.fail(node, f"{what or 'input'} (input {i}) is required but omitted")
    if not isinstance(expr.type, TensorType):
        ctx.fail(node, f"input {i} must be a tensor, got {expr.type}")
    return expr


def ttype(expr: Expr) -> TensorType:
    """The tensor type of an expression known to be a tensor."""
    return expr.tensor_type


def scalar_const(value: float | int, dtype: str) -> Constant:
    """A rank-0 constant of ``dtype``."""
    return Constant(np.asarray(value).astype(np_dtype(dtype)))


def standard_op(
    ctx: ConvertContext,
    node: NodeView,
    op_type: str,
    inputs: Sequence[Expr | None],
    attrs: dict[str, Any],
    opset: int = 0,
    outputs: int = 1,
) -> list[Expr | None]:
    """The outputs of the default-domain ``op_type`` on ``inputs`` (None: an omitted optional
    input), converted by its own handler at ``opset`` (default: the model's default-domain
    opset, or 13 when it imports none). For ops defined as other ops (QLinearConv as
    dequantize, Conv, quantize)."""
    opset = opset or ctx.opset("") or 13
    handler = find_handler(op_type, opset)
    if handler is None:
        raise OpNotSupportedError(f"{ctx.where(node)}: needs {op_type} at opset {opset}")
    names = [f"{node.name}_in{i}" if e is not None else "" for i, e in enumerate(inputs)]
    outs = [f"{node.name}_out{i}" for i in range(outputs)]
    proto = helper.make_node(op_type, names, outs, f"{node.name}_{op_type}", **attrs)
    result = handler.fn(ctx, NodeView(proto, list(inputs), opset, 0))
    if isinstance(result, (list, tuple)):
        return list(result)
    return [result]  # type: ignore[list-item]
