"""ONNX handlers for comparisons, boolean logic and selection: Equal Less Greater
LessOrEqual GreaterOrEqual Not And Or Xor Where (all broadcasting, opset 7 on)."""

from __future__ import annotations

from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.elemwise import arg
from ember.frontend.onnx.registry import ALL_TYPES, NUMERIC_TYPES, HandlerFn, onnx_op
from ember.ir.expr import Expr, call

#: ONNX op -> (IR op, first opset, input dtypes).
_BINARY: dict[str, tuple[str, int, frozenset[str]]] = {
    "Equal": ("equal", 7, ALL_TYPES),
    "Less": ("less", 7, NUMERIC_TYPES),
    "Greater": ("greater", 7, NUMERIC_TYPES),
    "LessOrEqual": ("less_equal", 12, NUMERIC_TYPES),
    "GreaterOrEqual": ("greater_equal", 12, NUMERIC_TYPES),
    "And": ("logical_and", 7, frozenset({"bool"})),
    "Or": ("logical_or", 7, frozenset({"bool"})),
    "Xor": ("logical_xor", 7, frozenset({"bool"})),
}


def _binary_handler(ir_op: str) -> HandlerFn:
    def handler(ctx: ConvertContext, node: NodeView) -> Expr:
        return call(ir_op, arg(ctx, node, 0), arg(ctx, node, 1), name=node.name)

    handler.__doc__ = f"ONNX comparison/logic op -> IR '{ir_op}' (bool result)."
    return handler


for _onnx, (_ir, _since, _dtypes) in _BINARY.items():
    onnx_op(_onnx, since=_since, dtypes=_dtypes)(_binary_handler(_ir))


@onnx_op("Not", since=1, dtypes=frozenset({"bool"}))
def not_(ctx: ConvertContext, node: NodeView) -> Expr:
    """Boolean negation."""
    return call("logical_not", arg(ctx, node, 0), name=node.name)


@onnx_op("Where", since=9)
def where(ctx: ConvertContext, node: NodeView) -> Expr:
    """Where(cond, x, y): x where cond else y, all three broadcast."""
    return call("where", arg(ctx, node, 0), arg(ctx, node, 1), arg(ctx, node, 2), name=node.name)
