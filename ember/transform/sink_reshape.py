"""sink_reshape: IRModule -> IRModule, reshapes moved after the elementwise ops that read them.

The legalizer computes a linear layer over an N-d activation as one 2-D product reshaped
back (``reshape(matmul(reshape(x), W))``, ember.ops.nn_conv.matmul_rows). The reshape
stops fusion (a product takes an elementwise epilogue only), so the bias add and the GELU
after it ran as a pass of their own over the product. This pass rewrites

    f(reshape(m), c)  ->  reshape(f(m, c'))

for an elementwise or broadcasting ``f`` when the reshape keeps the last axis (other
readers of the reshape still read it; ``f`` reads ``m`` itself), the other operands being
scalars, constants that vary along the last axis only (``c'`` drops their leading unit
axes), or tensors of the result's shape (read through a reshape of their own, which fuses
as index arithmetic). It repeats along the chain, so the epilogue joins the product's
group; a LayerNormalization over the last axis alone is row-wise and takes the reshape
through too (else the reshape would be a copy before it); ``reshape(reshape(x))`` becomes
one reshape, or none when it restores x's shape (the next layer's lhs), so a transformer's
residual stream stays 2-D from layer to layer. The values are unchanged: the ops are
elementwise or row-wise, the reshapes keep the element order.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ember.ir.expr import Call, Constant, Expr, call
from ember.ir.module import IRModule
from ember.ir.op import OpDef, OpPattern
from ember.ir.types import TensorType
from ember.transform._util import map_bodies, rewrite_graph
from ember.transform.simplify import fold_reshape

__all__ = ["sink_reshape"]


def sink_reshape(mod: IRModule) -> IRModule:
    """Every function body with its last-axis-keeping reshapes sunk (see the module doc)."""
    return map_bodies(mod, _sink_body)


def _sink_body(body: Expr) -> Expr:
    def rule(_old: Expr, node: Expr, _new: Mapping[int, Expr]) -> Expr | None:
        if not isinstance(node, Call):
            return None
        op = node.op
        if not isinstance(op, OpDef):
            return None
        if op.name == "reshape":
            return fold_reshape(node)
        if op.name == "nn.layer_norm":
            return _layer_norm(node)
        if op.pattern not in (OpPattern.ELEMWISE, OpPattern.BROADCAST) or "axis" in op.attrs:
            return None
        for arg in node.args:
            if _keeps_last(arg, node):
                assert isinstance(arg, Call)
                return _sunk(node, arg.args[0])
        return None

    return rewrite_graph(body, rule)


def _keeps_last(arg: Expr, node: Call) -> bool:
    """Whether ``arg`` is a reshape to ``node``'s shape that keeps the last axis."""
    if not isinstance(arg, Call) or not isinstance(arg.op, OpDef) or arg.op.name != "reshape":
        return False
    base, ty, out = arg.args[0].type, arg.type, node.type
    if not isinstance(base, TensorType) or not isinstance(ty, TensorType):
        return False
    if not isinstance(out, TensorType) or ty.shape != out.shape or not base.shape or not ty.shape:
        return False
    return base.shape[-1] == ty.shape[-1] and base.ndim < ty.ndim


def _sunk(node: Call, base: Expr) -> Expr | None:
    """``node`` on ``base`` (the reshape's input) and its other operands, reshaped back."""
    out, bty = node.type, base.type
    assert isinstance(out, TensorType) and isinstance(bty, TensorType)
    shape = bty.shape
    args: list[Expr] = []
    for arg in node.args:
        ty = arg.type
        if not isinstance(ty, TensorType):
            return None
        if _keeps_last(arg, node) and arg.args[0].type.shape == shape:  # type: ignore[attr-defined]
            args.append(arg.args[0])  # type: ignore[attr-defined]
        elif isinstance(arg, Constant):
            data = np.asarray(arg.data)
            if data.size == 1:
                args.append(Constant(data.reshape(())))
            elif data.ndim >= 1 and data.size == data.shape[-1] and data.shape[-1] == out.shape[-1]:
                args.append(Constant(data.reshape(data.shape[-1:])))
            else:
                return None
        elif ty.ndim == 0:
            args.append(arg)
        elif ty.shape == out.shape:
            args.append(call("reshape", arg, newshape=shape))
        else:
            return None
    value = call(node.op.name, *args, name=node.name, **dict(node.attrs))  # type: ignore[union-attr]
    return call("reshape", value, newshape=out.shape)


def _layer_norm(node: Call) -> Expr | None:
    """``layer_norm(reshape(m))`` over the last axis alone, its scale and shift vectors:
    ``reshape(layer_norm(m))`` (rows are rows whatever their leading shape)."""
    x, *rest = node.args
    out = node.type
    if not isinstance(out, TensorType) or not _keeps_last(x, node):
        return None
    if int(node.attrs["axis"]) % out.ndim != out.ndim - 1:
        return None
    if any(not isinstance(r.type, TensorType) or r.type.ndim != 1 for r in rest):
        return None
    assert isinstance(x, Call)
    attrs = {**dict(node.attrs), "axis": -1}
    value = call("nn.layer_norm", x.args[0], *rest, name=node.name, **attrs)
    return call("reshape", value, newshape=out.shape)
