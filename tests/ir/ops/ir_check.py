"""Shared helpers of the graph-IR op tests: typed variables and the reference evaluator."""

from __future__ import annotations

import numpy as np

from ember.ir import Function, IRModule, TensorType, Var, evaluate
from ember.ir.expr import Expr


def var(shape: tuple[int, ...], dtype: str = "float32", name: str = "x") -> Var:
    """A variable of a tensor type."""
    return Var(name, TensorType(shape, dtype))


def run(expr: Expr, params: list[Var], values: list[np.ndarray]) -> list[np.ndarray]:
    """The reference outputs of ``expr`` over ``params`` bound to ``values``."""
    return evaluate(IRModule.from_expr(Function(tuple(params), expr)), values)
