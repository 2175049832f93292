"""The int8 kernel of dynamically quantized matrix products (part of fuse_qdq).

``onnxruntime.quantization.quantize_dynamic`` writes ``MatMulInteger(x_q, W_q, x_zp,
W_zp)`` after a ``DynamicQuantizeLinear`` of the activation: the data's zero point is a
run-time tensor, the int32 product is cast to float and scaled after it. The importer
makes that ``nn.matmul(int32(x_q) - int32(x_zp), int32(W_q) - int32(W_zp))``; with a
constant 2-D weight whose ``vpmaddubsw`` pair sums cannot saturate (the 7-bit weights of
``reduce_range``), this becomes ``quantized_matmul_integer_int8`` (the dense int8 tiles,
int32 out, exact); an ungrouped 2-D ``nn.conv`` of that form (ConvInteger) becomes
``quantized_conv_integer_int8`` (the convolution's driver, int32 out)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.ir.expr import Call, Constant, Expr, call
from ember.ir.op import OpDef
from ember.transform.qdq_int8 import (
    GROUP_MIN_CHANNELS,
    channel_groups,
    fits_maddubs,
    pack_conv_rows,
    pack_dense_panels,
)

_8BIT = ("int8", "uint8")


def _op(node: Expr) -> str:
    return node.op.name if isinstance(node, Call) and isinstance(node.op, OpDef) else ""


def _int_value(expr: Expr) -> np.ndarray | None:
    """The int64 value of a constant under reshapes, casts to int32 and subtractions."""
    if isinstance(expr, Constant):
        data = np.asarray(expr.data)
        return data.astype(np.int64) if np.issubdtype(data.dtype, np.integer) else None
    op = _op(expr)
    args = expr.args if isinstance(expr, Call) else ()
    if op == "reshape":
        inner = _int_value(args[0])
        return None if inner is None else inner.reshape(expr.tensor_type.shape)
    if op == "cast" and expr.tensor_type.dtype == "int32":
        return _int_value(args[0])
    if op == "subtract":
        a, b = _int_value(args[0]), _int_value(args[1])
        return None if a is None or b is None else a - b
    return None


def _data(expr: Expr) -> tuple[Expr, Expr] | None:
    """(8-bit data, its 8-bit scalar zero point) of ``int32(x) - int32(zp)``, both computed
    at run time, else None."""
    zp: Expr | None = None
    if _op(expr) == "subtract":
        expr, z = expr.args  # type: ignore[attr-defined]
        if _op(z) != "cast":
            return None
        zp = z.args[0]  # type: ignore[attr-defined]
        while _op(zp) == "reshape":
            zp = zp.args[0]  # type: ignore[attr-defined,union-attr]
    if _op(expr) != "cast":
        return None
    x = expr.args[0]  # type: ignore[attr-defined]
    dtype = x.tensor_type.dtype
    if dtype not in _8BIT:
        return None
    # the kernel reads both from memory: a constant (inlined by the lowering as a value)
    # cannot be its argument; constant data folds anyway, a constant zero point stays int32
    if zp is None or isinstance(zp, Constant) or isinstance(x, Constant):
        return None
    zt = zp.tensor_type
    if zt.dtype != dtype or zt.size != 1:
        return None
    return x, zp


def matmul_integer_int8(mm: Call) -> Expr | None:
    """``quantized_matmul_integer_int8`` for an int32 ``nn.matmul`` of 8-bit data (minus a
    scalar zero point) by a constant 2-D integer weight, or None."""
    if _op(mm) != "nn.matmul" or mm.tensor_type.dtype != "int32":
        return None
    data = _data(mm.args[0])
    w = _int_value(mm.args[1])
    if data is None or w is None or w.ndim != 2 or mm.args[0].tensor_type.ndim < 1:
        return None
    if w.min(initial=0) < -128 or w.max(initial=0) > 127 or not fits_maddubs(w.T):
        return None
    x, zp = data
    n = w.shape[1]
    colsum = np.zeros((n + 15) // 16 * 16, np.int32)
    colsum[:n] = w.sum(axis=0)
    flip = x.tensor_type.dtype == "int8"
    panels = Constant(pack_dense_panels(w))
    return call(
        "quantized_matmul_integer_int8", x, zp, panels, Constant(colsum), units=n, flip=flip,
        name=mm.name,
    )  # fmt: skip


def conv_integer_int8(conv: Call) -> Expr | None:
    """``quantized_conv_integer_int8`` for an int32 2-D ``nn.conv`` of 8-bit data (minus a
    scalar zero point) by a constant integer weight, or None; a grouped one (groups of 16
    or more input channels) as one such call a group, on its slice of the channels."""
    if _op(conv) != "nn.conv" or conv.tensor_type.dtype != "int32":
        return None
    if conv.tensor_type.ndim != 4:
        return None
    data = _data(conv.args[0])
    w = _int_value(conv.args[1])
    if data is None or w is None or w.ndim != 4:
        return None
    if w.min(initial=0) < -128 or w.max(initial=0) > 127:
        return None
    x, zp = data
    attrs = {k: conv.attrs[k] for k in ("strides", "padding", "dilation")}
    groups = int(conv.attrs["groups"])
    if groups == 1:
        return _conv_integer_call(x, zp, w, attrs, conv.name)
    if w.shape[1] < GROUP_MIN_CHANNELS:
        return None
    per_out = w.shape[0] // groups
    parts = []
    for g, part in enumerate(channel_groups(x, groups)):
        out = _conv_integer_call(part, zp, w[g * per_out : (g + 1) * per_out], attrs,
                                 f"{conv.name}_g{g}")  # fmt: skip
        if out is None:
            return None
        parts.append(out)
    return call("concatenate", *parts, axis=1)


def _conv_integer_call(
    x: Expr, zp: Expr, w: np.ndarray, attrs: dict[str, Any], name: str
) -> Expr | None:
    rows = pack_conv_rows(w) if fits_maddubs(w.reshape(w.shape[0], -1)) else None
    if rows is None:
        return None
    m = w.shape[0]
    return call(
        "quantized_conv_integer_int8", x, zp, Constant(rows),
        Constant(w.reshape(m, -1).sum(axis=1).astype(np.int32)),
        flip=x.tensor_type.dtype == "int8", kernel=tuple(int(d) for d in w.shape[2:]),
        channels=m, name=name, **attrs,
    )  # fmt: skip
