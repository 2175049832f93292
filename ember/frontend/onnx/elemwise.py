"""ONNX handlers for elementwise math: activations, unary functions, Clip, Cast, CastLike,
broadcasting arithmetic (Add Sub Mul Div Pow PRelu) and the variadic Sum Mean Max Min.

Binary arithmetic uses the opset-7 multidirectional broadcasting; the legacy
``broadcast``/``axis`` attributes of opsets 1-6 are not supported (handlers start at 7).
"""

from __future__ import annotations

import numpy as np

from ember.frontend.onnx.context import ConvertContext, NodeView, onnx_elem_dtype
from ember.frontend.onnx.registry import (
    ALL_TYPES,
    FLOAT_TYPES,
    INT_TYPES,
    NUMERIC_TYPES,
    HandlerFn,
    onnx_op,
)
from ember.ir.expr import Constant, Expr, call
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
    from ember.ir.ops.common import np_dtype

    return Constant(np.asarray(value).astype(np_dtype(dtype)))


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
    """Cast to the ``to`` element type (opset 19's ``saturate`` only affects float8)."""
    to = node.attr("to")
    if isinstance(to, str):  # opset 1-5 spelled the type as a string
        dtype = _legacy_dtype(ctx, node, to)
    else:
        dtype = onnx_elem_dtype(int(to), ctx.where(node))
    x = arg(ctx, node, 0)
    if ttype(x).dtype == dtype:
        return x
    return call("cast", x, dtype=dtype, name=node.name)


def _legacy_dtype(ctx: ConvertContext, node: NodeView, name: str) -> str:
    import onnx

    try:
        elem = onnx.TensorProto.DataType.Value(name.upper())
    except ValueError:
        ctx.fail(node, f"unknown 'to' type {name!r}")
    return onnx_elem_dtype(elem, ctx.where(node))


@onnx_op("CastLike", since=15, dtypes=ALL_TYPES)
def cast_like(ctx: ConvertContext, node: NodeView) -> Expr:
    """CastLike: cast input 0 to the dtype of input 1."""
    x = arg(ctx, node, 0)
    dtype = ttype(arg(ctx, node, 1, "the target_type tensor")).dtype
    if ttype(x).dtype == dtype:
        return x
    return call("cast", x, dtype=dtype, name=node.name)


# -- binary and variadic ops ----------------------------------------------------------------

_BINARY: dict[str, str] = {
    "Add": "add",
    "Sub": "subtract",
    "Mul": "multiply",
    "Div": "divide",
    "Pow": "power",
}

_BITWISE: dict[str, str] = {
    "BitwiseAnd": "bitwise_and",
    "BitwiseOr": "bitwise_or",
    "BitwiseXor": "bitwise_xor",
}


def _binary_handler(ir_op: str) -> HandlerFn:
    def handler(ctx: ConvertContext, node: NodeView) -> Expr:
        if node.has_attr("broadcast") and node.attr("broadcast"):
            ctx.fail(node, "the legacy 'broadcast' attribute (opset < 7) is not supported")
        return call(ir_op, arg(ctx, node, 0), arg(ctx, node, 1), name=node.name)

    handler.__doc__ = f"ONNX broadcasting binary op -> IR '{ir_op}'."
    return handler


for _onnx, _ir in _BINARY.items():
    onnx_op(_onnx, since=7, dtypes=NUMERIC_TYPES)(_binary_handler(_ir))


for _onnx, _ir in _BITWISE.items():
    onnx_op(_onnx, since=18, dtypes=INT_TYPES)(_binary_handler(_ir))


@onnx_op("BitwiseNot", since=18, dtypes=INT_TYPES)
def bitwise_not(ctx: ConvertContext, node: NodeView) -> Expr:
    """Bitwise complement of integers."""
    return call("bitwise_not", arg(ctx, node, 0), name=node.name)


@onnx_op("BitShift", since=11, dtypes=INT_TYPES)
def bit_shift(ctx: ConvertContext, node: NodeView) -> Expr:
    """BitShift of unsigned integers, ``direction`` LEFT or RIGHT."""
    direction = str(node.attr("direction"))
    if direction not in ("LEFT", "RIGHT"):
        ctx.fail(node, f"direction must be LEFT or RIGHT, got {direction!r}")
    op = "left_shift" if direction == "LEFT" else "right_shift"
    return call(op, arg(ctx, node, 0), arg(ctx, node, 1), name=node.name)


@onnx_op("Mod", since=10, dtypes=NUMERIC_TYPES)
def mod(ctx: ConvertContext, node: NodeView) -> Expr:
    """Mod: remainder with the divisor's sign, or C fmod (dividend's sign) when fmod=1."""
    fmod = bool(node.attr("fmod", 0))
    return call("mod", arg(ctx, node, 0), arg(ctx, node, 1), fmod=fmod, name=node.name)


@onnx_op("PRelu", since=7, dtypes=FLOAT_TYPES | {"int32", "int64", "uint32", "uint64"})
def prelu(ctx: ConvertContext, node: NodeView) -> Expr:
    """PRelu: the slope broadcasts to the data (unidirectionally)."""
    return call("prelu", arg(ctx, node, 0), arg(ctx, node, 1), name=node.name)


def _variadic(ir_op: str, ctx: ConvertContext, node: NodeView) -> Expr:
    """A left fold of the binary ``ir_op`` over all inputs."""
    inputs = [arg(ctx, node, i) for i in range(len(node.inputs))]
    if not inputs:
        ctx.fail(node, "needs at least one input")
    out = inputs[0]
    for i, nxt in enumerate(inputs[1:]):
        last = i == len(inputs) - 2
        out = call(ir_op, out, nxt, name=node.name if last else "")
    return out


@onnx_op("Sum", since=6, dtypes=NUMERIC_TYPES)
def sum_(ctx: ConvertContext, node: NodeView) -> Expr:
    """Sum of all inputs (broadcasting)."""
    return _variadic("add", ctx, node)


@onnx_op("Max", since=6, dtypes=NUMERIC_TYPES)
def max_(ctx: ConvertContext, node: NodeView) -> Expr:
    """Elementwise maximum of all inputs (broadcasting)."""
    return _variadic("maximum", ctx, node)


@onnx_op("Min", since=6, dtypes=NUMERIC_TYPES)
def min_(ctx: ConvertContext, node: NodeView) -> Expr:
    """Elementwise minimum of all inputs (broadcasting)."""
    return _variadic("minimum", ctx, node)


@onnx_op("Mean", since=6, dtypes=FLOAT_TYPES)
def mean(ctx: ConvertContext, node: NodeView) -> Expr:
    """Mean of all inputs: their sum divided by the input count."""
    total = _variadic("add", ctx, node)
    count = scalar_const(len(node.inputs), ttype(total).dtype)
    return call("divide", total, count, name=node.name)
