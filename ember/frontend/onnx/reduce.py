"""ONNX handlers for reductions: ReduceSum/Mean/Max/Min/Prod map to IR reductions;
ReduceL1/L2/SumSquare/LogSum/LogSumExp are compositions (16-bit floats are computed in
float32 and rounded once); ArgMax and ArgMin (TopK, CumSum and CumProd: the scan family).

``axes`` is an attribute up to opset 12 (ReduceSum) or 17 (the others) and an optional
input after; an empty/omitted ``axes`` reduces everything unless
``noop_with_empty_axes`` is set, in which case the input passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from ember.frontend.onnx.common import arg, scalar_const, ttype
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import ALL_TYPES, NUMERIC_TYPES, HandlerFn, onnx_op
from ember.ir.expr import Expr, call
from ember.ir.ops.common import normalize_axes, normalize_axis
from ember.support.dtypes import is_half

#: the first opset in which each reduction takes ``axes`` as an input.
_AXES_INPUT_SINCE = {"ReduceSum": 13}


def _axes(ctx: ConvertContext, node: NodeView, ndim: int) -> tuple[int, ...] | None:
    """The normalised reduced axes, or None when the node is a no-op."""
    if node.opset >= _AXES_INPUT_SINCE.get(node.op_type, 18):
        given = node.input(1)
        raw = None if given is None else ctx.require_const(given, "axes")
        axes = None if raw is None or raw.size == 0 else [int(a) for a in raw.reshape(-1)]
    else:
        attr = node.attr("axes", None)
        axes = None if attr is None or len(attr) == 0 else [int(a) for a in attr]
    if axes is None:
        if node.attr("noop_with_empty_axes", 0):
            return None
        return tuple(range(ndim))
    return normalize_axes(axes, ndim)


def _widen(x: Expr) -> tuple[Expr, str]:
    """``x`` cast to float32 when it is a 16-bit float, and its original dtype."""
    dtype = ttype(x).dtype
    if is_half(dtype):
        return call("cast", x, dtype="float32"), dtype
    return x, dtype


def _narrow(x: Expr, dtype: str, name: str) -> Expr:
    if ttype(x).dtype != dtype:
        return call("cast", x, dtype=dtype, name=name)
    return x


Composer = Callable[[Expr, tuple[int, ...], bool, str], Expr]


def _sum_square(x: Expr, axes: tuple[int, ...], keep: bool, name: str) -> Expr:
    w, dtype = _widen(x)
    out = call("sum", call("multiply", w, w), axes=axes, keepdims=keep)
    return _narrow(out, dtype, name)


def _l1(x: Expr, axes: tuple[int, ...], keep: bool, name: str) -> Expr:
    w, dtype = _widen(x)
    return _narrow(call("sum", call("abs", w), axes=axes, keepdims=keep), dtype, name)


def _float_of(x: Expr) -> tuple[Expr, str]:
    """``x`` as a float tensor (integers go through float64), and its original dtype."""
    w, dtype = _widen(x)
    if ttype(w).dtype not in ("float32", "float64"):
        w = call("cast", w, dtype="float64")
    return w, dtype


def _l2(x: Expr, axes: tuple[int, ...], keep: bool, name: str) -> Expr:
    w, dtype = _float_of(x)
    out = call("sqrt", call("sum", call("multiply", w, w), axes=axes, keepdims=keep))
    return _narrow(out, dtype, name)


def _log_sum(x: Expr, axes: tuple[int, ...], keep: bool, name: str) -> Expr:
    w, dtype = _float_of(x)
    return _narrow(call("log", call("sum", w, axes=axes, keepdims=keep)), dtype, name)


def _log_sum_exp(x: Expr, axes: tuple[int, ...], keep: bool, name: str) -> Expr:
    """log(sum(exp(x - m))) + m with m the (finite) max, so large inputs do not overflow."""
    w, dtype = _float_of(x)
    wdtype = ttype(w).dtype
    m = call("max", w, axes=axes, keepdims=True)
    shift = call("where", call("isinf", m), scalar_const(0, wdtype), m)
    total = call("sum", call("exp", call("subtract", w, shift)), axes=axes, keepdims=keep)
    if not keep:
        shape = ttype(total).shape
        shift = call("reshape", shift, newshape=shape)
    return _narrow(call("add", call("log", total), shift), dtype, name)


def _reduce_handler(ir_op: str | None, compose: Composer | None) -> HandlerFn:
    def handler(ctx: ConvertContext, node: NodeView) -> Expr:
        x = arg(ctx, node, 0)
        axes = _axes(ctx, node, ttype(x).ndim)
        if axes is None:
            return x
        keep = bool(node.attr("keepdims", 1))
        if ir_op is not None:
            return call(ir_op, x, axes=axes, keepdims=keep, name=node.name)
        if compose is None:
            ctx.fail(node, "no IR lowering is registered for this reduction")
        return compose(x, axes, keep, node.name)

    handler.__doc__ = f"ONNX reduction -> IR '{ir_op or 'composition'}'."
    return handler


_REDUCTIONS: dict[str, tuple[str | None, Composer | None, frozenset[str]]] = {
    "ReduceSum": ("sum", None, NUMERIC_TYPES),
    "ReduceMean": ("mean", None, NUMERIC_TYPES),
    "ReduceMax": ("max", None, ALL_TYPES),
    "ReduceMin": ("min", None, ALL_TYPES),
    "ReduceProd": ("prod", None, NUMERIC_TYPES),
    "ReduceL1": (None, _l1, NUMERIC_TYPES),
    "ReduceL2": (None, _l2, NUMERIC_TYPES),
    "ReduceSumSquare": (None, _sum_square, NUMERIC_TYPES),
    "ReduceLogSum": (None, _log_sum, NUMERIC_TYPES),
    "ReduceLogSumExp": (None, _log_sum_exp, NUMERIC_TYPES),
}

for _onnx, (_ir, _compose, _dtypes) in _REDUCTIONS.items():
    onnx_op(_onnx, since=1, dtypes=_dtypes)(_reduce_handler(_ir, _compose))


def _arg_handler(ir_op: str) -> HandlerFn:
    def handler(ctx: ConvertContext, node: NodeView) -> Expr:
        x = arg(ctx, node, 0)
        axis = normalize_axis(int(node.attr("axis", 0)), ttype(x).ndim)
        return call(
            ir_op,
            x,
            axis=axis,
            keepdims=bool(node.attr("keepdims", 1)),
            select_last_index=bool(node.attr("select_last_index", 0)),
            name=node.name,
        )

    handler.__doc__ = f"ONNX {ir_op} -> IR '{ir_op}' (int64 indices)."
    return handler


onnx_op("ArgMax", since=1, dtypes=NUMERIC_TYPES)(_arg_handler("argmax"))
onnx_op("ArgMin", since=1, dtypes=NUMERIC_TYPES)(_arg_handler("argmin"))
