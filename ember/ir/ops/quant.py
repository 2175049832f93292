"""Linear quantization (pattern BROADCAST): ``quantize`` and ``dequantize``.

Both take ``(x, scale, zero_point)`` with ``scale`` and ``zero_point`` already shaped to
broadcast against ``x`` (the ONNX importer turns per-axis and blocked parameters into such
shapes). The arithmetic is the ONNX spec's and onnxruntime's, in float32:

* ``quantize``: ``y = saturate(rint(x / scale) + zero_point)``, rounding half to even and
  saturating to the range of ``dtype`` (int8, uint8, int16, uint16, and the sub-byte int4,
  uint4, int2, uint2; the float8 and float4 forms of ONNX are casts, see the importer).
* ``dequantize``: ``y = float(x - zero_point) * scale``, the difference taken in int32
  (exact for every integer input type), the result in the dtype of ``scale``.

``quantized_conv_int8``, ``quantized_dwconv_int8`` and ``quantized_dense_int8`` are whole
quantized layers (8-bit in, 8-bit out; see their section below).

A requantization (int32 accumulator to int8/uint8) is ``quantize(multiply(cast(acc,
float32), m), 1, zero_point)`` with ``m = s_x * s_w / s_y`` computed in float32: the same
float multiply, round-half-even and saturation as onnxruntime's ``MlasRequantizeOutput``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, get_op, register_op
from ember.ir.ops import nn_conv, nn_pool  # noqa: F401  (register ops looked up below)
from ember.ir.ops.common import (
    FLOAT_DTYPES,
    broadcast_shapes,
    check_dtype,
    np_dtype,
    padding,
    quant_range,
    spatial,
)
from ember.ir.ops.nn_conv_weights import conv_reference, unpack_conv_weight
from ember.ir.ops.quant_int8_ref import (
    conv_int8_ref,
    conv_integer_int8_ref,
    dense_int8_ref,
    dwconv_int8_ref,
    matmul_integer_int8_ref,
)
from ember.ir.types import TensorType, Type, canonical_dtype

#: the 8- and 16-bit integer types of quantized layers (what fuse_qdq's kernels take).
QUANT_DTYPES: frozenset[str] = frozenset({"int8", "uint8", "int16", "uint16"})
#: the sub-byte integer types quantize can produce too (one element per byte).
SUB_BYTE_QUANT_DTYPES: frozenset[str] = frozenset({"int4", "uint4", "int2", "uint2"})
#: the types ``quantize`` produces and ``dequantize`` reads (int32 included).
QUANTIZE_DTYPES: frozenset[str] = QUANT_DTYPES | SUB_BYTE_QUANT_DTYPES
DEQUANT_DTYPES: frozenset[str] = QUANTIZE_DTYPES | {"int32"}
_8BIT: frozenset[str] = frozenset({"int8", "uint8"})


def _check_params(types: Sequence[Type], op: str, xt: TensorType) -> TensorType:
    scale = check_dtype(types[1], FLOAT_DTYPES, f"scale of '{op}'")
    zp = check_dtype(types[2], DEQUANT_DTYPES, f"zero point of '{op}'")
    for what, t in (("scale", scale), ("zero point", zp)):
        if broadcast_shapes(xt.shape, t.shape, what=f"{what} of '{op}'") != xt.shape:
            raise IRError(
                f"{what} of '{op}' has shape {t.shape}, which does not broadcast to the "
                f"input shape {xt.shape}; reshape it to one value per element of the axis"
            )
    return scale


def _quantize_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], FLOAT_DTYPES | {"int32"}, "input of 'quantize'")
    _check_params(types, "quantize", x)
    dtype = canonical_dtype(attrs["dtype"])
    if dtype not in QUANTIZE_DTYPES:
        raise IRError(
            f"'quantize' to {dtype} is not supported; use one of "
            f"{', '.join(sorted(QUANTIZE_DTYPES))}"
        )
    return TensorType(x.shape, dtype)


def quantize_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """rint(x / scale) + zero_point, saturated, computed in float32."""
    x, scale, zp = xs
    lo, hi = quant_range(canonical_dtype(attrs["dtype"]))
    with np.errstate(all="ignore"):
        v = np.asarray(x, np.float32) / np.asarray(scale, np.float32)
        v = np.rint(v) + np.asarray(zp, np.float32)
        v = np.clip(np.nan_to_num(v, nan=0.0), lo, hi)
    return v.astype(np_dtype(canonical_dtype(attrs["dtype"])))


def _dequantize_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], DEQUANT_DTYPES, "input of 'dequantize'")
    scale = _check_params(types, "dequantize", x)
    return TensorType(x.shape, scale.dtype)


def dequantize_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """float32(x - zero_point) * scale, in the dtype of scale."""
    x, scale, zp = xs
    diff = np.asarray(x, np.int32) - np.asarray(zp, np.int32)
    out = diff.astype(np.float32) * np.asarray(scale, np.float32)
    return out.astype(scale.dtype)


def _quantized_binary_type(name: str) -> Callable[[Sequence[Type], Attrs], Type]:
    """The type rule of a quantized elementwise op ``name`` of two tensors (broadcast)."""

    def infer(types: Sequence[Type], attrs: Attrs) -> Type:
        a = check_dtype(types[0], QUANT_DTYPES, f"lhs of '{name}'")
        b = check_dtype(types[1], QUANT_DTYPES, f"rhs of '{name}'")
        dtype = canonical_dtype(attrs["dtype"])
        if dtype not in QUANT_DTYPES:
            raise IRError(f"'{name}' to {dtype} is not supported")
        return TensorType(broadcast_shapes(a.shape, b.shape, what=name), dtype)

    return infer


def quantized_add_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """saturate(rint(fma(a, ratio_a, fma(b, ratio_b, fixed)))), each fma rounded once to
    float32 (computed exactly in float64, then rounded)."""
    a, b = (np.asarray(x, np.float64) for x in xs)
    inner = (b * np.float64(np.float32(attrs["ratio_b"])) + attrs["fixed"]).astype(np.float32)
    total = (a * np.float64(np.float32(attrs["ratio_a"])) + inner).astype(np.float32)
    lo, hi = quant_range(canonical_dtype(attrs["dtype"]))
    return np.clip(np.rint(total), lo, hi).astype(np_dtype(canonical_dtype(attrs["dtype"])))


def quantized_mul_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """saturate(rint(float32((a - za) * (b - zb)) * ratio + zc)), the multiply and the add
    each in float32: the integer product exact, ``ratio`` = sa * sb / sc (onnxruntime's x86
    QLinearMul)."""
    a, b = (np.asarray(x, np.int64) for x in xs)
    prod = ((a - int(attrs["a_zero_point"])) * (b - int(attrs["b_zero_point"]))).astype(np.float32)
    scaled = prod * np.float32(attrs["ratio"])
    shifted = scaled + np.float32(int(attrs["zero_point"]))
    lo, hi = quant_range(canonical_dtype(attrs["dtype"]))
    out = np.clip(np.rint(shifted), lo, hi)
    return out.astype(np_dtype(canonical_dtype(attrs["dtype"])))


def _quantized_conv_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], QUANT_DTYPES, "data of 'quantized_conv_packed'")
    w = check_dtype(types[1], frozenset({"int32"}), "weight of 'quantized_conv_packed'")
    conv_attrs = {k: v for k, v in attrs.items() if k != "x_zero_point"}
    out = get_op("nn.conv_packed").infer_type([TensorType(x.shape, "int32"), w], Attrs(conv_attrs))
    if not isinstance(out, TensorType):
        raise IRError(f"'quantized_conv_packed' expected a tensor type, got {out}")
    return TensorType(out.shape, "int32")


def quant_pack_block(channels: int) -> int:
    """The output-channel block of a quantized packed convolution: 16 or 8 when it divides
    ``channels`` (no padded channels), else 0 (not packed)."""
    return next((b for b in (16, 8) if channels % b == 0), 0)


def quantized_conv_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """The int32 convolution of ``int32(x) - x_zero_point`` (padding counts as the zero
    point) and the unpacked int32 weight."""
    x, wp = xs
    nsp = x.ndim - 2
    shifted = np.asarray(x, np.int64) - int(attrs["x_zero_point"])
    w = unpack_conv_weight(np.asarray(wp, np.int64), int(attrs["channels"]))
    out = conv_reference(
        shifted,
        w,
        spatial(attrs, "strides", nsp, 1),
        padding(attrs, nsp),
        spatial(attrs, "dilation", nsp, 1),
        1,
    )
    return np.asarray(out).astype(np.int32)


register_op(
    OpDef(
        "quantized_conv_packed",
        2,
        _quantized_conv_type,
        quantized_conv_ref,
        OpPattern.OUT_ELEMWISE_FUSABLE,
        {
            "strides": Attr("ints", ()),
            "padding": Attr("ints", ()),
            "dilation": Attr("ints", ()),
            "groups": Attr("int", 1),
            "channels": Attr("int", doc="output channels (the packed weight may pad them)"),
            "x_zero_point": Attr("int", 0, "subtracted from the data (and the padding value)"),
        },
        doc="int32 convolution of 8-bit data minus its zero point and an int32 weight packed "
        "(O/b, I, *k, b) at build time; made by the fuse_qdq pass",
    )
)


def _register_binary(
    name: str,
    reference: Callable[[Sequence[np.ndarray], Attrs], np.ndarray],
    pattern: OpPattern,
    attrs: dict[str, Attr],
    doc: str,
) -> None:
    """Register the quantized elementwise op ``name`` of two tensors (broadcast)."""
    register_op(OpDef(name, 2, _quantized_binary_type(name), reference, pattern, attrs, doc=doc))


#: the attributes of both quantized adds (the compiled one and the whole-kernel int8 one).
_ADD_ATTRS = {
    "ratio_a": Attr("float", doc="scale of a / scale of the output (float32)"),
    "ratio_b": Attr("float", doc="scale of b / scale of the output (float32)"),
    "fixed": Attr("float", doc="zc - (ratio_a * za + ratio_b * zb), float32"),
    "dtype": Attr("dtype", doc="the output's quantized dtype"),
}
_register_binary(
    "quantized_add",
    quantized_add_ref,
    OpPattern.BROADCAST,
    _ADD_ATTRS,
    "onnxruntime's QLinearAdd of two quantized tensors (two fused multiply-adds)",
)
_MUL_ATTRS = {
    "ratio": Attr("float", doc="sa * sb / sc in float32"),
    "a_zero_point": Attr("int", doc="a's zero point"),
    "b_zero_point": Attr("int", doc="b's zero point"),
    "zero_point": Attr("int", doc="the output's zero point"),
    "dtype": Attr("dtype", doc="the output's quantized dtype"),
}
_register_binary(
    "quantized_mul",
    quantized_mul_ref,
    OpPattern.BROADCAST,
    _MUL_ATTRS,
    "onnxruntime's QLinearMul of two quantized tensors (integer product, one scale)",
)
_register_binary(
    "quantized_mul_int8",
    quantized_mul_ref,
    OpPattern.OPAQUE,
    _MUL_ATTRS,
    "quantized_mul of 8-bit tensors, one of them whole and the other whole or one "
    "value per row (row_broadcast), as one C kernel (fuse_qdq)",
)


def row_broadcast(
    a: Sequence[int], b: Sequence[int], out: Sequence[int]
) -> tuple[int, int, int] | None:
    """``(rows, inner, which)`` when one operand has ``out``'s shape and the other too
    (``which`` 0: one row of every element) or is constant along ``out``'s trailing
    dimensions (one value per row of ``inner`` elements, as a squeeze-excitation block's
    per-channel scale; ``which`` 1 when that is ``a``, 2 when ``b``); else None."""
    try:
        out, a, b = (tuple(int(d) for d in s) for s in (out, a, b))
    except (TypeError, ValueError):  # a symbolic dimension: no fixed rows
        return None
    count = int(np.prod(out, dtype=np.int64))
    if a == out and b == out:
        return 1, count, 0
    for which, full, part in ((2, a, b), (1, b, a)):
        if full != out or len(part) > len(out):
            continue
        padded = (1,) * (len(out) - len(part)) + part
        k = len(out)
        while k > 0 and padded[k - 1] == 1:
            k -= 1
        if padded[:k] == out[:k]:
            rows = int(np.prod(out[:k], dtype=np.int64))
            return rows, count // max(rows, 1), which
    return None


def _table_int8_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], _8BIT, "input of 'quantized_table_int8'")
    table = check_dtype(types[1], _8BIT, "table of 'quantized_table_int8'")
    if tuple(table.shape) != (256,):
        raise IRError(f"'quantized_table_int8' needs a table of 256 entries, got {table.shape}")
    return TensorType(x.shape, table.dtype)


def quantized_table_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """``table[byte]``: each element's bits as an unsigned index."""
    x, table = (np.asarray(v) for v in xs)
    return table[x.view(np.uint8)]


register_op(
    OpDef(
        "quantized_table_int8",
        2,
        _table_int8_type,
        quantized_table_ref,
        OpPattern.OPAQUE,
        {},
        doc="an 8-bit tensor mapped through a 256-entry byte table as one C kernel (fuse_qdq)",
    )
)
_register_binary(
    "quantized_add_int8",
    quantized_add_ref,
    OpPattern.OPAQUE,
    _ADD_ATTRS,
    "quantized_add of two 8-bit tensors of one shape as one C kernel (fuse_qdq)",
)
register_op(
    OpDef(
        "quantize",
        3,
        _quantize_type,
        quantize_ref,
        OpPattern.BROADCAST,
        {"dtype": Attr("dtype", doc="the quantized integer dtype (8, 16, 4 or 2 bits)")},
        doc="saturate(rint(x / scale) + zero_point), round half to even",
    )
)
register_op(
    OpDef(
        "dequantize",
        3,
        _dequantize_type,
        dequantize_ref,
        OpPattern.BROADCAST,
        doc="float(x - zero_point) * scale",
    )
)


# --- whole int8 layers (OPAQUE), made by fuse_qdq when the weights suit vpmaddubsw ---
# Inputs (x, packed weight, bias, mult): x int8/uint8; the weight packed at build time (the
# pack_* helpers); bias int32 per output channel with the zero-point corrections folded in;
# mult float32 per output channel (s_x * s_w / s_y). Output: saturate(rint([relu](float32(
# acc + bias) * mult)) + y_zero_point). Conv and dense make int8 data unsigned (flip: + 128,
# x_zero_point is then the unsigned zero point, the padding value) and acc is the exact
# product of the unsigned data and the int8 weight; depthwise subtracts x_zero_point.

_DATA = frozenset({"int8", "uint8"})


def _conv_shape(x: TensorType, attrs: Attrs) -> tuple[int, ...]:
    if x.ndim != 4:
        raise IRError(f"int8 convolution needs NCHW data, got {x}")
    kernel = spatial(attrs, "kernel", 2, 1)
    strides, dilation = spatial(attrs, "strides", 2, 1), spatial(attrs, "dilation", 2, 1)
    pads = padding(attrs, 2)
    out = []
    for i in range(2):
        extent = dilation[i] * (kernel[i] - 1) + 1
        out.append((x.shape[2 + i] + pads[i][0] + pads[i][1] - extent) // strides[i] + 1)
    return (x.shape[0], int(attrs["channels"]), *out)


def _int8_data(types: Sequence[Type], attrs: Attrs) -> tuple[TensorType, str]:
    x = check_dtype(types[0], _DATA, "data of an int8 kernel")
    dtype = canonical_dtype(attrs["dtype"])
    if dtype not in _DATA:
        raise IRError(f"int8 kernels produce int8 or uint8, not {dtype}")
    return x, dtype


def _conv_int8_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x, dtype = _int8_data(types, attrs)
    return TensorType(_conv_shape(x, attrs), dtype)


def _dense_int8_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x, dtype = _int8_data(types, attrs)
    return TensorType((*x.shape[:-1], int(attrs["units"])), dtype)


def _mmi_int8_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], _DATA, "data of an int8 kernel")
    return TensorType((*x.shape[:-1], int(attrs["units"])), "int32")


def _conv_integer_int8_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], _DATA, "data of an int8 kernel")
    return TensorType(_conv_shape(x, attrs), "int32")


_COMMON = {
    "flip": Attr("bool", False, "int8 data: add 128 (the zero point and padding moved too)"),
    "x_zero_point": Attr("int", 0, "zero point of the (unsigned) data, the padding value"),
    "y_zero_point": Attr("int", 0, "zero point of the output"),
    "relu": Attr("bool", False, "clamp the scaled accumulator at 0"),
    "dtype": Attr("dtype", doc="the output's dtype (int8 or uint8)"),
}
_CONV = {
    "channels": Attr("int", doc="output channels"),
    "kernel": Attr("ints", (), "kernel height and width"),
    "strides": Attr("ints", ()),
    "padding": Attr("ints", ()),
    "dilation": Attr("ints", ()),
}
register_op(
    OpDef(
        "quantized_conv_int8",
        4,
        _conv_int8_type,
        conv_int8_ref,
        OpPattern.OPAQUE,
        {**_COMMON, **_CONV},
        doc="requantized 2-D convolution of 8-bit data and int8 weight rows (fuse_qdq)",
    )
)
register_op(
    OpDef(
        "quantized_dwconv_int8",
        4,
        _conv_int8_type,
        dwconv_int8_ref,
        OpPattern.OPAQUE,
        {**_COMMON, **_CONV},
        doc="requantized depthwise 2-D convolution of 8-bit data, int16 taps (fuse_qdq)",
    )
)
register_op(
    OpDef(
        "quantized_dense_int8",
        4,
        _dense_int8_type,
        dense_int8_ref,
        OpPattern.OPAQUE,
        {**_COMMON, "units": Attr("int", doc="output features N")},
        doc="requantized [.., K] x [K, N] of 8-bit data and int8 weight panels (fuse_qdq)",
    )
)
register_op(
    OpDef(
        "quantized_matmul_integer_int8",
        4,
        _mmi_int8_type,
        matmul_integer_int8_ref,
        OpPattern.OPAQUE,
        {"flip": _COMMON["flip"], "units": Attr("int", doc="output features N")},
        doc="int32 [.., K] x [K, N] of 8-bit data (run-time zero point) and int8 weight panels",
    )
)
register_op(
    OpDef(
        "quantized_conv_integer_int8",
        4,
        _conv_integer_int8_type,
        conv_integer_int8_ref,
        OpPattern.OPAQUE,
        {"flip": _COMMON["flip"], **_CONV},
        doc="int32 2-D convolution of 8-bit data (run-time zero point) and int8 weight rows",
    )
)
_MAX_POOL = get_op("nn.max_pool")
register_op(
    OpDef(
        "quantized_max_pool_int8",
        1,
        _MAX_POOL.infer_type,
        _MAX_POOL.reference,
        OpPattern.OPAQUE,
        dict(_MAX_POOL.attrs),
        doc="nn.max_pool of 8-bit NCHW data as one C kernel, separable passes (fuse_qdq)",
    )
)


def _global_avg_pool_int8_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], QUANT_DTYPES, "data of 'quantized_global_avg_pool_int8'")
    if x.ndim != 4:
        raise IRError(f"'quantized_global_avg_pool_int8' takes NCHW data, got {x}")
    return TensorType((*x.shape[:2], 1, 1), canonical_dtype(attrs["dtype"]))


def global_avg_pool_int8_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """onnxruntime's QLinearGlobalAveragePool: per plane the exact sum minus zx * HW, times
    ``scale`` (float32), clamped to the output range less zy, rounded half to even, + zy."""
    x = np.asarray(xs[0], np.int64)
    hw = int(x.shape[2] * x.shape[3])
    dtype = canonical_dtype(attrs["dtype"])
    lo, hi = quant_range(dtype)
    zy = int(attrs["y_zero_point"])
    acc = x.sum(axis=(2, 3), keepdims=True) - int(attrs["x_zero_point"]) * hw
    v = acc.astype(np.float32) * np.float32(attrs["scale"])
    v = np.minimum(np.maximum(v, np.float32(lo - zy)), np.float32(hi - zy))
    return (np.rint(v).astype(np.int32) + zy).astype(np_dtype(dtype))


register_op(
    OpDef(
        "quantized_global_avg_pool_int8",
        1,
        _global_avg_pool_int8_type,
        global_avg_pool_int8_ref,
        OpPattern.OPAQUE,
        {
            "scale": Attr("float", doc="x scale / (y scale * H * W), float32"),
            "x_zero_point": Attr("int", 0, "zero point of the data"),
            "y_zero_point": Attr("int", 0, "zero point of the output"),
            "dtype": Attr("dtype", doc="the output's dtype (int8 or uint8)"),
        },
        doc="quantize(global_avg_pool(dequantize(x))) of 8-bit NCHW data on integer sums, "
        "onnxruntime's QLinearGlobalAveragePool (fuse_qdq)",
    )
)
