"""Reference evaluator: run an IRModule with each op's numpy reference implementation.

Used by tests, by constant folding and for debugging; it favours clarity over speed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ember.errors import IRError
from ember.ir.body_runner import BODY_RUNNERS
from ember.ir.expr import (
    Call,
    Constant,
    Expr,
    Function,
    Tuple,
    TupleGetItem,
    Var,
    children,
    post_order,
)
from ember.ir.module import IRModule
from ember.ir.types import TensorType, TupleType, Type, value_dtype

Value = Any  # np.ndarray or tuple of Values


def _check_value(value: Value, ty: Type, what: str) -> Value:
    """Verify that a computed value matches its static type; return it as a numpy value."""
    if isinstance(ty, TupleType):
        if not isinstance(value, tuple) or len(value) != len(ty.fields):
            raise IRError(f"{what}: expected a tuple of {len(ty.fields)} values")
        return tuple(
            _check_value(v, t, f"{what}[{i}]")
            for i, (v, t) in enumerate(zip(value, ty.fields, strict=True))
        )
    if not isinstance(ty, TensorType):
        raise IRError(f"{what}: cannot check a value against type {ty}")
    arr = np.asarray(value)
    if arr.shape != ty.shape or value_dtype(arr) != ty.dtype:
        raise IRError(
            f"{what}: reference produced {arr.dtype.name}{list(arr.shape)}, "
            f"but the type rule says {ty.dtype}{list(ty.shape)}"
        )
    return arr


def _use_counts(root: Expr, order: list[Expr]) -> dict[int, int]:
    """How often each node is an argument in ``order``; the root counts one extra use."""
    counts: dict[int, int] = {id(root): 1}
    for node in order:
        for child in children(node):
            counts[id(child)] = counts.get(id(child), 0) + 1
    return counts


def evaluate_expr(expr: Expr, env: Mapping[Var, Value]) -> Value:
    """Evaluate ``expr`` with variables bound by ``env``.

    A call of a Function (a fused group) evaluates the function's body on its arguments.
    Intermediate values are dropped once their last user has run, so evaluating a large
    model holds only the live tensors.
    """
    order = post_order(expr)
    remaining = _use_counts(expr, order)
    values: dict[int, Value] = {}
    for node in order:
        if isinstance(node, Var):
            if node not in env:
                raise IRError(f"no value bound for variable %{node.name}")
            values[id(node)] = env[node]
        elif isinstance(node, Constant):
            values[id(node)] = node.data
        elif isinstance(node, Call):
            op = node.op
            args = [values[id(a)] for a in node.args]
            if isinstance(op, Function):
                inner = dict(zip(op.params, args, strict=True))
                values[id(node)] = evaluate_expr(op.body, inner)
            else:
                out = op.reference(args, node.attrs)
                where = f"op '{op.name}'" + (f" (node '{node.name}')" if node.name else "")
                values[id(node)] = _check_value(out, node.type, where)
        elif isinstance(node, Tuple):
            values[id(node)] = tuple(values[id(f)] for f in node.fields)
        elif isinstance(node, TupleGetItem):
            values[id(node)] = values[id(node.tuple_value)][node.index]
        elif isinstance(node, Function):
            raise IRError("a Function can only be evaluated by calling it (Call(fn, args))")
        else:
            raise IRError(f"cannot evaluate {type(node).__name__}")
        for child in children(node):
            remaining[id(child)] -= 1
            if remaining[id(child)] == 0:
                del values[id(child)]
    return values[id(expr)]


def evaluate(
    mod: IRModule | Function,
    inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
    params: Mapping[str, np.ndarray] | None = None,
) -> list[np.ndarray]:
    """Run ``main`` of ``mod`` on ``inputs`` (by name, or positionally for non-parameter
    inputs) and ``params``; return the outputs as a flat list of numpy arrays."""
    func = mod.main if isinstance(mod, IRModule) else mod
    params = dict(params or {})
    free = [p for p in func.params if p.name not in params]
    if isinstance(inputs, Mapping):
        named = dict(inputs)
    else:
        inputs = list(inputs)
        if len(inputs) != len(free):
            raise IRError(
                f"expected {len(free)} inputs ({[p.name for p in free]}), got {len(inputs)}"
            )
        named = {p.name: v for p, v in zip(free, inputs, strict=True)}
    named.update(params)
    env: dict[Var, Value] = {}
    missing = [p.name for p in func.params if p.name not in named]
    if missing:
        raise IRError(f"missing values for inputs {missing}")
    for p in func.params:
        ty = p.type
        arr = np.asarray(named[p.name])
        text = isinstance(ty, TensorType) and ty.dtype == "string" and arr.dtype.kind in "OUS"
        arr = arr.astype(object) if text else arr  # strings: object arrays of str
        dtype = "string" if text else arr.dtype.name
        if isinstance(ty, TensorType) and (arr.shape != ty.shape or dtype != ty.dtype):
            raise IRError(
                f"input '{p.name}' expects {ty.dtype}{list(ty.shape)}, "
                f"got {arr.dtype.name}{list(arr.shape)}"
            )
        env[p] = arr
    result = evaluate_expr(func.body, env)
    return _flatten(result)


def _flatten(value: Value) -> list[np.ndarray]:
    if isinstance(value, tuple):
        out: list[np.ndarray] = []
        for v in value:
            out.extend(_flatten(v))
        return out
    return [np.asarray(value)]


def run_function(func: Function, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``func`` applied to ``args``: its outputs as a flat list (control ops' bodies)."""
    env = dict(zip(func.params, args, strict=True))
    return _flatten(evaluate_expr(func.body, env))


BODY_RUNNERS.register("evaluate", run_function)
