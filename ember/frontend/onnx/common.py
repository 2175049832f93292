"""Helpers shared by the ONNX handlers of every op family: required tensor inputs, tensor
types and scalar constants."""

from __future__ import annotations

import numpy as np

from ember.frontend.onnx.context import ConvertContext, NodeView
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
