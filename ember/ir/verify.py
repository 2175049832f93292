"""Verifier: check that an IRModule (or Function) is well-formed, raising IRError naming
the offending node.

Checks: the graph is acyclic; every variable a function's body uses is one of that
function's parameters (nested functions are closed), and no variable is a parameter twice;
each Call's attributes still satisfy its op's schema and re-inferring its type gives the
recorded type; tuple, tuple-item and function types agree with their parts;
calls of a Function (fused groups) pass arguments matching its parameter types.
"""

from __future__ import annotations

from ember.errors import IRError
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
from ember.ir.op import OpDef
from ember.ir.types import TupleType


def verify(mod: IRModule | Function) -> None:
    """Raise IRError if ``mod`` (every function of it) is ill-formed; return None if fine."""
    funcs = mod.functions.items() if isinstance(mod, IRModule) else [("<function>", mod)]
    for name, func in funcs:
        if not isinstance(func, Function):
            raise IRError(
                f"verify: module entry '{name}' is a {type(func).__name__}, not a Function"
            )
        _check_acyclic(func, name)
        bound: set[int] = set()
        seen: set[int] = set()
        pending: list[Function] = [func]
        while pending:
            fn = pending.pop()
            if id(fn) not in seen:  # a nested function may be called from several places
                seen.add(id(fn))
                pending.extend(_check_function(fn, name, bound))


def _describe(node: Expr) -> str:
    if isinstance(node, Call):
        return f"call to '{node.op_name}'" + (f" (node '{node.name}')" if node.name else "")
    if isinstance(node, Var):
        return f"variable %{node.name}"
    return type(node).__name__


def _edges(node: Expr) -> tuple[Expr, ...]:
    """Children including a called Function, so cycles through callees are found too."""
    kids = children(node)
    if isinstance(node, Call) and isinstance(node.op, Function):
        return (node.op, *kids)
    return kids


def _check_acyclic(func: Function, where: str) -> None:
    """Iterative three-colour DFS over every edge, including nested function bodies."""
    state: dict[int, int] = {}  # 1 = on the current path, 2 = done
    stack: list[tuple[Expr, int]] = [(func, 0)]
    state[id(func)] = 1
    while stack:
        node, i = stack.pop()
        kids = _edges(node)
        if i < len(kids):
            stack.append((node, i + 1))
            child = kids[i]
            s = state.get(id(child), 0)
            if s == 1:
                raise IRError(f"verify: function '{where}': cycle through {_describe(child)}")
            if s == 0:
                state[id(child)] = 1
                stack.append((child, 0))
        else:
            state[id(node)] = 2


def _check_function(fn: Function, where: str, bound: set[int]) -> list[Function]:
    """Check one function's dataflow graph; return the nested functions it contains."""
    params = {id(p) for p in fn.params}
    if len(params) != len(fn.params):
        raise IRError(f"verify: function '{where}' lists a parameter twice")
    for p in fn.params:
        if id(p) in bound:
            raise IRError(
                f"verify: function '{where}': %{p.name} is a parameter of two functions; "
                "give each function its own Var objects"
            )
        bound.add(id(p))
    if fn.type != fn.body.type:
        raise IRError(f"verify: function '{where}' has type {fn.type}, body is {fn.body.type}")
    nested: list[Function] = []
    order = post_order(fn.body)
    if any(isinstance(node, Function) for node in order):
        raise IRError(f"verify: function '{where}': a Function used as a value; only call it")
    for node in order:
        if isinstance(node, Var):
            if id(node) not in params:
                raise IRError(
                    f"verify: function '{where}' uses %{node.name}, which is not one of its "
                    "parameters (nested functions must be closed: pass it as an argument)"
                )
        elif isinstance(node, Call):
            if isinstance(node.op, Function):
                nested.append(node.op)
                _check_function_call(node, node.op, where)
            else:
                _check_call(node, node.op, where)
        elif isinstance(node, Tuple):
            want = TupleType(tuple(f.type for f in node.fields))
            if node.type != want:
                raise IRError(f"verify: function '{where}': tuple has type {node.type}, not {want}")
        elif isinstance(node, TupleGetItem):
            ty = node.tuple_value.type
            if not isinstance(ty, TupleType) or not 0 <= node.index < len(ty.fields):
                raise IRError(f"verify: function '{where}': bad tuple index {node.index} of {ty}")
            if node.type != ty.fields[node.index]:
                raise IRError(f"verify: function '{where}': tuple item {node.index} mistyped")
        elif not isinstance(node, Constant):
            raise IRError(f"verify: function '{where}': unknown node {type(node).__name__}")
    return nested


def _check_call(node: Call, op: OpDef, where: str) -> None:
    what = f"verify: function '{where}': {_describe(node)}"
    try:
        attrs = op.make_attrs(dict(node.attrs))
        op.check_arity(len(node.args))
        inferred = op.infer_type([a.type for a in node.args], attrs)
    except IRError as err:
        raise IRError(f"{what}: {err}") from None
    if attrs != node.attrs:
        raise IRError(f"{what}: attributes {node.attrs!r} do not match the schema ({attrs!r})")
    if inferred != node.type:
        raise IRError(f"{what}: recorded type {node.type}, but the type rule gives {inferred}")


def _check_function_call(node: Call, fn: Function, where: str) -> None:
    what = f"verify: function '{where}': {_describe(node)}"
    if len(node.args) != len(fn.params):
        raise IRError(
            f"{what}: the function takes {len(fn.params)} arguments, got {len(node.args)}"
        )
    for i, (a, p) in enumerate(zip(node.args, fn.params, strict=True)):
        if a.type != p.type:
            raise IRError(f"{what}: argument {i} has type {a.type}, parameter is {p.type}")
    if node.type != fn.ret_type:
        raise IRError(f"{what}: recorded type {node.type}, the function returns {fn.ret_type}")
