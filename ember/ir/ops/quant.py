"""Linear quantization (pattern BROADCAST): ``quantize`` and ``dequantize``.

Both take ``(x, scale, zero_point)`` with ``scale`` and ``zero_point`` already shaped to
broadcast against ``x`` (the ONNX importer turns per-axis and blocked parameters into such
shapes). The arithmetic is the ONNX spec's and onnxruntime's, in float32:

* ``quantize``: ``y = saturate(rint(x / scale) + zero_point)``, rounding half to even and
  saturating to the range of ``dtype`` (int8, uint8, int16, uint16, int32).
* ``dequantize``: ``y = float(x - zero_point) * scale``, the difference taken in int32
  (exact for every integer input type), the result in the dtype of ``scale``.

A requantization (int32 accumulator to int8/uint8) is ``quantize(multiply(cast(acc,
float32), m), 1, zero_point)`` with ``m = s_x * s_w / s_y`` computed in float32: the same
float multiply, round-half-even and saturation as onnxruntime's ``MlasRequantizeOutput``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, get_op, register_op
from ember.ir.ops.common import (
    FLOAT_DTYPES,
    broadcast_shapes,
    check_dtype,
    np_dtype,
    padding,
    spatial,
)
from ember.ir.ops.nn_conv import conv_reference, unpack_conv_weight
from ember.ir.types import TensorType, Type, canonical_dtype

#: the integer types quantize can produce (and dequantize read, int32 included).
QUANT_DTYPES: frozenset[str] = frozenset({"int8", "uint8", "int16", "uint16"})
DEQUANT_DTYPES: frozenset[str] = QUANT_DTYPES | {"int32"}


def quant_range(dtype: str) -> tuple[int, int]:
    """The smallest and largest value of the integer ``dtype``."""
    info = np.iinfo(np_dtype(dtype))
    return int(info.min), int(info.max)


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
    if dtype not in QUANT_DTYPES:
        raise IRError(
            f"'quantize' to {dtype} is not supported; use one of {', '.join(sorted(QUANT_DTYPES))}"
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


def _quantized_add_type(types: Sequence[Type], attrs: Attrs) -> Type:
    a = check_dtype(types[0], QUANT_DTYPES, "lhs of 'quantized_add'")
    b = check_dtype(types[1], QUANT_DTYPES, "rhs of 'quantized_add'")
    dtype = canonical_dtype(attrs["dtype"])
    if dtype not in QUANT_DTYPES:
        raise IRError(f"'quantized_add' to {dtype} is not supported")
    return TensorType(broadcast_shapes(a.shape, b.shape, what="quantized_add"), dtype)


def quantized_add_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """saturate(rint(fma(a, ratio_a, fma(b, ratio_b, fixed)))), each fma rounded once to
    float32 (computed exactly in float64, then rounded)."""
    a, b = (np.asarray(x, np.float64) for x in xs)
    inner = (b * np.float64(np.float32(attrs["ratio_b"])) + attrs["fixed"]).astype(np.float32)
    total = (a * np.float64(np.float32(attrs["ratio_a"])) + inner).astype(np.float32)
    lo, hi = quant_range(canonical_dtype(attrs["dtype"]))
    return np.clip(np.rint(total), lo, hi).astype(np_dtype(canonical_dtype(attrs["dtype"])))


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
register_op(
    OpDef(
        "quantized_add",
        2,
        _quantized_add_type,
        quantized_add_ref,
        OpPattern.BROADCAST,
        {
            "ratio_a": Attr("float", doc="scale of a / scale of the output (float32)"),
            "ratio_b": Attr("float", doc="scale of b / scale of the output (float32)"),
            "fixed": Attr("float", doc="zc - (ratio_a * za + ratio_b * zb), float32"),
            "dtype": Attr("dtype", doc="the output's quantized dtype"),
        },
        doc="onnxruntime's QLinearAdd of two quantized tensors (two fused multiply-adds)",
    )
)
register_op(
    OpDef(
        "quantize",
        3,
        _quantize_type,
        quantize_ref,
        OpPattern.BROADCAST,
        {"dtype": Attr("dtype", doc="the quantized dtype (int8, uint8, int16, uint16)")},
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
