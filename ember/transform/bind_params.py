"""bind_params: IRModule + {name: array} -> IRModule whose ``main`` has those parameters
replaced by constants (and removed from its signature), so that passes can fold them."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ember.errors import IRError
from ember.ir.expr import Constant, Expr, Function, Var
from ember.ir.module import IRModule
from ember.ir.types import TensorType, value_dtype
from ember.transform._util import rewrite_graph


def bind_params(mod: IRModule, params: Mapping[str, np.ndarray], func: str = "main") -> IRModule:
    """Replace the parameters of ``mod[func]`` named in ``params`` by constants."""
    fn = mod[func]
    by_name = {p.name: p for p in fn.params}
    unknown = sorted(set(params) - set(by_name))
    if unknown:
        raise IRError(
            f"bind_params: {unknown} are not parameters of '{func}'; "
            f"its parameters are {sorted(by_name)}"
        )
    consts: dict[int, Constant] = {}
    for name, value in params.items():
        var = by_name[name]
        arr = np.asarray(value)
        arr = arr.astype(object) if arr.dtype.kind in "US" else arr  # strings: object arrays
        ty = var.type
        if not isinstance(ty, TensorType) or arr.shape != ty.shape or value_dtype(arr) != ty.dtype:
            raise IRError(
                f"bind_params: parameter '{name}' has type {ty}, "
                f"the value is {arr.dtype.name}{list(arr.shape)}; convert it first"
            )
        consts[id(var)] = Constant(arr)
    if not consts:
        return mod

    def rule(old: Expr, node: Expr, new: Mapping[int, Expr]) -> Expr | None:
        return consts.get(id(old)) if isinstance(old, Var) else None

    body = rewrite_graph(fn.body, rule)
    kept = tuple(p for p in fn.params if id(p) not in consts)
    return mod.with_function(func, Function(kept, body, fn.attrs))
