"""ONNX handlers for onnxruntime's quantized contrib operators (domain ``com.microsoft``).

onnxruntime's quantizer writes these in the QOperator format (``quant_format=QOperator``,
the form of many published int8 models), and ``quantize_dynamic`` writes
DynamicQuantizeLSTM. They have no kernels of their own here: each becomes the standard
float op between a ``dequantize`` of its inputs and a ``quantize`` of its output, the QDQ
form, which ``fuse_qdq`` then turns into the same int8 kernels, tables and requantizing
epilogues a QDQ model gets. The products requantize their int32 accumulator as
QLinearMatMul does (ember.frontend.onnx.quant).

* QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax (its ``opset``
  attribute selects the Softmax semantics), QLinearAveragePool, QLinearGlobalAveragePool
  (``channels_last`` too), QLinearConcat: dequantize, the float op, quantize.
* QGemm: int32 product of the zero-point-shifted operands plus the int32 bias ``C``,
  times ``alpha * a_scale * b_scale``; requantized when ``y_scale`` is given (as its QDQ
  form, like QLinearMatMul, when alpha is 1 and the scales are constants), else float.
* DynamicQuantizeMatMul and MatMulIntegerToFloat (what onnxruntime's optimizer leaves in a
  saved model): the int32 product, scaled to float, plus the bias.
* DynamicQuantizeLSTM: an LSTM over the dequantized weights (stored ``[dirs, in, 4h]``,
  transposed back). onnxruntime also quantizes X and H at run time; ember computes them in
  float, so outputs differ from onnxruntime's by that rounding (and are nearer the float
  model's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember.frontend.onnx.common import standard_op
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.nn_common import required, reshape, ttype, unsupported
from ember.frontend.onnx.quant import (
    as_f32,
    int32_shifted,
    qdq_linear,
    requantize,
    zero_const,
)
from ember.frontend.onnx.registry import onnx_op
from ember.ir.expr import Constant, Expr, call

MS_DOMAIN = "com.microsoft"
_8BIT = frozenset({"int8", "uint8"})


def _scalar(ctx: ConvertContext, node: NodeView, expr: Expr, what: str) -> Expr:
    """A per-tensor scale or zero point as a scalar (refused when it has several values)."""
    if ttype(ctx, node, expr).size != 1:
        raise unsupported(ctx, node, f"a per-channel {what}")
    return reshape(ctx, expr, ())


def _dq(ctx: ConvertContext, node: NodeView, x: Expr, scale: Expr, zp: Expr | None) -> Expr:
    """dequantize(x) with a per-tensor scale and zero point (zero when absent)."""
    dtype = ttype(ctx, node, x).dtype
    if dtype not in _8BIT:
        raise unsupported(ctx, node, f"quantized type {dtype}")
    z = zero_const(dtype) if zp is None else _scalar(ctx, node, zp, "zero point")
    return call("dequantize", x, _scalar(ctx, node, scale, "scale"), z)


def _q(
    ctx: ConvertContext, node: NodeView, y: Expr, scale: Expr, zp: Expr | None, dtype: str
) -> Expr:
    """quantize(y) to ``dtype`` (the zero point's type when it is given)."""
    if zp is not None:
        dtype = ttype(ctx, node, zp).dtype
    z = zero_const(dtype) if zp is None else _scalar(ctx, node, zp, "zero point")
    return call("quantize", y, _scalar(ctx, node, scale, "scale"), z, dtype=dtype, name=node.name)


def _float_op(
    ctx: ConvertContext,
    node: NodeView,
    op_type: str,
    inputs: Sequence[Expr],
    attrs: dict[str, Any],
    opset: int = 0,
) -> Expr:
    """The one output of the standard ``op_type`` on ``inputs`` (see standard_op)."""
    out = standard_op(ctx, node, op_type, inputs, attrs, opset)[0]
    assert out is not None
    return out


def _unary(ctx: ConvertContext, node: NodeView, op_type: str, attrs: dict[str, Any]) -> Expr:
    """X, X_scale, X_zero_point, Y_scale, Y_zero_point -> quantize(op(dequantize(X)))."""
    x = required(ctx, node, 0, "X")
    xf = _dq(ctx, node, x, required(ctx, node, 1, "X_scale"), node.input(2))
    y = _float_op(ctx, node, op_type, [xf], attrs)
    dtype = ttype(ctx, node, x).dtype
    return _q(ctx, node, y, required(ctx, node, 3, "Y_scale"), node.input(4), dtype)


def _binary(ctx: ConvertContext, node: NodeView, op_type: str) -> Expr:
    """A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp -> quantize(op(dq(A), dq(B)))."""
    a, b = required(ctx, node, 0, "A"), required(ctx, node, 3, "B")
    af = _dq(ctx, node, a, required(ctx, node, 1, "A_scale"), node.input(2))
    bf = _dq(ctx, node, b, required(ctx, node, 4, "B_scale"), node.input(5))
    y = _float_op(ctx, node, op_type, [af, bf], {})
    dtype = ttype(ctx, node, a).dtype
    return _q(ctx, node, y, required(ctx, node, 6, "C_scale"), node.input(7), dtype)


@onnx_op("QLinearAdd", since=1, domain=MS_DOMAIN, dtypes=_8BIT)
def qlinear_add(ctx: ConvertContext, node: NodeView) -> Expr:
    """QLinearAdd: quantize(dequantize(A) + dequantize(B)), broadcasting."""
    return _binary(ctx, node, "Add")


@onnx_op("QLinearMul", since=1, domain=MS_DOMAIN, dtypes=_8BIT)
def qlinear_mul(ctx: ConvertContext, node: NodeView) -> Expr:
    """QLinearMul: quantize(dequantize(A) * dequantize(B)), broadcasting."""
    return _binary(ctx, node, "Mul")


@onnx_op("QLinearSigmoid", since=1, domain=MS_DOMAIN, dtypes=_8BIT)
def qlinear_sigmoid(ctx: ConvertContext, node: NodeView) -> Expr:
    """QLinearSigmoid."""
    return _unary(ctx, node, "Sigmoid", {})


@onnx_op("QLinearLeakyRelu", since=1, domain=MS_DOMAIN, dtypes=_8BIT)
def qlinear_leaky_relu(ctx: ConvertContext, node: NodeView) -> Expr:
    """QLinearLeakyRelu (alpha, default 0.01)."""
    return _unary(ctx, node, "LeakyRelu", {"alpha": float(node.attr("alpha", 0.01))})


@onnx_op("QLinearSoftmax", since=1, domain=MS_DOMAIN, dtypes=_8BIT)
def qlinear_softmax(ctx: ConvertContext, node: NodeView) -> Expr:
    """QLinearSoftmax: ``opset`` (the replaced Softmax's) chooses 2-D coercion (< 13)."""
    x = required(ctx, node, 0, "X")
    opset = int(node.attr("opset"))
    xf = _dq(ctx, node, x, required(ctx, node, 1, "X_scale"), node.input(2))
    axis = int(node.attr("axis", -1 if opset >= 13 else 1))
    y = _float_op(ctx, node, "Softmax", [xf], {"axis": axis}, opset=opset)
    dtype = ttype(ctx, node, x).dtype
    return _q(ctx, node, y, required(ctx, node, 3, "y_scale"), node.input(4), dtype)


def _channels_first(ctx: ConvertContext, node: NodeView, x: Expr, last: bool) -> Expr:
    if not last:
        return x
    nd = ttype(ctx, node, x).ndim
    return call("transpose", x, axes=(0, nd - 1, *range(1, nd - 1)))


def _channels_back(ctx: ConvertContext, node: NodeView, y: Expr, last: bool) -> Expr:
    if not last:
        return y
    nd = ttype(ctx, node, y).ndim
    return call("transpose", y, axes=(0, *range(2, nd), 1))


def _pool(ctx: ConvertContext, node: NodeView, op_type: str, attrs: dict[str, Any]) -> Expr:
    """A quantized pool; a channels-last input's bytes moved to channels-first and the
    output's back, so the pool sits between its own dequantize and quantize (where the QDQ
    pass makes the integer global-average kernel of it)."""
    last = bool(node.attr("channels_last", 0))
    x = _channels_first(ctx, node, required(ctx, node, 0, "X"), last)
    xf = _dq(ctx, node, x, required(ctx, node, 1, "x_scale"), node.input(2))
    y = _float_op(ctx, node, op_type, [xf], attrs)
    dtype = ttype(ctx, node, x).dtype
    q = _q(ctx, node, y, required(ctx, node, 3, "y_scale"), node.input(4), dtype)
    return _channels_back(ctx, node, q, last)


@onnx_op("QLinearGlobalAveragePool", since=1, domain=MS_DOMAIN, dtypes=_8BIT)
def qlinear_global_avg_pool(ctx: ConvertContext, node: NodeView) -> Expr:
    """QLinearGlobalAveragePool (``channels_last``: NHWC input and output)."""
    return _pool(ctx, node, "GlobalAveragePool", {})


_POOL_ATTRS = ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides")


@onnx_op("QLinearAveragePool", since=1, domain=MS_DOMAIN, dtypes=_8BIT)
def qlinear_avg_pool(ctx: ConvertContext, node: NodeView) -> Expr:
    """QLinearAveragePool: AveragePool's attributes, and ``channels_last``."""
    attrs = {k: node.attr(k) for k in _POOL_ATTRS if node.has_attr(k)}
    return _pool(ctx, node, "AveragePool", attrs)


@onnx_op("QLinearConcat", since=1, domain=MS_DOMAIN)
def qlinear_concat(ctx: ConvertContext, node: NodeView) -> Expr:
    """QLinearConcat: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input."""
    rest = node.inputs[2:]
    if not rest or len(rest) % 3:
        ctx.fail(node, f"expected (tensor, scale, zero point) triples, got {len(rest)} inputs")
    parts = []
    for i in range(0, len(rest), 3):
        x = required(ctx, node, 2 + i, f"input {i // 3}")
        parts.append(_dq(ctx, node, x, required(ctx, node, 3 + i, "scale"), node.input(4 + i)))
    y = _float_op(ctx, node, "Concat", parts, {"axis": int(node.attr("axis"))})
    dtype = ttype(ctx, node, required(ctx, node, 2, "input 0")).dtype
    return _q(ctx, node, y, required(ctx, node, 0, "Y_scale"), node.input(1), dtype)


def _per_column(ctx: ConvertContext, node: NodeView, s: Expr, n: int) -> Expr:
    """A scale of B: a scalar, or one value per output column."""
    size = ttype(ctx, node, s).size
    if size not in (1, n):
        ctx.fail(node, f"b's scale must have 1 or {n} values, got {size}")
    return reshape(ctx, s, () if size == 1 else (n,))


@onnx_op("QGemm", since=1, domain=MS_DOMAIN, dtypes=_8BIT)
def qgemm(ctx: ConvertContext, node: NodeView) -> Expr:
    """QGemm: alpha * a_scale * b_scale * ((A' - a_zp)(B' - b_zp) + C), requantized to
    y_scale / y_zero_point when y_scale is given, else float32."""
    if node.input(7) is not None and float(node.attr("alpha", 1.0)) == 1.0:
        trans = {k: int(node.attr(k, 0)) for k in ("transA", "transB")}
        w_axis = 0 if trans["transB"] else 1
        qdq = qdq_linear(ctx, node, "Gemm", (0, 1, 2, 3, 4, 5, 7, 8), w_axis, 6, trans)
        if qdq is not None:
            return qdq
    a, b = required(ctx, node, 0, "A"), required(ctx, node, 3, "B")
    if node.attr("transA", 0):
        a = call("transpose", a, axes=(1, 0))
    if node.attr("transB", 0):
        b = call("transpose", b, axes=(1, 0))
    at, bt = ttype(ctx, node, a), ttype(ctx, node, b)
    if at.ndim != 2 or bt.ndim != 2:
        ctx.fail(node, f"A and B must be 2-D, got {at} and {bt}")
    n = bt.shape[1]
    ai = int32_shifted(ctx, node, a, node.input(2), ())
    bi = int32_shifted(ctx, node, b, node.input(5), (n,))
    acc = call("nn.matmul", ai, bi, name=f"{node.name}_acc")
    c = node.input(6)
    if c is not None:
        if ttype(ctx, node, c).dtype != "int32":
            ctx.fail(node, f"C must be int32, got {ttype(ctx, node, c).dtype}")
        acc = call("add", acc, c)
    sa = as_f32(_scalar(ctx, node, required(ctx, node, 1, "a_scale"), "a_scale"))
    sb = as_f32(_per_column(ctx, node, required(ctx, node, 4, "b_scale"), n))
    alpha = Constant(np.asarray(node.attr("alpha", 1.0), np.float32))
    scale = call("multiply", call("multiply", alpha, sa), sb)
    ys = node.input(7)
    if ys is None:
        return call("multiply", call("cast", acc, dtype="float32"), scale, name=node.name)
    zy = node.input(8)
    dtype = ttype(ctx, node, a).dtype if zy is None else ttype(ctx, node, zy).dtype
    z = zero_const(dtype) if zy is None else _scalar(ctx, node, zy, "y_zero_point")
    m = call("divide", scale, as_f32(_scalar(ctx, node, ys, "y_scale")))
    return requantize(acc, m, z, dtype, node.name)


def _integer_to_float(
    ctx: ConvertContext, node: NodeView, a: Expr, az: Expr | None, b: Expr, bz: Expr | None,
    scale: Expr, bias: Expr | None,
) -> Expr:  # fmt: skip
    """float32((A - az) @ (B - bz)) * scale (+ bias); B's zero point per column or scalar."""
    at, bt = ttype(ctx, node, a), ttype(ctx, node, b)
    n = bt.shape[-1]
    ai = int32_shifted(ctx, node, a, az, (at.shape[-2], 1) if at.ndim > 1 else ())
    bi = int32_shifted(ctx, node, b, bz, (n,))
    y = call("multiply", call("cast", call("nn.matmul", ai, bi), dtype="float32"), scale)
    return y if bias is None else call("add", y, as_f32(bias))


@onnx_op("DynamicQuantizeMatMul", since=1, domain=MS_DOMAIN, dtypes=frozenset({"float32"}))
def dynamic_quantize_matmul(ctx: ConvertContext, node: NodeView) -> Expr:
    """DynamicQuantizeMatMul: A quantized as DynamicQuantizeLinear does, times int8 B."""
    a = required(ctx, node, 0, "A")
    qa, sa, za = standard_op(ctx, node, "DynamicQuantizeLinear", [a], {}, outputs=3)
    assert qa is not None and sa is not None and za is not None
    b = required(ctx, node, 1, "B")
    n = ttype(ctx, node, b).shape[-1]
    sb = _per_column(ctx, node, required(ctx, node, 2, "b_scale"), n)
    scale = call("multiply", sa, as_f32(sb))
    return _integer_to_float(ctx, node, qa, za, b, node.input(3), scale, node.input(4))


@onnx_op("MatMulIntegerToFloat", since=1, domain=MS_DOMAIN, dtypes=_8BIT)
def matmul_integer_to_float(ctx: ConvertContext, node: NodeView) -> Expr:
    """MatMulIntegerToFloat: (A - a_zp) @ (B - b_zp) * a_scale * b_scale (+ bias)."""
    a, b = required(ctx, node, 0, "A"), required(ctx, node, 1, "B")
    n = ttype(ctx, node, b).shape[-1]
    sa = as_f32(_scalar(ctx, node, required(ctx, node, 2, "a_scale"), "a_scale"))
    sb = as_f32(_per_column(ctx, node, required(ctx, node, 3, "b_scale"), n))
    scale = call("multiply", sa, sb)
    return _integer_to_float(
        ctx, node, a, node.input(4), b, node.input(5), scale, node.input(6)
    )  # fmt: skip


def _dequantized_weight(
    ctx: ConvertContext, node: NodeView, w: Expr, s: Expr, zp: Expr | None, what: str
) -> Expr:
    """A DynamicQuantizeLSTM weight ``[dirs, in, 4h]`` dequantized (scales per direction, or
    per direction and gate column) and transposed to the LSTM's ``[dirs, 4h, in]``."""
    wt = ttype(ctx, node, w)
    if wt.ndim != 3 or wt.dtype not in _8BIT:
        ctx.fail(node, f"{what} must be a 3-D 8-bit tensor, got {wt}")
    dirs, _, cols = wt.shape
    st = ttype(ctx, node, s)
    shape = (dirs, 1, cols) if st.size == dirs * cols else (dirs, 1, 1)
    if st.size not in (dirs, dirs * cols):
        ctx.fail(node, f"{what}'s scale must have {dirs} or {dirs * cols} values, got {st.size}")
    z = zero_const(wt.dtype) if zp is None else reshape(ctx, zp, shape)
    deq = call("dequantize", w, reshape(ctx, s, shape), z)
    return call("transpose", deq, axes=(0, 2, 1))


@onnx_op("DynamicQuantizeLSTM", since=1, domain=MS_DOMAIN, dtypes=frozenset({"float32"}))
def dynamic_quantize_lstm(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """DynamicQuantizeLSTM: the LSTM over its dequantized weights (Y, Y_h, Y_c)."""
    w = _dequantized_weight(
        ctx, node, required(ctx, node, 1, "W"), required(ctx, node, 8, "W_scale"),
        node.input(9), "W",
    )  # fmt: skip
    r = _dequantized_weight(
        ctx, node, required(ctx, node, 2, "R"), required(ctx, node, 10, "R_scale"),
        node.input(11), "R",
    )  # fmt: skip
    inputs: list[Expr | None] = [node.input(0), w, r, *node.inputs[3:8]]
    while inputs and inputs[-1] is None:
        inputs.pop()
    return standard_op(ctx, node, "LSTM", inputs, dict(node.attrs), outputs=node.num_outputs)
