"""Control flow whose shapes stay static: ``control.if``, ``control.loop``, ``control.scan``.

Each op holds its body (or both branches) as an ir ``Function`` attribute. The body's
parameters are the op's leading arguments in order; values the body captures from the
enclosing graph are ordinary arguments after them (the frontend makes them explicit), so a
body is a closed function that compiles like a model of its own. Arguments beyond the
body's parameters are the constants of the compiled bodies (added by lowering,
``ember.driver.control``); the type rules and references ignore them.

* ``control.if(cond, *captured, then_branch=F, else_branch=G)``: F and G take the captured
  values and return the same types; the result is a tuple of them.
* ``control.scan(*states, *scan_inputs, *captured, body=F, num_states=N, ...)``: ONNX Scan
  (opset 9 and later) semantics: F(states, slices, captured) -> (states, scan outputs); the
  result is the final states, then each scan output stacked along its axis.
* ``control.loop(trip_count, cond, *carried, *captured, body=F, num_carried=N,
  iterations=T)``: ONNX Loop: F(i, cond, carried, captured) -> (cond, carried, scan
  outputs); runs while ``i < trip_count`` and ``cond``; scan outputs need the static
  iteration count ``T`` (``-1`` when there are none, so the count may depend on data).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember.errors import IRError
from ember.ir.body_runner import BODY_RUNNERS
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.types import TensorType, TupleType, Type

#: attribute of every control op: the compiled bodies (set by lowering, opaque to the IR).
PROGRAMS_ATTR = "programs"


def body_outputs(func: Any, what: str) -> list[TensorType]:
    """The flat tensor types a body returns (a tuple of tensors, or one tensor)."""
    ty = func.ret_type
    fields = ty.fields if isinstance(ty, TupleType) else (ty,)
    out = []
    for f in fields:
        if not isinstance(f, TensorType):
            raise IRError(f"{what}: a body returns tensors only, got {f}")
        out.append(f)
    return out


def _function(attrs: Attrs, name: str, op: str) -> Any:
    """The ir Function held by attribute ``name`` (checked by its fields: this module may
    not import ir.expr, see ember.ir.body_runner)."""
    func = attrs[name]
    if not all(hasattr(func, f) for f in ("params", "body", "ret_type")):
        raise IRError(f"op '{op}': attribute '{name}' must be an ir Function")
    return func


def _check_params(func: Any, types: Sequence[Type], what: str) -> None:
    """The leading argument types must be exactly the body's parameter types."""
    if len(types) < len(func.params):
        raise IRError(f"{what}: the body takes {len(func.params)} values, got {len(types)}")
    for p, t in zip(func.params, types, strict=False):
        if p.type != t:
            raise IRError(f"{what}: body parameter %{p.name} is {p.type}, the argument is {t}")


def _call(func: Any, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    return BODY_RUNNERS.get("evaluate")(func, args[: len(func.params)])


# -- if ---------------------------------------------------------------------------------


def _if_type(types: Sequence[Type], attrs: Attrs) -> Type:
    then_f = _function(attrs, "then_branch", "control.if")
    else_f = _function(attrs, "else_branch", "control.if")
    _check_params(then_f, types[1:], "control.if then_branch")
    _check_params(else_f, types[1:], "control.if else_branch")
    then_t = body_outputs(then_f, "control.if then_branch")
    else_t = body_outputs(else_f, "control.if else_branch")
    if then_t != else_t:
        raise IRError(
            "control.if: the branches return different types "
            f"({', '.join(map(str, then_t))} vs {', '.join(map(str, else_t))}); ember compiles "
            "static shapes, so both branches must return the same shapes and dtypes"
        )
    cond = types[0]
    if not isinstance(cond, TensorType) or cond.size != 1:
        raise IRError(f"control.if: the condition must be a one-element tensor, got {cond}")
    return TupleType(tuple(then_t))


def _if_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, ...]:
    branch = "then_branch" if bool(np.asarray(xs[0]).reshape(-1)[0]) else "else_branch"
    return tuple(_call(attrs[branch], xs[1:]))


# -- scan -------------------------------------------------------------------------------


def scan_layout(types: Sequence[Type], attrs: Attrs) -> tuple[int, list[TensorType]]:
    """The trip count of a ``control.scan`` and the types of its per-iteration slices."""
    n, m = attrs["num_states"], attrs["num_scan_inputs"]
    axes, length = attrs["scan_input_axes"], -1
    slices = []
    for k in range(m):
        x = types[n + k]
        if not isinstance(x, TensorType) or not 0 <= axes[k] < x.ndim:
            raise IRError(f"control.scan: scan input {k} ({x}) has no axis {axes[k]}")
        if length not in (-1, x.shape[axes[k]]):
            raise IRError(
                f"control.scan: scan inputs disagree on the sequence length ({length} vs "
                f"{x.shape[axes[k]]})"
            )
        length = x.shape[axes[k]]
        shape = x.shape[: axes[k]] + x.shape[axes[k] + 1 :]
        slices.append(TensorType(shape, x.dtype))
    if m == 0:
        raise IRError("control.scan needs at least one scan input")
    return length, slices


def _scan_type(types: Sequence[Type], attrs: Attrs) -> Type:
    body = _function(attrs, "body", "control.scan")
    n, m = attrs["num_states"], attrs["num_scan_inputs"]
    length, slices = scan_layout(types, attrs)
    _check_params(body, [*types[:n], *slices, *types[n + m :]], "control.scan")
    outs = body_outputs(body, "control.scan body")
    if outs[:n] != list(types[:n]):
        raise IRError(
            "control.scan: the body's state outputs "
            f"({', '.join(map(str, outs[:n]))}) differ from the states it takes "
            f"({', '.join(map(str, types[:n]))}); ember compiles static shapes"
        )
    result: list[Type] = list(outs[:n])
    for k, y in enumerate(outs[n:]):
        axis = attrs["scan_output_axes"][k]
        if not 0 <= axis <= y.ndim:
            raise IRError(f"control.scan: scan output {k} ({y}) has no axis {axis}")
        result.append(TensorType(y.shape[:axis] + (length,) + y.shape[axis:], y.dtype))
    return TupleType(tuple(result))


def _scan_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, ...]:
    body = attrs["body"]
    n, m = attrs["num_states"], attrs["num_scan_inputs"]
    states = [np.asarray(x) for x in xs[:n]]
    extra = list(xs[n + m : len(body.params)])
    length = xs[n].shape[attrs["scan_input_axes"][0]]
    ys: list[list[np.ndarray]] = []
    for t in range(length):
        slices = []
        for k in range(m):
            step = length - 1 - t if attrs["scan_input_directions"][k] else t
            slices.append(np.take(xs[n + k], step, axis=attrs["scan_input_axes"][k]))
        outs = _call(body, [*states, *slices, *extra])
        states = outs[:n]
        ys.append(outs[n:])
    out_types = body_outputs(body, "control.scan body")[n:]
    stacked = []
    for k, ty in enumerate(out_types):
        rows = [y[k] for y in ys]
        if attrs["scan_output_directions"][k]:
            rows.reverse()
        axis = attrs["scan_output_axes"][k]
        if rows:
            stacked.append(np.stack(rows, axis=axis))
        else:
            shape = ty.shape[:axis] + (0,) + ty.shape[axis:]
            stacked.append(np.zeros(shape, ty.dtype))
    return (*states, *stacked)


# -- loop -------------------------------------------------------------------------------


def _loop_type(types: Sequence[Type], attrs: Attrs) -> Type:
    body = _function(attrs, "body", "control.loop")
    n = attrs["num_carried"]
    trip, cond = types[0], types[1]
    if not isinstance(trip, TensorType) or trip.size != 1 or trip.dtype != "int64":
        raise IRError(f"control.loop: the trip count must be one int64, got {trip}")
    if not isinstance(cond, TensorType) or cond.size != 1 or cond.dtype != "bool":
        raise IRError(f"control.loop: the condition must be one bool, got {cond}")
    scalar = [TensorType((), "int64"), TensorType((), "bool")]
    _check_params(body, [*scalar, *types[2:]], "control.loop")
    outs = body_outputs(body, "control.loop body")
    if len(outs) < 1 + n or outs[0].size != 1 or outs[0].dtype != "bool":
        raise IRError("control.loop: the body must return a condition, then the carried values")
    if outs[1 : 1 + n] != list(types[2 : 2 + n]):
        raise IRError(
            "control.loop: the body's carried outputs "
            f"({', '.join(map(str, outs[1 : 1 + n]))}) differ from the values it takes "
            f"({', '.join(map(str, types[2 : 2 + n]))}); ember compiles static shapes"
        )
    scans = outs[1 + n :]
    count = attrs["iterations"]
    if scans and count < 0:
        raise IRError("control.loop: scan outputs need a static iteration count")
    result: list[Type] = list(outs[1 : 1 + n])
    result += [TensorType((count, *y.shape), y.dtype) for y in scans]
    return TupleType(tuple(result))


def _loop_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, ...]:
    body = attrs["body"]
    n = attrs["num_carried"]
    trip = int(np.asarray(xs[0]).reshape(-1)[0])
    cond = bool(np.asarray(xs[1]).reshape(-1)[0])
    carried = [np.asarray(x) for x in xs[2 : 2 + n]]
    extra = list(xs[2 + n : len(body.params)])
    ys: list[list[np.ndarray]] = []
    i = 0
    while i < trip and cond:
        outs = _call(body, [np.array(i, "int64"), np.array(cond), *carried, *extra])
        cond = bool(outs[0].reshape(-1)[0])
        carried = outs[1 : 1 + n]
        ys.append(outs[1 + n :])
        i += 1
    out_types = body_outputs(body, "control.loop body")[1 + n :]
    count = attrs["iterations"]
    if out_types and len(ys) != count:
        raise IRError(f"control.loop ran {len(ys)} iterations, its type says {count}")
    stacked = [
        np.stack([y[k] for y in ys]) if ys else np.zeros((0, *ty.shape), ty.dtype)
        for k, ty in enumerate(out_types)
    ]
    return (*carried, *stacked)


_FUNC = "an ir Function"
register_op(
    OpDef(
        "control.if",
        (1, None),
        _if_type,
        _if_ref,
        OpPattern.OPAQUE,
        {
            "then_branch": Attr("any", doc=_FUNC),
            "else_branch": Attr("any", doc=_FUNC),
            PROGRAMS_ATTR: Attr("any", None, "the compiled branches (lowering)"),
        },
        "a branch between two functions on a run-time condition",
    )
)
register_op(
    OpDef(
        "control.scan",
        (1, None),
        _scan_type,
        _scan_ref,
        OpPattern.OPAQUE,
        {
            "body": Attr("any", doc=_FUNC),
            "num_states": Attr("int"),
            "num_scan_inputs": Attr("int"),
            "scan_input_axes": Attr("ints"),
            "scan_input_directions": Attr("ints"),
            "scan_output_axes": Attr("ints"),
            "scan_output_directions": Attr("ints"),
            PROGRAMS_ATTR: Attr("any", None, "the compiled body (lowering)"),
        },
        "ONNX Scan: a body applied along an axis, carrying state",
    )
)
register_op(
    OpDef(
        "control.loop",
        (2, None),
        _loop_type,
        _loop_ref,
        OpPattern.OPAQUE,
        {
            "body": Attr("any", doc=_FUNC),
            "num_carried": Attr("int"),
            "iterations": Attr("int", -1, "the static iteration count (-1: data-dependent)"),
            "trip_bound": Attr("int", -1, "a static bound of the trip count (-1: none)"),
            PROGRAMS_ATTR: Attr("any", None, "the compiled body (lowering)"),
        },
        "ONNX Loop: a body run while a counter and a condition allow",
    )
)
