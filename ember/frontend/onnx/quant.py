"""ONNX handlers for linear quantization: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, ConvInteger, MatMulInteger, QLinearConv and QLinearMatMul.

Scales and zero points (per tensor, per axis, or blocked along one axis) are shaped to
broadcast against the data: per-axis ones to ``(C, 1, ...)``, blocked ones expanded along
their axis with a ``take`` of ``i // block_size``. The integer ops compute in int32 exactly
as the spec: ``conv``/``matmul`` of ``int32(x) - x_zero_point`` and ``int32(w) -
w_zero_point``; QLinearConv/QLinearMatMul requantize the accumulator like onnxruntime,
``quantize(float32(acc) * (s_x * s_w / s_y), 1, y_zero_point)``.

The 2- and 4-bit integer forms are the same ``quantize``/``dequantize`` (stored one element
per byte). The float forms (the four float8s and float4_e2m1fn) round to the type, not to
integers, so they are casts, as onnx's reference computes them: QuantizeLinear is
``x / scale`` (float4: plus the zero point) cast into the type, saturating by default
(``saturate``), DequantizeLinear ``float32(x) * scale``; a float8 zero point must be zero
and a float4 one is ignored, as in onnx's reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.frontend.onnx.cast_rules import SATURATING, onnx_cast
from ember.frontend.onnx.common import standard_op
from ember.frontend.onnx.context import ConvertContext, NodeView, onnx_elem_dtype
from ember.frontend.onnx.nn_common import (
    required,
    reshape,
    resolve_pads,
    spatial_attr,
    ttype,
    unsupported,
)
from ember.frontend.onnx.registry import onnx_op
from ember.ir.expr import Constant, Expr, call
from ember.ir.ops.quant import DEQUANT_DTYPES, QUANTIZE_DTYPES
from ember.ir.types import TensorType

#: the float types QuantizeLinear/DequantizeLinear convert by casting.
FLOAT_QUANT_DTYPES: frozenset[str] = SATURATING | {"float4_e2m1fn"}


def _shaped(
    ctx: ConvertContext, node: NodeView, p: Expr, xt: TensorType, axis: int, block: int
) -> Expr:
    """A scale or zero point ``p`` shaped to broadcast against data of type ``xt``."""
    pt = ttype(ctx, node, p)
    if pt.size == 1 and (pt.ndim <= 1 or block == 0):
        return reshape(ctx, p, ())
    axis = axis + xt.ndim if axis < 0 else axis
    if not 0 <= axis < xt.ndim:
        ctx.fail(node, f"axis {axis} is out of range for an input of rank {xt.ndim}")
    if block > 0:
        if pt.ndim != xt.ndim:
            ctx.fail(node, f"blocked scale of rank {pt.ndim} must have the input's rank")
        index = np.arange(xt.shape[axis], dtype=np.int64) // block
        if isinstance(p, Constant):
            return Constant(np.take(p.data, index, axis=axis))
        return call("take", p, Constant(index), axis=axis)
    if pt.ndim != 1 or pt.shape[0] != xt.shape[axis]:
        ctx.fail(
            node,
            f"per-axis scale/zero point of shape {pt.shape} must have {xt.shape[axis]} "
            f"values (the size of axis {axis})",
        )
    return reshape(ctx, p, (pt.shape[0],) + (1,) * (xt.ndim - axis - 1))


def zero_const(dtype: str) -> Constant:
    """A rank-0 zero of ``dtype`` (an omitted zero point)."""
    return Constant(np.zeros((), dtype=dtype))


def _check_dtype(ctx: ConvertContext, node: NodeView, dtype: str, allowed: frozenset[str]) -> None:
    if dtype not in allowed:
        raise unsupported(ctx, node, f"quantized type {dtype}")


@onnx_op("QuantizeLinear", since=10)
def quantize_linear(ctx: ConvertContext, node: NodeView) -> Expr:
    """QuantizeLinear: per tensor, per axis (13+) and blocked (21+); saturating."""
    x = required(ctx, node, 0, "x")
    scale = required(ctx, node, 1, "y_scale")
    zp = node.input(2)
    xt = ttype(ctx, node, x)
    if zp is not None:
        dtype = ttype(ctx, node, zp).dtype
    elif node.attr("output_dtype", 0):
        dtype = onnx_elem_dtype(int(node.attr("output_dtype")), ctx.where(node))
    else:
        dtype = "uint8"
    axis, block = int(node.attr("axis", 1)), int(node.attr("block_size", 0))
    s = _shaped(ctx, node, scale, xt, axis, block)
    if dtype in FLOAT_QUANT_DTYPES:
        v = _float_divide(x, s)
        if zp is not None and dtype == "float4_e2m1fn":
            v = call("add", v, call("cast", _shaped(ctx, node, zp, xt, axis, block), dtype=_dt(v)))
        elif zp is not None:
            _check_zero(ctx, node, zp)
        return onnx_cast(v, dtype, bool(node.attr("saturate", 1)), name=node.name)
    _check_dtype(ctx, node, dtype, QUANTIZE_DTYPES)
    zp = zero_const(dtype) if zp is None else zp
    z = _shaped(ctx, node, zp, xt, axis, block)
    return call("quantize", x, s, z, dtype=dtype, name=node.name)


def _dt(x: Expr) -> str:
    return x.tensor_type.dtype


def _float_divide(x: Expr, s: Expr) -> Expr:
    """x / scale in their common float type (float32 when they differ), as numpy does."""
    if _dt(x) != _dt(s):
        x, s = as_f32(x), as_f32(s)
    return call("divide", x, s)


def _check_zero(ctx: ConvertContext, node: NodeView, zp: Expr) -> None:
    """A float8 zero point must be zero (onnx's reference refuses others)."""
    value = ctx.const_value(zp)
    if value is not None and np.any(np.asarray(value, np.float32) != 0):
        ctx.fail(node, "a float8 zero point must be 0; fold it into the data or drop it")


@onnx_op("DequantizeLinear", since=10)
def dequantize_linear(ctx: ConvertContext, node: NodeView) -> Expr:
    """DequantizeLinear: per tensor, per axis (13+) and blocked (21+)."""
    x = required(ctx, node, 0, "x")
    scale = required(ctx, node, 1, "x_scale")
    xt = ttype(ctx, node, x)
    zp = node.input(2)
    axis, block = int(node.attr("axis", 1)), int(node.attr("block_size", 0))
    s = _shaped(ctx, node, scale, xt, axis, block)
    if xt.dtype in FLOAT_QUANT_DTYPES:  # float32(x) * scale (float4: the zero point ignored)
        if zp is not None and xt.dtype != "float4_e2m1fn":
            _check_zero(ctx, node, zp)
        y = call("multiply", as_f32(x), as_f32(s))
        if _dt(s) != "float32":
            y = call("cast", y, dtype=_dt(s), name=node.name)
    else:
        _check_dtype(ctx, node, xt.dtype, DEQUANT_DTYPES)
        zp = zero_const(xt.dtype) if zp is None else zp
        z = _shaped(ctx, node, zp, xt, axis, block)
        y = call("dequantize", x, s, z, name=node.name)
    out = node.attr("output_dtype", 0)
    if out and onnx_elem_dtype(int(out), ctx.where(node)) != y.tensor_type.dtype:
        y = call("cast", y, dtype=onnx_elem_dtype(int(out), ctx.where(node)))
    return y


@onnx_op("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx: ConvertContext, node: NodeView) -> list[Expr]:
    """DynamicQuantizeLinear: uint8 with scale (max(x, 0) - min(x, 0)) / 255."""
    x = required(ctx, node, 0, "x")
    xt = ttype(ctx, node, x)
    axes = list(range(xt.ndim))
    zero = Constant(np.zeros((), np.float32))
    hi = call("maximum", call("max", x, axes=axes), zero)
    lo = call("minimum", call("min", x, axes=axes), zero)
    scale = call("divide", call("subtract", hi, lo), Constant(np.asarray(255.0, np.float32)))
    zp = call("quantize", call("negative", lo), scale, zero_const("uint8"), dtype="uint8")
    y = call("quantize", x, scale, zp, dtype="uint8", name=node.name)
    return [y, scale, zp]


def int32_shifted(
    ctx: ConvertContext, node: NodeView, x: Expr, zp: Expr | None, shape: tuple
) -> Expr:
    """int32(x) - zero_point, the zero point reshaped to ``shape`` (or () if scalar)."""
    xi = call("cast", x, dtype="int32")
    if zp is None:
        return xi
    zt = ttype(ctx, node, zp)
    z = reshape(ctx, zp, () if zt.size == 1 else shape)
    return call("subtract", xi, call("cast", z, dtype="int32"))


def _conv_integer(ctx: ConvertContext, node: NodeView, idx: tuple[int, int, int, int]) -> Expr:
    """int32 convolution of (x - x_zp) and (w - w_zp); inputs at indices ``idx``."""
    x = required(ctx, node, idx[0], "x")
    w = required(ctx, node, idx[2], "w")
    xt, wt = ttype(ctx, node, x), ttype(ctx, node, w)
    nsp = xt.ndim - 2
    kernel = list(wt.shape[2:])
    strides = spatial_attr(ctx, node, "strides", nsp, 1)
    dilations = spatial_attr(ctx, node, "dilations", nsp, 1)
    pads = resolve_pads(ctx, node, xt.shape[2:], kernel, strides, dilations)
    xz = node.input(idx[1])
    if xz is not None and ttype(ctx, node, xz).size != 1:
        raise unsupported(ctx, node, "a per-channel input zero point")
    xi = int32_shifted(ctx, node, x, xz, ())
    wi = int32_shifted(ctx, node, w, node.input(idx[3]), (wt.shape[0],) + (1,) * (wt.ndim - 1))
    return call(
        "nn.conv",
        xi,
        wi,
        strides=strides,
        padding=pads,
        dilation=dilations,
        groups=node.attr("group", 1),
        name=node.name,
    )


def _matmul_integer(ctx: ConvertContext, node: NodeView, idx: tuple[int, int, int, int]) -> Expr:
    """int32 matmul of (a - a_zp) and (b - b_zp) (a_zp per row, b_zp per column)."""
    a = required(ctx, node, idx[0], "A")
    b = required(ctx, node, idx[2], "B")
    at, bt = ttype(ctx, node, a), ttype(ctx, node, b)
    ai = int32_shifted(ctx, node, a, node.input(idx[1]), (at.shape[-2], 1) if at.ndim > 1 else ())
    bi = int32_shifted(ctx, node, b, node.input(idx[3]), (bt.shape[-1],))
    return call("nn.matmul", ai, bi, name=node.name)


@onnx_op("ConvInteger", since=10)
def conv_integer(ctx: ConvertContext, node: NodeView) -> Expr:
    """ConvInteger: int32 output."""
    return _conv_integer(ctx, node, (0, 2, 1, 3))


@onnx_op("MatMulInteger", since=10)
def matmul_integer(ctx: ConvertContext, node: NodeView) -> Expr:
    """MatMulInteger: int32 output."""
    return _matmul_integer(ctx, node, (0, 2, 1, 3))


def as_f32(x: Expr) -> Expr:
    """``x`` as float32 (a cast unless it is one already)."""
    return x if x.tensor_type.dtype == "float32" else call("cast", x, dtype="float32")


def requantize(acc: Expr, multiplier: Expr, zp: Expr, dtype: str, name: str = "") -> Expr:
    """quantize(float32(acc) * multiplier, 1, zp): onnxruntime's requantization."""
    scaled = call("multiply", call("cast", acc, dtype="float32"), multiplier)
    one = Constant(np.ones((), np.float32))
    return call("quantize", scaled, one, zp, dtype=dtype, name=name)


def _multiplier(
    ctx: ConvertContext, node: NodeView, sx: Expr, sw: Expr, sy: Expr, shape: tuple
) -> Expr:
    """s_x * s_w / s_y in float32, s_w reshaped to ``shape`` when it has several values."""
    swt = ttype(ctx, node, sw)
    sw = reshape(ctx, sw, () if swt.size == 1 else shape)
    sx, sy = reshape(ctx, sx, ()), reshape(ctx, sy, ())
    return call("divide", call("multiply", as_f32(sx), as_f32(sw)), as_f32(sy))


def _scalar_params(ctx: ConvertContext, *exprs: Expr | None) -> bool:
    """Every given expr is a one-element constant (a per-tensor scale or zero point)."""
    for e in exprs:
        if e is None:
            continue
        value = ctx.const_value(e)
        if value is None or np.asarray(value).size != 1:
            return False
    return True


def qdq_linear(
    ctx: ConvertContext,
    node: NodeView,
    op_type: str,
    idx: tuple[int, ...],
    w_axis: int,
    bias_index: int = -1,
    attrs: dict[str, Any] | None = None,
) -> Expr | None:
    """QLinearConv/QLinearMatMul (and QGemm) as their QDQ form, ``quantize(op(dequantize(x),
    dequantize(w)) [+ dequantize(bias, s_x * s_w)])`` (inputs at ``idx``: x, its scale and
    zero point, w, its scale and zero point, y's; the int32 bias at ``bias_index``), which
    fuse_qdq turns into the same int8 kernels with a requantizing epilogue as a QDQ model's
    (the requantization is the same: ``s_x * s_w / s_y`` in float32). None when x's scale or
    zero point or y's is not a one-element constant, or w or its scale is not constant (the
    int32 form then: a product of two activations, as attention's, sums exactly there and
    would not in float)."""
    ix, isx, izx, iw, isw, izw, isy, izy = idx
    x, w = required(ctx, node, ix, "x"), required(ctx, node, iw, "w")
    sx, zx, sw = node.input(isx), node.input(izx), node.input(isw)
    sy, zy = node.input(isy), node.input(izy)
    if sx is None or sw is None or sy is None or zy is None:
        return None
    if not _scalar_params(ctx, sx, zx, sy, zy) or ctx.const_value(sw) is None:
        return None
    if ctx.const_value(w) is None:  # two activations (attention): the exact int32 product
        return None
    dtype = ttype(ctx, node, zy).dtype
    _check_dtype(ctx, node, dtype, frozenset({"int8", "uint8"}))
    xt, wt = ttype(ctx, node, x), ttype(ctx, node, w)
    xf = call("dequantize", x, reshape(ctx, sx, ()), _zp(ctx, node, zx, xt, 1, 0))
    wf = call(
        "dequantize",
        w,
        _shaped(ctx, node, sw, wt, w_axis, 0),
        _zp(ctx, node, node.input(izw), wt, w_axis, 0),
    )
    inputs = [xf, wf]
    bias = node.input(bias_index) if bias_index >= 0 else None
    if bias is not None:
        s_bias = np.float32(np.asarray(ctx.const_value(sx)).reshape(())) * np.asarray(
            ctx.const_value(sw), np.float32
        ).reshape(-1)
        inputs.append(call("dequantize", bias, Constant(s_bias), zero_const("int32")))
    y = standard_op(ctx, node, op_type, inputs, attrs or {})[0]
    assert y is not None
    return call("quantize", y, reshape(ctx, sy, ()), reshape(ctx, zy, ()), dtype=dtype,
                name=node.name)  # fmt: skip


def _zp(ctx: ConvertContext, node: NodeView, zp: Expr | None, xt: TensorType, axis: int,
        block: int) -> Expr:  # fmt: skip
    """A zero point shaped like its scale (zero of the data's type when omitted)."""
    return zero_const(xt.dtype) if zp is None else _shaped(ctx, node, zp, xt, axis, block)


@onnx_op("QLinearConv", since=10)
def qlinear_conv(ctx: ConvertContext, node: NodeView) -> Expr:
    """QLinearConv: its QDQ form (int8 kernels), else an int32 convolution + int32 bias,
    requantized."""
    qdq = qdq_linear(ctx, node, "Conv", (0, 1, 2, 3, 4, 5, 6, 7), 0, 8, dict(node.attrs))
    if qdq is not None:
        return qdq
    acc = _conv_integer(ctx, node, (0, 2, 3, 5))
    ch = acc.tensor_type.shape[1]
    nsp = acc.tensor_type.ndim - 2
    bias = node.input(8)
    if bias is not None:
        acc = call("add", acc, reshape(ctx, bias, (ch,) + (1,) * nsp))
    sx, sw, sy = (
        required(ctx, node, i, n) for i, n in ((1, "x_scale"), (4, "w_scale"), (6, "y_scale"))
    )
    m = _multiplier(ctx, node, sx, sw, sy, (ch,) + (1,) * nsp)
    zy = required(ctx, node, 7, "y_zero_point")
    dtype = ttype(ctx, node, zy).dtype
    _check_dtype(ctx, node, dtype, frozenset({"int8", "uint8"}))
    return requantize(acc, m, reshape(ctx, zy, ()), dtype, node.name)


@onnx_op("QLinearMatMul", since=10)
def qlinear_matmul(ctx: ConvertContext, node: NodeView) -> Expr:
    """QLinearMatMul: its QDQ form (int8 kernels), else an int32 matmul, requantized (b's
    scale may be per column)."""
    qdq = qdq_linear(ctx, node, "MatMul", (0, 1, 2, 3, 4, 5, 6, 7), -1)
    if qdq is not None:
        return qdq
    acc = _matmul_integer(ctx, node, (0, 2, 3, 5))
    sa, sb, sy = (
        required(ctx, node, i, n) for i, n in ((1, "a_scale"), (4, "b_scale"), (6, "y_scale"))
    )
    bt = ttype(ctx, node, required(ctx, node, 3, "b"))
    m = _multiplier(ctx, node, sa, sb, sy, (bt.shape[-1],))
    zy = required(ctx, node, 7, "y_zero_point")
    dtype = ttype(ctx, node, zy).dtype
    _check_dtype(ctx, node, dtype, frozenset({"int8", "uint8"}))
    return requantize(acc, m, reshape(ctx, zy, ()), dtype, node.name)
