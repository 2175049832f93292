"""ONNX handlers of the binary family: broadcasting arithmetic (Add Sub Mul Div Pow Mod
PRelu), bitwise ops and shifts, the variadic Sum Mean Max Min, comparisons, boolean logic
and Where.

They use the opset-7 multidirectional broadcasting; the legacy ``broadcast``/``axis``
attributes of opsets 1-6 are not supported (handlers start at 7)."""

from __future__ import annotations

from ember.frontend.onnx.common import arg, scalar_const, ttype
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import (
    ALL_TYPES,
    FLOAT_TYPES,
    INT_TYPES,
    NUMERIC_TYPES,
    HandlerFn,
    onnx_op,
)
from ember.ir.expr import Expr, call

#: ONNX op -> (IR op, first opset, input dtypes).
_COMPARE: dict[str, tuple[str, int, frozenset[str]]] = {
    "Equal": ("equal", 7, ALL_TYPES | {"string"}),  # strings: string_equal (strings.py)
    "Less": ("less", 7, NUMERIC_TYPES),
    "Greater": ("greater", 7, NUMERIC_TYPES),
    "LessOrEqual": ("less_equal", 12, NUMERIC_TYPES),
    "GreaterOrEqual": ("greater_equal", 12, NUMERIC_TYPES),
    "And": ("logical_and", 7, frozenset({"bool"})),
    "Or": ("logical_or", 7, frozenset({"bool"})),
    "Xor": ("logical_xor", 7, frozenset({"bool"})),
}


def _compare_handler(ir_op: str) -> HandlerFn:
    def handler(ctx: ConvertContext, node: NodeView) -> Expr:
        lhs, rhs = arg(ctx, node, 0), arg(ctx, node, 1)
        if ir_op == "equal" and ttype(lhs).dtype == "string":
            return call("string_equal", lhs, rhs, name=node.name)
        return call(ir_op, lhs, rhs, name=node.name)

    handler.__doc__ = f"ONNX comparison/logic op -> IR '{ir_op}' (bool result)."
    return handler


for _onnx, (_ir, _since, _dtypes) in _COMPARE.items():
    onnx_op(_onnx, since=_since, dtypes=_dtypes)(_compare_handler(_ir))


@onnx_op("Where", since=9)
def where(ctx: ConvertContext, node: NodeView) -> Expr:
    """Where(cond, x, y): x where cond else y, all three broadcast."""
    return call("where", arg(ctx, node, 0), arg(ctx, node, 1), arg(ctx, node, 2), name=node.name)


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
