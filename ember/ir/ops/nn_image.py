"""Image ops: image.resize (N-d nearest / linear / cubic, every ONNX coordinate mode),
nn.depth_to_space and nn.space_to_depth.

``image.resize`` is separable: each resized axis is resampled on its own by gathering
``taps`` neighbours with per-output weights (1 tap for nearest, 2 for linear, 4 for cubic).
``scales`` are the ONNX scale factors; when they are given, ONNX measures the resized
length as ``in * scale`` (unrounded, as align_corners and tf_crop_and_resize see it); when
empty, the scale is ``out / in``. ``roi`` is only read by ``tf_crop_and_resize``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import tensor_arg, widen
from ember.ir.types import TensorType, Type
from ember.support.dtypes import is_float

#: coordinate_transformation_mode values image.resize understands.
COORD_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nn",
    "tf_crop_and_resize",
)
#: nearest_mode values image.resize understands.
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
#: interpolation methods image.resize understands.
METHODS = ("nearest", "linear", "cubic")


def _resize_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    sizes = tuple(attrs["sizes"])
    scales = tuple(attrs["scales"])
    roi = tuple(attrs["roi"])
    if len(sizes) != data.ndim or any(s < 1 for s in sizes):
        raise IRError(f"sizes {list(sizes)} must give one positive size per axis of {data}")
    if scales and len(scales) != data.ndim:
        raise IRError(f"scales {list(scales)} must give one scale per axis of {data}")
    if roi and len(roi) != 2 * data.ndim:
        raise IRError(f"roi {list(roi)} must hold {2 * data.ndim} values (starts then ends)")
    for name, value, known in (
        ("method", attrs["method"], METHODS),
        ("coordinate_transformation_mode", attrs["coordinate_transformation_mode"], COORD_MODES),
        ("nearest_mode", attrs["nearest_mode"], NEAREST_MODES),
    ):
        if value not in known:
            raise IRError(f"unknown {name} {value!r}; known: {', '.join(known)}")
    if attrs["method"] != "nearest" and not is_float(data.dtype):
        raise IRError(f"{attrs['method']} resize needs a floating point tensor, got {data.dtype}")
    return TensorType(sizes, data.dtype)


def _source_coords(axis: int, n_in: int, n_out: int, attrs: Attrs) -> np.ndarray:
    """The input coordinate each output index of ``axis`` samples, computed in float32
    with onnxruntime's formulas so that nearest rounding ties break the same way."""
    f32 = np.float32
    scales = attrs["scales"]
    scale = f32(scales[axis]) if scales else f32(n_out) / f32(n_in)
    # ONNX measures the resized length as in * scale when scales are given (not rounded).
    length = f32(n_in) * scale if scales else f32(n_out)
    mode = attrs["coordinate_transformation_mode"]
    xr = np.arange(n_out, dtype=f32)
    half = f32(0.5)
    if mode == "half_pixel":
        return (xr + half) / scale - half
    if mode == "half_pixel_symmetric":
        adjustment = f32(n_out) / (scale * f32(n_in))
        offset = f32(n_in) / f32(2) * (f32(1) - adjustment)
        return offset + (xr + half) / scale - half
    if mode == "pytorch_half_pixel":
        return (xr + half) / scale - half if n_out > 1 else np.zeros_like(xr)
    if mode == "align_corners":
        if length == 1:
            return np.zeros_like(xr)
        return xr * f32(n_in - 1) / (length - f32(1))
    if mode == "asymmetric":
        return xr / scale
    if mode == "tf_half_pixel_for_nn":
        return (xr + half) / scale
    rank = len(attrs["sizes"])
    roi = attrs["roi"] or (0.0,) * rank + (1.0,) * rank
    start, end = f32(roi[axis]), f32(roi[axis + rank])
    if length != 1:
        return start * f32(n_in - 1) + xr * (end - start) * f32(n_in - 1) / (length - f32(1))
    return np.full_like(xr, half * (start + end) * f32(n_in - 1))


def _nearest_index(x: np.ndarray, mode: str) -> np.ndarray:
    if mode == "round_prefer_floor":
        idx = np.ceil(x - 0.5)
    elif mode == "round_prefer_ceil":
        idx = np.floor(x + 0.5)
    elif mode == "floor":
        idx = np.floor(x)
    else:
        idx = np.ceil(x)
    return idx.astype(np.int64)


def _cubic_weights(t: np.ndarray, a: float) -> list[np.ndarray]:
    """Keys cubic convolution weights of the taps at floor-1, floor, floor+1, floor+2."""
    d = [t + 1.0, t, 1.0 - t, 2.0 - t]
    near = [((a + 2.0) * s - (a + 3.0)) * s * s + 1.0 for s in d[1:3]]
    far = [((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a for s in (d[0], d[3])]
    return [far[0], near[0], near[1], far[1]]


def _taps(
    coords: np.ndarray, n_in: int, scale: float, attrs: Attrs
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per tap: the input index (clamped) and weight of every output position."""
    method = attrs["method"]
    if method == "nearest":
        idx = _nearest_index(coords, attrs["nearest_mode"])
        return [np.clip(idx, 0, n_in - 1)], [np.ones_like(coords)]
    if attrs["antialias"]:
        return _antialias_taps(coords, n_in, scale, attrs)
    if method == "linear":
        # ONNX clamps the sampling coordinate itself for linear resizing.
        coords = np.clip(coords, 0, n_in - 1)
    base = np.floor(coords)
    t = coords - base
    base_i = base.astype(np.int64)
    if method == "linear":
        offsets, weights = [0, 1], [1.0 - t, t]
    else:
        offsets, weights = [-1, 0, 1, 2], _cubic_weights(t, attrs["cubic_coeff_a"])
    raw = [base_i + o for o in offsets]
    if method == "cubic" and attrs["exclude_outside"]:
        weights = [np.where((r >= 0) & (r < n_in), w, 0.0) for r, w in zip(raw, weights)]
        total = np.sum(weights, axis=0)
        weights = [w / total for w in weights]
    return [np.clip(r, 0, n_in - 1) for r in raw], weights


def _antialias_taps(
    coords: np.ndarray, n_in: int, scale: float, attrs: Attrs
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Taps of an antialiased (filter widened by 1/scale when downsampling) linear or
    cubic resize, normalised to sum 1, as the ONNX reference defines them."""
    scale = min(float(scale), 1.0)
    coords = coords.astype(np.float64)
    base = np.ceil(coords) - 1  # the tap left of x; ratio = x - base lies in (0, 1]
    ratio = coords - base
    a = attrs["cubic_coeff_a"]
    reach = 1.0 if attrs["method"] == "linear" else 2.0
    start = int(np.floor(-reach / scale) + 1)
    raw, weights = [], []
    for k in range(start, 2 - start):
        arg = np.abs((k - ratio) * scale)
        if attrs["method"] == "linear":
            w = np.clip(1.0 - arg, 0.0, 1.0)
        else:
            near = ((a + 2) * arg - (a + 3)) * arg * arg + 1
            far = ((a * arg - 5 * a) * arg + 8 * a) * arg - 4 * a
            w = np.where(arg <= 1, near, np.where(arg < 2, far, 0.0))
        raw.append(base.astype(np.int64) + k)
        weights.append(w)
    if attrs["exclude_outside"]:
        weights = [np.where((r >= 0) & (r < n_in), w, 0.0) for r, w in zip(raw, weights)]
    total = np.sum(weights, axis=0)
    total = np.where(total == 0, 1.0, total)
    return [np.clip(r, 0, n_in - 1) for r in raw], [w / total for w in weights]


def _resize_axis(x: np.ndarray, axis: int, n_out: int, attrs: Attrs) -> np.ndarray:
    n_in = x.shape[axis]
    coords = _source_coords(axis, n_in, n_out, attrs)
    scales = attrs["scales"]
    scale = float(np.float32(scales[axis])) if scales else n_out / n_in
    indices, weights = _taps(coords, n_in, scale, attrs)
    if attrs["method"] == "nearest" and attrs["coordinate_transformation_mode"] != (
        "tf_crop_and_resize"
    ):
        return np.take(x, indices[0], axis=axis)
    shape = [1] * x.ndim
    shape[axis] = n_out
    acc = np.zeros((), dtype=x.dtype)
    for idx, w in zip(indices, weights, strict=True):
        acc = acc + np.take(x, idx, axis=axis) * w.astype(x.dtype).reshape(shape)
    if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        outside = ((coords < 0) | (coords > n_in - 1)).reshape(shape)
        acc = np.where(outside, np.asarray(attrs["extrapolation_value"], x.dtype), acc)
    return acc


def _resize_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    floating = is_float(x.dtype.name)
    y = widen(x) if floating else x
    if attrs["method"] != "nearest" or attrs["coordinate_transformation_mode"] == (
        "tf_crop_and_resize"
    ):
        y = y.astype(np.float64) if not floating else y
    scales = attrs["scales"]
    roi = attrs["roi"]
    for axis, n_out in enumerate(attrs["sizes"]):
        identity_roi = not roi or (roi[axis] == 0.0 and roi[axis + x.ndim] == 1.0)
        same_scale = not scales or scales[axis] == 1.0
        if n_out == x.shape[axis] and same_scale and identity_roi:
            continue
        y = _resize_axis(y, axis, n_out, attrs)
    return np.ascontiguousarray(y).astype(x.dtype, copy=False)


def _block_check(data: TensorType, attrs: Attrs) -> int:
    bs = attrs["block_size"]
    if data.ndim != 4:
        raise IRError(f"data must be a 4-D (N, C, H, W) tensor, got {data}")
    if bs < 1:
        raise IRError(f"block_size must be positive, got {bs}")
    return int(bs)


def _d2s_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    bs = _block_check(data, attrs)
    last = _channels_last(attrs)
    n, c, h, w = (data.shape[0], data.shape[3], *data.shape[1:3]) if last else data.shape
    if c % (bs * bs):
        raise IRError(f"channels {c} of {data} are not divisible by block_size^2 = {bs * bs}")
    if attrs["mode"] not in ("DCR", "CRD"):
        raise IRError(f"unknown depth_to_space mode {attrs['mode']!r}; known: DCR, CRD")
    if last:
        return TensorType((n, h * bs, w * bs, c // (bs * bs)), data.dtype)
    return TensorType((n, c // (bs * bs), h * bs, w * bs), data.dtype)


def _channels_last(attrs: Attrs) -> bool:
    """Whether a depth_to_space's data and result are NHWC (its data_layout attribute)."""
    layout = attrs["data_layout"]
    if layout not in ("NCHW", "NHWC"):
        raise IRError(f"unknown depth_to_space data_layout {layout!r}; known: NCHW, NHWC")
    return layout == "NHWC"


def _d2s_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    if _channels_last(attrs):
        y = _d2s_ref([np.transpose(xs[0], (0, 3, 1, 2))], attrs.replace(data_layout="NCHW"))
        return np.ascontiguousarray(np.transpose(y, (0, 2, 3, 1)))
    x = xs[0]
    bs = attrs["block_size"]
    n, c, h, w = x.shape
    oc = c // (bs * bs)
    if attrs["mode"] == "DCR":
        y = x.reshape(n, bs, bs, oc, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, oc, bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    return np.ascontiguousarray(y.reshape(n, oc, h * bs, w * bs))


def _s2d_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    bs = _block_check(data, attrs)
    n, c, h, w = data.shape
    if h % bs or w % bs:
        raise IRError(f"spatial size ({h}, {w}) of {data} is not divisible by block_size {bs}")
    if attrs["mode"] not in ("DCR", "CRD"):
        raise IRError(f"unknown space_to_depth mode {attrs['mode']!r}; known: DCR, CRD")
    return TensorType((n, c * bs * bs, h // bs, w // bs), data.dtype)


def _s2d_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    bs = attrs["block_size"]
    n, c, h, w = x.shape
    order = (0, 3, 5, 1, 2, 4) if attrs["mode"] == "DCR" else (0, 1, 3, 5, 2, 4)
    y = x.reshape(n, c, h // bs, bs, w // bs, bs).transpose(order)
    return np.ascontiguousarray(y.reshape(n, c * bs * bs, h // bs, w // bs))


register_op(
    OpDef(
        name="image.resize",
        num_inputs=1,
        infer_type=_resize_type,
        reference=_resize_ref,
        pattern=OpPattern.INJECTIVE,
        attrs={
            "sizes": Attr("ints", doc="the full output shape"),
            "scales": Attr("floats", (), "ONNX scale per axis (empty: sizes / input shape)"),
            "roi": Attr("floats", (), "starts then ends, normalised (tf_crop_and_resize)"),
            "method": Attr("str", "nearest", "nearest, linear or cubic"),
            "coordinate_transformation_mode": Attr("str", "half_pixel"),
            "nearest_mode": Attr("str", "round_prefer_floor"),
            "cubic_coeff_a": Attr("float", -0.75),
            "exclude_outside": Attr("bool", False),
            "extrapolation_value": Attr("float", 0.0),
            "antialias": Attr("bool", False, "widen linear/cubic filters when downsampling"),
        },
        doc="N-d resize with ONNX Resize semantics (separable per axis).",
    )
)

register_op(
    OpDef(
        name="nn.depth_to_space",
        num_inputs=1,
        infer_type=_d2s_type,
        reference=_d2s_ref,
        pattern=OpPattern.INJECTIVE,
        attrs={
            "block_size": Attr("int"),
            "mode": Attr("str", "DCR", "DCR or CRD"),
            "data_layout": Attr("str", "NCHW", "NCHW, or NHWC (data, result channels last)"),
        },
        doc="Move channel blocks into spatial blocks (ONNX DepthToSpace).",
    )
)

register_op(
    OpDef(
        name="nn.space_to_depth",
        num_inputs=1,
        infer_type=_s2d_type,
        reference=_s2d_ref,
        pattern=OpPattern.INJECTIVE,
        attrs={"block_size": Attr("int"), "mode": Attr("str", "DCR", "DCR or CRD")},
        doc="Move spatial blocks into channels (ONNX SpaceToDepth).",
    )
)
