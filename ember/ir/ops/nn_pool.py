"""Pooling ops: nn.max_pool (and its argmax), nn.avg_pool, nn.lp_pool (N-d, padding,
dilation, ceil mode) and the global pools nn.global_max_pool, nn.global_avg_pool, all on
(N, C, *spatial) data.

The output size follows ONNX: ``floor`` (or ``ceil`` with ``ceil_mode``) of
``(in + pad_begin + pad_end - dilated_kernel) / stride + 1``; in ceil mode a last window
that would start inside the end padding is dropped. References loop over the kernel
offsets and combine strided views (each step touches one output-sized array).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import (
    layout_reference,
    layout_rule,
    pad_or_crop,
    padding,
    spatial,
    tensor_arg,
    widen,
)
from ember.ir.types import TensorType, Type

_LAYOUT = {"data_layout": Attr("str", "NCHW", "NCHW, or NHWC (data, result channels last)")}
_POOL_ATTRS = {
    "pool_size": Attr("ints", doc="window size per spatial axis"),
    "strides": Attr("ints", (), "stride per spatial axis (empty: all 1)"),
    "padding": Attr("ints", (), "begin paddings then end paddings (empty: none)"),
    "dilation": Attr("ints", (), "dilation per spatial axis (empty: all 1)"),
    "ceil_mode": Attr("bool", False, "round the output size up instead of down"),
}


class _Geometry:
    """The resolved window geometry of one pool call."""

    def __init__(self, in_shape: Sequence[int], attrs: Attrs) -> None:
        nsp = len(in_shape) - 2
        if nsp < 1:
            raise IRError(f"pool data must be (N, C, spatial...), got shape {list(in_shape)}")
        self.kernel = tuple(attrs["pool_size"])
        if len(self.kernel) != nsp or any(k < 1 for k in self.kernel):
            raise IRError(
                f"pool_size {list(self.kernel)} must hold {nsp} positive sizes "
                f"(one per spatial axis of {list(in_shape)})"
            )
        self.strides = spatial(attrs, "strides", nsp, 1)
        self.dilation = spatial(attrs, "dilation", nsp, 1)
        self.pads = padding(attrs, nsp)
        out = []
        for i in range(nsp):
            size = in_shape[2 + i]
            begin, end = self.pads[i]
            extent = self.dilation[i] * (self.kernel[i] - 1) + 1
            span = size + begin + end - extent
            if span < 0:
                raise IRError(
                    f"spatial axis {i}: padded size {size + begin + end} is smaller than "
                    f"the dilated window {extent}"
                )
            if attrs["ceil_mode"]:
                n = -(-span // self.strides[i]) + 1
                if (n - 1) * self.strides[i] >= size + begin:
                    n -= 1
            else:
                n = span // self.strides[i] + 1
            out.append(n)
        self.out = tuple(out)

    def windows(self, xp: np.ndarray) -> list[np.ndarray]:
        """Strided views of padded data ``xp``, one per kernel offset."""
        views = []
        for offs in itertools.product(*(range(k) for k in self.kernel)):
            index = [slice(None), slice(None)]
            for o, d, s, n in zip(offs, self.dilation, self.strides, self.out, strict=True):
                index.append(slice(o * d, o * d + (n - 1) * s + 1, s))
            views.append(xp[tuple(index)])
        return views

    def padded(self, x: np.ndarray, value: float | int) -> np.ndarray:
        """``x`` padded so that every window (ceil mode included) lies inside it."""
        pads = []
        for i, (begin, _) in enumerate(self.pads):
            need = (self.out[i] - 1) * self.strides[i] + self.dilation[i] * (self.kernel[i] - 1)
            pads.append((begin, need + 1 - begin - x.shape[2 + i]))
        return pad_or_crop(x, pads, value)

    def counts(self, lo: Sequence[int], hi: Sequence[int]) -> np.ndarray:
        """Per output position, how many window taps fall in ``[lo, hi)`` (padded coords)."""
        total = np.ones((), dtype=np.int64)
        for i in range(len(self.kernel)):
            pos = np.arange(self.out[i])[:, None] * self.strides[i]
            pos = pos + np.arange(self.kernel[i])[None, :] * self.dilation[i]
            axis_count = ((pos >= lo[i]) & (pos < hi[i])).sum(axis=1)
            total = np.multiply.outer(total, axis_count)
        return total


def _pool_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    geo = _Geometry(data.shape, attrs)
    return TensorType((*data.shape[:2], *geo.out), data.dtype)


def _lowest(dtype: np.dtype) -> float | int:
    if np.issubdtype(dtype, np.integer):
        return int(np.iinfo(dtype).min)
    return -np.inf


def _max_pool_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    geo = _Geometry(x.shape, attrs)
    views = geo.windows(geo.padded(x, _lowest(x.dtype)))
    y = views[0].copy()
    for v in views[1:]:
        np.maximum(y, v, out=y)
    return y


def _argmax_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    geo = _Geometry(data.shape, attrs)
    if attrs["storage_order"] not in (0, 1):
        raise IRError(
            f"storage_order must be 0 (row major) or 1 (column major), got {attrs['storage_order']}"
        )
    return TensorType((*data.shape[:2], *geo.out), "int64")


def _argmax_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """Flat index (into the whole input) of each window's first maximum (ONNX Indices)."""
    x = xs[0]
    geo = _Geometry(x.shape, attrs)
    views = geo.windows(geo.padded(x, _lowest(x.dtype)))
    best = views[0].copy()
    which = np.zeros(best.shape, dtype=np.int64)
    for k, v in enumerate(views[1:], start=1):
        better = v > best
        best = np.where(better, v, best)
        which = np.where(better, k, which)
    offsets = np.unravel_index(which, geo.kernel)
    nsp = len(geo.kernel)
    spatial_sizes = x.shape[2:]
    positions = []
    for i in range(nsp):
        shape = [1] * (nsp + 2)
        shape[2 + i] = geo.out[i]
        start = np.arange(geo.out[i]).reshape(shape) * geo.strides[i] - geo.pads[i][0]
        positions.append(start + offsets[i] * geo.dilation[i])
    if attrs["storage_order"] == 1:
        flat = np.ravel_multi_index(positions[::-1], spatial_sizes[::-1], mode="clip")
    else:
        flat = np.ravel_multi_index(positions, spatial_sizes, mode="clip")
    plane = int(np.prod(spatial_sizes))
    lead = np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[0], x.shape[1], *(1,) * nsp)
    return (lead * plane + flat).astype(np.int64)


def _avg_pool_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    geo = _Geometry(x.shape, attrs)
    views = geo.windows(geo.padded(widen(x), 0))
    acc = views[0].copy()
    for v in views[1:]:
        acc += v
    sizes = x.shape[2:]
    if attrs["count_include_pad"]:
        lo = [0] * len(sizes)
        hi = [s + b + e for s, (b, e) in zip(sizes, geo.pads, strict=True)]
    else:
        lo = [b for b, _ in geo.pads]
        hi = [s + b for s, (b, _) in zip(sizes, geo.pads, strict=True)]
    count = geo.counts(lo, hi)
    return (acc / np.maximum(count, 1).astype(acc.dtype)).astype(x.dtype, copy=False)


def _lp_pool_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    p = attrs["p"]
    geo = _Geometry(x.shape, attrs)
    views = geo.windows(geo.padded(np.abs(widen(x)) ** p, 0))
    acc = views[0].copy()
    for v in views[1:]:
        acc += v
    return (acc ** (1.0 / p)).astype(x.dtype, copy=False)


def _global_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    if data.ndim < 3:
        raise IRError(f"global pool data must be (N, C, spatial...), got {data}")
    return TensorType((*data.shape[:2], *(1,) * (data.ndim - 2)), data.dtype)


def _global_axes(x: np.ndarray) -> tuple[int, ...]:
    return tuple(range(2, x.ndim))


def _global_avg_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    return widen(x).mean(axis=_global_axes(x), keepdims=True).astype(x.dtype, copy=False)


def _global_max_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    return x.max(axis=_global_axes(x), keepdims=True)


register_op(
    OpDef(
        name="nn.max_pool",
        num_inputs=1,
        infer_type=layout_rule(_pool_type),
        reference=layout_reference(_max_pool_ref),
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        attrs={**_POOL_ATTRS, **_LAYOUT},
        doc="N-d max pooling; padding never wins the max.",
    )
)

register_op(
    OpDef(
        name="nn.max_pool_argmax",
        num_inputs=1,
        infer_type=_argmax_type,
        reference=_argmax_ref,
        pattern=OpPattern.OPAQUE,
        attrs={**_POOL_ATTRS, "storage_order": Attr("int", 0, "0: row major, 1: column major")},
        doc="Flat input index of each nn.max_pool window's maximum (ONNX MaxPool Indices).",
    )
)

register_op(
    OpDef(
        name="nn.avg_pool",
        num_inputs=1,
        infer_type=layout_rule(_pool_type),
        reference=layout_reference(_avg_pool_ref),
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        attrs={
            **_POOL_ATTRS,
            **_LAYOUT,
            "count_include_pad": Attr("bool", False, "divide by taps incl. explicit padding"),
        },
        doc="N-d average pooling over the taps inside the input (or the padding too).",
    )
)

register_op(
    OpDef(
        name="nn.lp_pool",
        num_inputs=1,
        infer_type=_pool_type,
        reference=_lp_pool_ref,
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        attrs={**_POOL_ATTRS, "p": Attr("float", 2.0, "the norm's exponent")},
        doc="N-d Lp pooling: (sum over the window of |x|^p)^(1/p), zero padding.",
    )
)

register_op(
    OpDef(
        name="nn.global_avg_pool",
        num_inputs=1,
        infer_type=layout_rule(_global_type),
        reference=layout_reference(_global_avg_ref),
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        attrs=_LAYOUT,
        doc="Mean over all spatial axes, kept as size-1 axes.",
    )
)

register_op(
    OpDef(
        name="nn.global_max_pool",
        num_inputs=1,
        infer_type=layout_rule(_global_type),
        reference=layout_reference(_global_max_ref),
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        attrs=_LAYOUT,
        doc="Max over all spatial axes, kept as size-1 axes.",
    )
)
