"""Widen float16/bfloat16 anchors: run heavy ops in float32 between casts.

Convolutions, matmuls, pools, normalizations, softmax, resize and einsum accumulate many
products; their computes take float32 (``ops.nn_common.check_dtype`` refuses the 16-bit
floats). ``widen_half`` rewrites such a call on float16/bfloat16 tensors into the same
call on float32 tensors, with its half inputs cast up (constants converted at compile
time, exactly) and its outputs rounded back to the narrow type once. This is what
onnxruntime's CPU provider does for float16 nodes it has no kernel for, so results agree
with it up to float32 summation order. ``nn.softmax`` is not widened: its compute rounds
each step to the narrow type as onnx's reference does (``ops/narrow_softmax.py``).
Elementwise ops need no rewrite: they compute in float32 per element already
(``ops.elemwise.compute_dtype``).

Example::

    nn.conv(x: float16, w: float16)
      -> cast(nn.conv(cast(x, float32), const(w as float32)), float16)
"""

from __future__ import annotations

import numpy as np

from ember.ir.expr import Call, Constant, Expr, Tuple, TupleGetItem, call, const, rewrite
from ember.ir.op import OpDef
from ember.ir.types import TensorType, TupleType
from ember.support.dtypes import is_half

#: the ops whose computes accumulate and take float32 only.
WIDENED_OPS: frozenset[str] = frozenset(
    {
        "einsum",
        "image.resize",
        "nn.avg_pool",
        "nn.batch_norm",
        "nn.conv",
        "nn.conv_depthwise_packed",
        "nn.conv_packed",
        "nn.conv_transpose",
        "nn.dense",
        "nn.global_avg_pool",
        "nn.global_max_pool",
        "nn.group_norm",
        "nn.instance_norm",
        "nn.layer_norm",
        "nn.log_softmax",
        "nn.lp_pool",
        "nn.lrn",
        "nn.matmul",
        "nn.max_pool",
        "nn.max_pool_argmax",
    }
)

WIDE = "float32"


def _half_dtype(e: Expr) -> str | None:
    ty = e.type
    return ty.dtype if isinstance(ty, TensorType) and is_half(ty.dtype) else None


def _widen_arg(e: Expr) -> Expr:
    if _half_dtype(e) is None:
        return e
    if isinstance(e, Constant):
        return const(np.asarray(e.data).astype(np.float32))
    return call("cast", e, dtype=WIDE)


def _narrow(e: Expr, dtype: str, name: str) -> Expr:
    ty = e.type
    if isinstance(ty, TupleType):
        fields = [_narrow(TupleGetItem(e, i), dtype, name) for i in range(len(ty.fields))]
        return Tuple(tuple(fields))
    if isinstance(ty, TensorType) and ty.dtype == WIDE:
        return call("cast", e, dtype=dtype, name=name)
    return e


def _rule(node: Expr, _new: object) -> Expr | None:
    if not isinstance(node, Call) or not isinstance(node.op, OpDef):
        return None
    if node.op.name not in WIDENED_OPS:
        return None
    halves = {d for d in map(_half_dtype, node.args) if d is not None}
    if len(halves) != 1:
        return None
    (dtype,) = halves
    wide = Call(node.op, tuple(_widen_arg(a) for a in node.args), node.attrs, name=node.name)
    return _narrow(wide, dtype, node.name)


def widen_half(body: Expr) -> Expr:
    """``body`` with every float16/bfloat16 call of WIDENED_OPS computed in float32."""
    return rewrite(body, _rule)
