"""Normalisation ops: nn.batch_norm (inference), nn.instance_norm, nn.group_norm,
nn.layer_norm, nn.lrn, nn.softmax and nn.log_softmax. Half-precision references compute in
float32."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import (
    broadcast_shapes,
    check_data_dtype,
    check_float,
    normalize_axis,
    tensor_arg,
    widen,
)
from ember.ir.types import TensorType, Type
from ember.support.dtypes import is_half


def _per_channel(data: TensorType, types: Sequence[Type], names: Sequence[str], axis: int) -> None:
    """Check that inputs 1.. are 1-D vectors of the length of ``data``'s ``axis``."""
    for i, name in enumerate(names, start=1):
        ty = tensor_arg(types, i, name)
        check_data_dtype(data, ty, name)
        if ty.shape != (data.shape[axis],):
            raise IRError(
                f"{name} must have shape ({data.shape[axis]},) (the size of axis {axis} of "
                f"data {data}), got {ty}"
            )


def _channel_view(v: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = v.shape[0]
    return widen(v).reshape(shape)


def _batch_norm_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    check_float(data, "data")
    axis = normalize_axis(attrs["axis"], data.ndim)
    _per_channel(data, types, ("gamma", "beta", "moving_mean", "moving_var"), axis)
    return data


def _batch_norm_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, gamma, beta, mean, var = xs
    axis = normalize_axis(attrs["axis"], x.ndim)
    scale = _channel_view(gamma, x.ndim, axis) / np.sqrt(
        _channel_view(var, x.ndim, axis) + attrs["epsilon"]
    )
    shift = _channel_view(beta, x.ndim, axis) - _channel_view(mean, x.ndim, axis) * scale
    return (widen(x) * scale + shift).astype(x.dtype, copy=False)


def _instance_norm_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    check_float(data, "data")
    if data.ndim < 3:
        raise IRError(f"instance_norm data must be (N, C, spatial...), got {data}")
    _per_channel(data, types, ("scale", "bias"), 1)
    return data


def _normalize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    xw = widen(x)
    mean = xw.mean(axis=axes, keepdims=True)
    centered = xw - mean
    var = np.mean(centered * centered, axis=axes, keepdims=True)
    return centered / np.sqrt(var + np.asarray(eps, dtype=xw.dtype))


def _instance_norm_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, scale, bias = xs
    y = _normalize(x, tuple(range(2, x.ndim)), attrs["epsilon"])
    y = y * _channel_view(scale, x.ndim, 1) + _channel_view(bias, x.ndim, 1)
    return y.astype(x.dtype, copy=False)


def group_norm_axis(data: TensorType, layout: str) -> int:
    """The channel axis of nn.group_norm's ``data`` in ``layout`` (NCHW: 1, NHWC: last)."""
    if layout not in ("NCHW", "NHWC"):
        raise IRError(f"group_norm data_layout must be NCHW or NHWC, got {layout!r}")
    return 1 if layout == "NCHW" else data.ndim - 1


def _group_norm_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    check_float(data, "data")
    if data.ndim < 3:
        raise IRError(f"group_norm data must be (N, C, spatial...), got {data}")
    axis = group_norm_axis(data, attrs["data_layout"])
    groups, channels = int(attrs["num_groups"]), data.shape[axis]
    if groups < 1 or channels % groups:
        raise IRError(
            f"group_norm: {channels} channels do not split into {groups} groups; "
            "num_groups must divide the channel count"
        )
    _per_channel(data, types, ("scale", "bias"), axis)
    return data


def _group_norm_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, scale, bias = xs
    last = attrs["data_layout"] == "NHWC"
    first = np.moveaxis(x, -1, 1) if last else x
    groups = int(attrs["num_groups"])
    grouped = first.reshape(first.shape[0], groups, -1)
    y = _normalize(grouped, (2,), attrs["epsilon"]).reshape(first.shape)
    y = y * _channel_view(scale, x.ndim, 1) + _channel_view(bias, x.ndim, 1)
    return (np.moveaxis(y, 1, -1) if last else y).astype(x.dtype, copy=False)


def _layer_norm_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    check_float(data, "data")
    axis = normalize_axis(attrs["axis"], data.ndim)
    inner = data.shape[axis:]
    for i, name in enumerate(("scale", "bias")[: len(types) - 1], start=1):
        ty = tensor_arg(types, i, name)
        check_data_dtype(data, ty, name)
        if broadcast_shapes(inner, ty.shape, what=name) != inner:
            raise IRError(
                f"{name} {ty} must broadcast to the normalised shape {list(inner)} "
                f"(axes {axis}.. of data {data})"
            )
    return data


def _layer_norm_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    axis = normalize_axis(attrs["axis"], x.ndim)
    y = _normalize(x, tuple(range(axis, x.ndim)), attrs["epsilon"]) * widen(xs[1])
    if len(xs) > 2:
        y = y + widen(xs[2])
    return y.astype(x.dtype, copy=False)


def _lrn_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    check_float(data, "data")
    normalize_axis(attrs["axis"], data.ndim)
    if attrs["size"] < 1:
        raise IRError(f"lrn size must be positive, got {attrs['size']}")
    return data


def _lrn_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    axis = normalize_axis(attrs["axis"], x.ndim)
    size = attrs["size"]
    sq = np.moveaxis(widen(x), axis, 0) ** 2
    before = (size - 1) // 2
    after = size - 1 - before
    padded = np.pad(sq, [(before, after)] + [(0, 0)] * (sq.ndim - 1))
    csum = np.concatenate([np.zeros_like(padded[:1]), np.cumsum(padded, axis=0)])
    window = csum[size:] - csum[:-size]
    div = (attrs["bias"] + attrs["alpha"] / size * np.moveaxis(window, 0, axis)) ** attrs["beta"]
    return (widen(x) / div).astype(x.dtype, copy=False)


def _softmax_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    check_float(data, "data")
    normalize_axis(attrs["axis"], max(data.ndim, 1))
    return data


def _softmax_rows_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    if data.dtype != "float32" or data.ndim < 1:
        raise IRError(f"softmax_rows takes float32 rows, got {data}")
    width = int(attrs["width"])
    if not 1 <= width <= data.shape[-1]:
        raise IRError(f"softmax_rows width {width} must lie in 1..{data.shape[-1]} ({data})")
    return TensorType((*data.shape[:-1], width), data.dtype)


def _softmax_rows_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = widen(xs[0][..., : int(attrs["width"])])
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(xs[0].dtype)


def _softmax_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    if is_half(x.dtype.name):  # step by step in the narrow type, as onnx's reference and
        shifted = x - x.max(axis=attrs["axis"], keepdims=True)  # ops/narrow_softmax.py do
        e = np.exp(shifted)
        return e / e.sum(axis=attrs["axis"], keepdims=True)
    xw = widen(x)
    shifted = xw - xw.max(axis=attrs["axis"], keepdims=True)
    e = np.exp(shifted)
    return (e / e.sum(axis=attrs["axis"], keepdims=True)).astype(x.dtype, copy=False)


def _log_softmax_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    xw = widen(x)
    shifted = xw - xw.max(axis=attrs["axis"], keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=attrs["axis"], keepdims=True))
    return (shifted - lse).astype(x.dtype, copy=False)


_EPS = {"epsilon": Attr("float", 1e-5, "added to the variance")}

register_op(
    OpDef(
        name="nn.batch_norm",
        num_inputs=5,
        infer_type=_batch_norm_type,
        reference=_batch_norm_ref,
        pattern=OpPattern.BROADCAST,
        attrs={**_EPS, "axis": Attr("int", 1, "the channel axis")},
        doc="Inference batch norm: (x - mean) / sqrt(var + eps) * gamma + beta per channel.",
    )
)

register_op(
    OpDef(
        name="nn.instance_norm",
        num_inputs=3,
        infer_type=_instance_norm_type,
        reference=_instance_norm_ref,
        pattern=OpPattern.OPAQUE,
        attrs=_EPS,
        doc="Normalise each (n, c) plane over its spatial axes, then scale and shift.",
    )
)

register_op(
    OpDef(
        name="nn.group_norm",
        num_inputs=3,
        infer_type=_group_norm_type,
        reference=_group_norm_ref,
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        attrs={
            **_EPS,
            "num_groups": Attr("int", doc="channel groups normalised together"),
            "data_layout": Attr("str", "NCHW", "NCHW, or NHWC (data, result channels last)"),
        },
        doc="Normalise each group of channels over it and the spatial axes, then scale and "
        "shift per channel (ONNX GroupNormalization, opset 21).",
    )
)

register_op(
    OpDef(
        name="nn.layer_norm",
        num_inputs=(2, 3),
        infer_type=_layer_norm_type,
        reference=_layer_norm_ref,
        pattern=OpPattern.OPAQUE,
        attrs={**_EPS, "axis": Attr("int", -1, "normalise over axes axis..rank-1")},
        doc="Normalise over the trailing axes from ``axis``, then scale (and shift).",
    )
)

register_op(
    OpDef(
        name="nn.lrn",
        num_inputs=1,
        infer_type=_lrn_type,
        reference=_lrn_ref,
        pattern=OpPattern.OPAQUE,
        attrs={
            "size": Attr("int", doc="number of channels summed"),
            "alpha": Attr("float", 1e-4),
            "beta": Attr("float", 0.75),
            "bias": Attr("float", 1.0),
            "axis": Attr("int", 1, "the channel axis"),
        },
        doc="Local response normalisation across channels (ONNX LRN).",
    )
)

_AXIS = {"axis": Attr("int", -1, "the axis normalised over")}

register_op(
    OpDef(
        name="nn.softmax",
        num_inputs=1,
        infer_type=_softmax_type,
        reference=_softmax_ref,
        pattern=OpPattern.OPAQUE,
        attrs=_AXIS,
        doc="exp(x) / sum(exp(x)) along ``axis``.",
    )
)

register_op(
    OpDef(
        name="nn.softmax_rows",
        num_inputs=1,
        infer_type=_softmax_rows_type,
        reference=_softmax_rows_ref,
        pattern=OpPattern.OPAQUE,
        attrs={"width": Attr("int", doc="the leading elements of each row normalised")},
        doc="Softmax over the first ``width`` elements of each last-axis row (float32), the "
        "rest of the row ignored: a padded product's scores without their slice (legalized).",
    )
)

register_op(
    OpDef(
        name="nn.log_softmax",
        num_inputs=1,
        infer_type=_softmax_type,
        reference=_log_softmax_ref,
        pattern=OpPattern.OPAQUE,
        attrs=_AXIS,
        doc="x - log(sum(exp(x))) along ``axis``.",
    )
)
