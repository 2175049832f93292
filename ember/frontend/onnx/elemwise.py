"""ONNX handlers of the elemwise family: activations, unary functions, Clip, Cast,
CastLike, BitwiseNot, Not, and the activations composed of several IR ops (Celu, Mish,
Swish, Shrink, ThresholdedRelu)."""

from __future__ import annotations

import math

import numpy as np
import onnx

from ember.frontend.onnx.cast_rules import E8M0_ROUND_MODES, onnx_cast
from ember.frontend.onnx.common import arg, scalar_const, ttype
from ember.frontend.onnx.context import ConvertContext, NodeView, onnx_elem_dtype
from ember.frontend.onnx.registry import (
    ALL_TYPES,
    FLOAT_TYPES,
    INT_TYPES,
    NUMERIC_TYPES,
    HandlerFn,
    onnx_op,
)
from ember.ir.expr import Expr, call

_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875

# -- unary ops ------------------------------------------------------------------------------

#: ONNX op -> (IR op, first opset, input dtypes, ONNX attr -> (IR attr, default)).
_UNARY: dict[str, tuple[str, int, frozenset[str], dict[str, tuple[str, object]]]] = {
    "Relu": ("relu", 1, NUMERIC_TYPES, {}),
    "LeakyRelu": ("leaky_relu", 1, FLOAT_TYPES, {"alpha": ("alpha", 0.01)}),
    "Elu": ("elu", 1, FLOAT_TYPES, {"alpha": ("alpha", 1.0)}),
    "Selu": (
        "selu",
        1,
        FLOAT_TYPES,
        {
            "alpha": ("alpha", 1.67326319217681884765625),
            "gamma": ("gamma", 1.05070102214813232421875),
        },
    ),
    "Sigmoid": ("sigmoid", 1, FLOAT_TYPES, {}),
    "HardSigmoid": (
        "hard_sigmoid",
        1,
        FLOAT_TYPES,
        {"alpha": ("alpha", 0.2), "beta": ("beta", 0.5)},
    ),
    "HardSwish": ("hard_swish", 14, FLOAT_TYPES, {}),
    "Tanh": ("tanh", 1, FLOAT_TYPES, {}),
    "Softplus": ("softplus", 1, FLOAT_TYPES, {}),
    "Softsign": ("softsign", 1, FLOAT_TYPES, {}),
    "Gelu": ("gelu", 20, FLOAT_TYPES, {"approximate": ("approximate", "none")}),
    "Erf": ("erf", 9, FLOAT_TYPES, {}),
    "Sqrt": ("sqrt", 1, FLOAT_TYPES, {}),
    "Reciprocal": ("reciprocal", 1, FLOAT_TYPES, {}),
    "Exp": ("exp", 1, FLOAT_TYPES, {}),
    "Log": ("log", 1, FLOAT_TYPES, {}),
    "Floor": ("floor", 1, FLOAT_TYPES, {}),
    "Ceil": ("ceil", 1, FLOAT_TYPES, {}),
    "Round": ("round", 11, FLOAT_TYPES, {}),
    "Sin": ("sin", 7, FLOAT_TYPES, {}),
    "Cos": ("cos", 7, FLOAT_TYPES, {}),
    "Tan": ("tan", 7, FLOAT_TYPES, {}),
    "Asin": ("asin", 7, FLOAT_TYPES, {}),
    "Acos": ("acos", 7, FLOAT_TYPES, {}),
    "Atan": ("atan", 7, FLOAT_TYPES, {}),
    "Sinh": ("sinh", 9, FLOAT_TYPES, {}),
    "Cosh": ("cosh", 9, FLOAT_TYPES, {}),
    "Asinh": ("asinh", 9, FLOAT_TYPES, {}),
    "Acosh": ("acosh", 9, FLOAT_TYPES, {}),
    "Atanh": ("atanh", 9, FLOAT_TYPES, {}),
    "Neg": ("negative", 1, FLOAT_TYPES | {"int8", "int16", "int32", "int64"}, {}),
    "Abs": ("abs", 1, NUMERIC_TYPES, {}),
    "Sign": ("sign", 9, NUMERIC_TYPES, {}),
    "IsNaN": ("isnan", 9, FLOAT_TYPES, {}),
    "IsInf": (
        "isinf",
        10,
        FLOAT_TYPES,
        {"detect_positive": ("detect_positive", 1), "detect_negative": ("detect_negative", 1)},
    ),
}


def _unary_handler(ir_op: str, attr_map: dict[str, tuple[str, object]]) -> HandlerFn:
    def handler(ctx: ConvertContext, node: NodeView) -> Expr:
        attrs = {ir: node.attr(name, default) for name, (ir, default) in attr_map.items()}
        return call(ir_op, arg(ctx, node, 0), name=node.name, **attrs)

    handler.__doc__ = f"ONNX unary op -> IR '{ir_op}'."
    return handler


for _onnx, (_ir, _since, _dtypes, _attrs) in _UNARY.items():
    onnx_op(_onnx, since=_since, dtypes=_dtypes)(_unary_handler(_ir, _attrs))


@onnx_op("ThresholdedRelu", since=10, dtypes=FLOAT_TYPES)
def thresholded_relu(ctx: ConvertContext, node: NodeView) -> Expr:
    """ThresholdedRelu: x where x > alpha else 0."""
    x = arg(ctx, node, 0)
    dtype = ttype(x).dtype
    alpha = scalar_const(node.attr("alpha", 1.0), dtype)
    keep = call("greater", x, alpha)
    return call("where", keep, x, scalar_const(0, dtype), name=node.name)


@onnx_op("Clip", since=1, dtypes=NUMERIC_TYPES)
def clip(ctx: ConvertContext, node: NodeView) -> Expr:
    """Clip: bounds are attributes before opset 11 and optional (scalar) inputs after."""
    x = arg(ctx, node, 0)
    if node.opset < 11:
        lo, hi = node.attr("min", None), node.attr("max", None)
        return call("clip", x, a_min=lo, a_max=hi, name=node.name)
    bounds: list[float | None] = []
    dynamic: list[Expr | None] = []
    for i in (1, 2):
        expr = node.input(i)
        value = ctx.const_value(expr)
        if expr is not None and value is None:
            bounds.append(None)
            dynamic.append(expr)
            continue
        bounds.append(None if value is None else float(np.asarray(value).reshape(-1)[0]))
        dynamic.append(None)
    out = call("clip", x, a_min=bounds[0], a_max=bounds[1], name=node.name)
    if dynamic[0] is not None:
        out = call("maximum", out, dynamic[0])
    if dynamic[1] is not None:
        out = call("minimum", out, dynamic[1])
    return out


@onnx_op("Cast", since=1, dtypes=ALL_TYPES)
def cast(ctx: ConvertContext, node: NodeView) -> Expr:
    """Cast to the ``to`` element type (``saturate`` and ``round_mode`` only affect the
    float8s, see cast_rules)."""
    to = node.attr("to")
    if isinstance(to, str):  # opset 1-5 spelled the type as a string
        dtype = _legacy_dtype(ctx, node, to)
    else:
        dtype = onnx_elem_dtype(int(to), ctx.where(node))
    return _cast(ctx, node, arg(ctx, node, 0), dtype)


def _cast(ctx: ConvertContext, node: NodeView, x: Expr, dtype: str) -> Expr:
    """``x`` cast to ``dtype`` by ONNX's rules, with the node's saturate and round_mode."""
    mode = node.attr("round_mode", "up")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in E8M0_ROUND_MODES:
        ctx.fail(node, f"round_mode {mode!r} is unknown; use one of {E8M0_ROUND_MODES}")
    return onnx_cast(x, dtype, bool(node.attr("saturate", 1)), mode, node.name)


def _legacy_dtype(ctx: ConvertContext, node: NodeView, name: str) -> str:

    try:
        elem = onnx.TensorProto.DataType.Value(name.upper())
    except ValueError:
        ctx.fail(node, f"unknown 'to' type {name!r}")
    return onnx_elem_dtype(elem, ctx.where(node))


@onnx_op("CastLike", since=15, dtypes=ALL_TYPES)
def cast_like(ctx: ConvertContext, node: NodeView) -> Expr:
    """CastLike: cast input 0 to the dtype of input 1."""
    dtype = ttype(arg(ctx, node, 1, "the target_type tensor")).dtype
    return _cast(ctx, node, arg(ctx, node, 0), dtype)


@onnx_op("BitwiseNot", since=18, dtypes=INT_TYPES)
def bitwise_not(ctx: ConvertContext, node: NodeView) -> Expr:
    """Bitwise complement of integers."""
    return call("bitwise_not", arg(ctx, node, 0), name=node.name)


@onnx_op("Not", since=1, dtypes=frozenset({"bool"}))
def not_(ctx: ConvertContext, node: NodeView) -> Expr:
    """Boolean negation."""
    return call("logical_not", arg(ctx, node, 0), name=node.name)


# -- activations composed of several IR ops ------------------------------------------------


@onnx_op("Celu", since=12, dtypes=FLOAT_TYPES)
def celu(ctx: ConvertContext, node: NodeView) -> Expr:
    """Celu: x if x > 0 else alpha * (exp(x / alpha) - 1)."""
    x = arg(ctx, node, 0)
    dtype = ttype(x).dtype
    alpha = scalar_const(float(node.attr("alpha", 1.0)), dtype)
    neg = call(
        "multiply", alpha, call("subtract", call("exp", call("divide", x, alpha)), one(dtype))
    )
    return call("where", call("greater", x, scalar_const(0, dtype)), x, neg, name=node.name)


def one(dtype: str) -> Expr:
    """The scalar 1 of ``dtype``."""
    return scalar_const(1, dtype)


@onnx_op("Mish", since=18, dtypes=FLOAT_TYPES)
def mish(ctx: ConvertContext, node: NodeView) -> Expr:
    """Mish: x * tanh(softplus(x))."""
    x = arg(ctx, node, 0)
    return call("multiply", x, call("tanh", call("softplus", x)), name=node.name)


@onnx_op("Swish", since=24, dtypes=FLOAT_TYPES)
def swish(ctx: ConvertContext, node: NodeView) -> Expr:
    """Swish: x * sigmoid(alpha * x)."""
    x = arg(ctx, node, 0)
    alpha = float(node.attr("alpha", 1.0))
    scaled = x if alpha == 1.0 else call("multiply", x, scalar_const(alpha, ttype(x).dtype))
    return call("multiply", x, call("sigmoid", scaled), name=node.name)


@onnx_op("Shrink", since=9, dtypes=NUMERIC_TYPES)
def shrink(ctx: ConvertContext, node: NodeView) -> Expr:
    """Shrink: x - bias above lambd, x + bias below -lambd, else 0."""
    x = arg(ctx, node, 0)
    dtype = ttype(x).dtype
    lambd = float(node.attr("lambd", 0.5))
    bias = scalar_const(float(node.attr("bias", 0.0)), dtype)
    zero = scalar_const(0, dtype)
    if dtype in FLOAT_TYPES:
        hi, lo = scalar_const(lambd, dtype), scalar_const(-lambd, dtype)
        above, below = call("greater", x, hi), call("less", x, lo)
    else:  # integers compare exactly with the real threshold
        above = call("greater", x, scalar_const(math.floor(lambd), dtype))
        below = call("less", x, scalar_const(math.ceil(-lambd), dtype))
    inner = call("where", below, call("add", x, bias), zero)
    return call("where", above, call("subtract", x, bias), inner, name=node.name)
