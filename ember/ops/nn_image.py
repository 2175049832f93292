"""Image ops: image.resize (nearest, linear, cubic; every coordinate transformation mode of
the reference), nn.depth_to_space and nn.space_to_depth. All are injective: one compute
each, inlined into their consumers.

Resize follows the numpy reference axis by axis: each resized axis maps an output index to
a float32 source coordinate with the same formula (same operation order, constants
rounded to float32 the same way, so nearest-neighbour ties break alike), then to taps
(input index, weight). A weighted (linear, cubic) resize of several axes interpolates one
axis at a time, as the reference does (:data:`SEPARABLE`); otherwise the output element is
the sum over the taps of all resized axes of the product of their weights times the input
element.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from ember import tir
from ember.errors import CompileError
from ember.ir.op import Attrs
from ember.ir.types import Type
from ember.ops.common import out_tensor_type, static_shape
from ember.ops.nn_common import check_dtype, prod_expr, sum_expr
from ember.ops.nn_schedule import MATERIALIZE
from ember.ops.registry import register_compute
from ember.tir import PrimExpr, te
from ember.tir import dtype as dt

F32 = "float32"
#: (input index, weight or None for 1) of one tap along one axis.
Tap = tuple[PrimExpr, PrimExpr | None]


def _f(value: Any) -> PrimExpr:
    """A float32 constant holding exactly the float32 rounding of ``value``."""
    return tir.const(float(np.float32(value)), F32)


class _Axis:
    """The source coordinate and taps of one resized axis."""

    def __init__(self, axis: int, n_in: int, n_out: int, attrs: Attrs) -> None:
        self.axis, self.n_in, self.n_out, self.attrs = axis, n_in, n_out, attrs
        scales = attrs["scales"]
        self.scale = np.float32(scales[axis]) if scales else np.float32(n_out) / np.float32(n_in)
        # ONNX measures the resized length as in * scale when scales are given (unrounded).
        self.length = np.float32(n_in) * self.scale if scales else np.float32(n_out)
        # the filter scale of antialiased taps (float64 like the reference)
        self.tap_scale = float(np.float32(scales[axis])) if scales else n_out / n_in

    def coord(self, o: PrimExpr) -> PrimExpr:
        """The float32 input coordinate sampled by output index ``o``."""
        mode = self.attrs["coordinate_transformation_mode"]
        x = o.astype(F32)
        n_in, n_out, scale = self.n_in, self.n_out, self.scale
        half = _f(0.5)
        if mode == "half_pixel" or (mode == "pytorch_half_pixel" and n_out > 1):
            return (x + half) / _f(scale) - half
        if mode == "pytorch_half_pixel" or (mode == "align_corners" and self.length == 1):
            return _f(0.0)
        if mode == "half_pixel_symmetric":
            adjustment = np.float32(n_out) / (scale * np.float32(n_in))
            offset = np.float32(n_in) / np.float32(2) * (np.float32(1) - adjustment)
            return (_f(offset) + (x + half) / _f(scale)) - half
        if mode == "align_corners":
            return x * _f(n_in - 1) / _f(self.length - np.float32(1))
        if mode == "asymmetric":
            return x / _f(scale)
        if mode == "tf_half_pixel_for_nn":
            return (x + half) / _f(scale)
        rank = len(self.attrs["sizes"])
        roi = self.attrs["roi"] or (0.0,) * rank + (1.0,) * rank
        start, end = np.float32(roi[self.axis]), np.float32(roi[self.axis + rank])
        if self.length != 1:
            step = x * _f(end - start) * _f(n_in - 1) / _f(self.length - np.float32(1))
            return _f(start * np.float32(n_in - 1)) + step
        return _f(np.float32(0.5) * (start + end) * np.float32(n_in - 1))

    def integer_factor(self) -> int:
        """k when this is a nearest-neighbour upsampling by an integer k whose float32 source
        indices (computed here in numpy as the generated code would) are exactly ``o // k``
        for every output index ``o``; else 0. FPN-style x2/x4/x8 upsampling then indexes
        with a shift instead of a float division, a rounding and a clamp per element."""
        attrs = self.attrs
        mode = attrs["coordinate_transformation_mode"]
        if attrs["method"] != "nearest" or self.n_out % self.n_in:
            return 0
        x = np.arange(self.n_out, dtype=np.float32)
        half, scale = np.float32(0.5), self.scale
        if mode == "half_pixel" or (mode == "pytorch_half_pixel" and self.n_out > 1):
            c = (x + half) / scale - half
        elif mode == "asymmetric":
            c = x / scale
        elif mode == "tf_half_pixel_for_nn":
            c = (x + half) / scale
        else:
            return 0
        c = c.astype(np.float32)
        rounded = {
            "round_prefer_floor": np.ceil(c - half),
            "round_prefer_ceil": np.floor(c + half),
            "floor": np.floor(c),
        }.get(attrs["nearest_mode"], np.ceil(c))
        idx = np.clip(rounded.astype(np.int64), 0, self.n_in - 1)
        k = self.n_out // self.n_in
        return k if np.array_equal(idx, np.arange(self.n_out) // k) else 0

    def clamp(self, i: PrimExpr) -> PrimExpr:
        """An int32 index clamped into the axis."""
        return tir.min(tir.max(i, 0), self.n_in - 1)

    def taps(self, o: PrimExpr) -> tuple[list[Tap], PrimExpr | None]:
        """The taps of output index ``o`` and, for tf_crop_and_resize, its outside test."""
        attrs = self.attrs
        c = self.coord(o)
        outside = None
        if attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
            outside = tir.logical_or(c < _f(0.0), c > _f(self.n_in - 1))
        method = attrs["method"]
        factor = self.integer_factor()
        if factor:  # o // factor: the same indices without float math per element
            return [(o // factor if factor > 1 else o, None)], None
        if method == "nearest":
            return [(self.clamp(_nearest(c, attrs["nearest_mode"])), None)], outside
        if method == "linear":
            c = tir.min(tir.max(c, _f(0.0)), _f(self.n_in - 1))
            base = tir.floor(c)
            t = c - base
            i0 = base.astype("int32")
            return [(i0, _f(1.0) - t), (self.clamp(i0 + 1), t)], outside
        base = tir.floor(c)
        t = c - base
        i0 = base.astype("int32")
        weights = _cubic_weights(t, float(attrs["cubic_coeff_a"]))
        raw = [i0 + k for k in (-1, 0, 1, 2)]
        if attrs["exclude_outside"]:
            weights = [
                tir.if_then_else(tir.logical_and(r >= 0, r < self.n_in), w, _f(0.0))
                for r, w in zip(raw, weights, strict=True)
            ]
            total = sum_expr(weights)
            assert total is not None
            weights = [w / total for w in weights]
        return [(self.clamp(r), w) for r, w in zip(raw, weights, strict=True)], outside

    def antialias_range(self) -> tuple[int, int]:
        """(first tap offset, number of taps) of the antialiased filter."""
        scale = min(self.tap_scale, 1.0)
        reach = 1.0 if self.attrs["method"] == "linear" else 2.0
        start = int(np.floor(-reach / scale) + 1)
        return start, 2 - 2 * start

    def antialias_tap(self, o: PrimExpr, k: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
        """The (clamped index, unnormalised float64 weight) of tap offset ``k`` (an int
        expression) of output ``o``: the filter widened by 1/scale when downsampling."""
        attrs = self.attrs
        scale = min(self.tap_scale, 1.0)
        c = self.coord(o).astype("float64")
        base = tir.ceil(c) - tir.const(1.0, "float64")
        ratio = c - base
        a = float(attrs["cubic_coeff_a"])
        arg = tir.abs((k.astype("float64") - ratio) * scale)
        zero = tir.const(0.0, "float64")
        if attrs["method"] == "linear":
            w = tir.min(tir.max(1.0 - arg, 0.0), 1.0)
        else:
            near = ((a + 2) * arg - (a + 3)) * arg * arg + 1.0
            far = ((a * arg - 5 * a) * arg + 8 * a) * arg - 4 * a
            w = tir.if_then_else(arg <= 1.0, near, tir.if_then_else(arg < 2.0, far, zero))
        r = base.astype("int32") + k
        if attrs["exclude_outside"]:
            w = tir.if_then_else(tir.logical_and(r >= 0, r < self.n_in), w, zero)
        return self.clamp(r), w


def _nearest(c: PrimExpr, mode: str) -> PrimExpr:
    if mode == "round_prefer_floor":
        idx = tir.ceil(c - _f(0.5))
    elif mode == "round_prefer_ceil":
        idx = tir.floor(c + _f(0.5))
    elif mode == "floor":
        idx = tir.floor(c)
    else:
        idx = tir.ceil(c)
    return idx.astype("int32")


def _cubic_weights(t: PrimExpr, a: float) -> list[PrimExpr]:
    """Keys cubic convolution weights of the taps at floor-1, floor, floor+1, floor+2."""
    one, two = _f(1.0), _f(2.0)
    d = [t + one, t, one - t, two - t]
    fa = _f(a)
    near = [((_f(a + 2.0) * s - _f(a + 3.0)) * s * s + one) for s in d[1:3]]
    far = [(((fa * s - _f(5.0 * a)) * s + _f(8.0 * a)) * s - _f(4.0 * a)) for s in (d[0], d[3])]
    return [far[0], near[0], near[1], far[1]]


def _is_identity(axis: int, n_in: int, n_out: int, attrs: Attrs, rank: int) -> bool:
    scales, roi = attrs["scales"], attrs["roi"]
    identity_roi = not roi or (roi[axis] == 0.0 and roi[axis + rank] == 1.0)
    same_scale = not scales or scales[axis] == 1.0
    return n_out == n_in and same_scale and identity_roi


@register_compute("image.resize")
def resize(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """ONNX Resize as one injective compute (see the module docstring)."""
    x = inputs[0]
    check_dtype("image.resize", x.dtype)
    ty = out_tensor_type(out_type)
    shape = static_shape(x)
    rank = len(shape)
    axes = [
        _Axis(k, shape[k], int(ty.shape[k]), attrs)
        for k in range(rank)
        if not _is_identity(k, shape[k], int(ty.shape[k]), attrs, rank)
    ]
    weighted = attrs["method"] != "nearest"
    if weighted and not dt.is_float(x.dtype):
        raise CompileError(f"image.resize: {attrs['method']} mode needs float data, got {x.dtype}")
    if weighted and attrs.get("antialias", False):
        return _antialias_resize(x, axes, attrs, ty.shape)

    tables = [_tap_tables(ax) for ax in axes]
    if SEPARABLE and weighted and len(axes) > 1 and all(t(tir.const(0, "int32"))[1] is None
                                                        for t in tables):  # fmt: skip
        return _separable_resize(x, axes, tables, ty.shape)

    def body(*i: Any) -> PrimExpr:
        per_axis = [look(i[ax.axis]) for ax, look in zip(axes, tables, strict=True)]
        terms = []
        for combo in itertools.product(*(taps for taps, _ in per_axis)):
            index = list(i)
            for ax, (idx, _) in zip(axes, combo, strict=True):
                index[ax.axis] = idx
            value = x[tuple(index)]
            weight = prod_expr([w.astype(x.dtype) for _, w in combo if w is not None])
            terms.append(value if weight is None else value * weight)
        total = sum_expr(terms)
        assert total is not None
        if not terms or not any(out is not None for _, out in per_axis):
            return total if terms else x[i]
        outside = tir.logical_or(*(out for _, out in per_axis if out is not None))
        fill = _fill(float(attrs["extrapolation_value"]), x.dtype)
        return tir.if_then_else(outside, fill, total)

    return te.compute(ty.shape, body, "resize")


#: whether a weighted resize of several axes runs one axis at a time (the reference's
#: order), the axis that grows least first and, at equal growth, the innermost: an 8x
#: bilinear upsampling of NCHW data gathers along W over the input rows only (1/8 of the
#: output), then blends whole rows of that (two contiguous loads an element). Reading
#: every output's four corners through computed indices took DeepLabV3's 1x21x32x32 ->
#: 256x256 logits 6.9 ms in its int8 form (byte gathers have no vector form), now 0.52
#: (float32: 2.15 -> 0.61 ms; onnxruntime 1.0).
SEPARABLE = True


def _separable_resize(
    x: te.Tensor,
    axes: list[_Axis],
    tables: list[Callable[[PrimExpr], tuple[list[Tap], PrimExpr | None]]],
    out_shape: tuple[int, ...],
) -> te.Tensor:
    """Weighted resize one axis at a time, each but the last a materialized stage."""
    order = sorted(range(len(axes)), key=lambda k: (axes[k].n_out / axes[k].n_in, -axes[k].axis))
    cur, shape = x, list(static_shape(x))
    for step, k in enumerate(order):
        ax, look = axes[k], tables[k]
        shape[ax.axis] = ax.n_out
        last = step == len(order) - 1

        def body(*i: Any, src: te.Tensor = cur, ax: _Axis = ax, look: Any = look) -> PrimExpr:
            taps, _ = look(i[ax.axis])
            terms = []
            for idx, w in taps:
                index = list(i)
                index[ax.axis] = idx
                value = src[tuple(index)]
                terms.append(value if w is None else value * w.astype(x.dtype))
            total = sum_expr(terms)
            assert total is not None
            return total

        attrs = None if last else {MATERIALIZE: True}
        name = "resize" if last else f"resize_along{ax.axis}"
        cur = te.compute(tuple(shape) if not last else out_shape, body, name, attrs=attrs)
    return cur


#: whether a resized axis reads its taps (source indices, weights, the outside test) from
#: small tables over its output indices, computed once per call, rather than computing them
#: per element: the float coordinate, floor, clamp and int conversion in every element's
#: index kept gcc from vectorizing the channels loop of a channels-last bilinear resize
#: (data-ref analysis failed): 40x40x64 -> 80x80x64 took 1.23 ms, one thread.
TAP_TABLES = True


def _tap_tables(ax: _Axis) -> Callable[[PrimExpr], tuple[list[Tap], PrimExpr | None]]:
    """``ax.taps`` as lookups into stages of ``ax.n_out`` entries (TAP_TABLES; materialized,
    so computed once per call), or ``ax.taps`` itself (integer nearest factors: a division
    is no dearer than a load)."""
    if not TAP_TABLES or ax.integer_factor():
        return ax.taps
    taps, outside = ax.taps(tir.Var("o", "int32"))  # which parts there are
    shape = (ax.n_out,)
    attrs = {MATERIALIZE: True}
    name = f"resize_axis{ax.axis}"

    def table(suffix: str, pick: Callable[[list[Tap], PrimExpr | None], Any]) -> te.Tensor:
        return te.compute(shape, _tap_field(ax, pick), f"{name}_{suffix}", attrs=attrs)

    tables: list[tuple[te.Tensor, te.Tensor | None]] = []
    for k, (_, weight) in enumerate(taps):
        idx = table(f"index{k}", _tap_part(k, 0))
        w = None if weight is None else table(f"weight{k}", _tap_part(k, 1))
        tables.append((idx, w))
    one, zero = tir.const(1, "int32"), tir.const(0, "int32")

    def flag(_: list[Tap], c: PrimExpr | None) -> PrimExpr | None:
        return None if c is None else tir.if_then_else(c, one, zero)

    out = None if outside is None else table("outside", flag)

    def look(o: PrimExpr) -> tuple[list[Tap], PrimExpr | None]:
        found: list[Tap] = [(t[o], None if w is None else w[o]) for t, w in tables]
        return found, None if out is None else out[o] > zero

    return look


def _tap_part(k: int, part: int) -> Callable[[list[Tap], PrimExpr | None], PrimExpr | None]:
    """The picker of tap ``k``'s index (part 0) or weight (1), for _tap_field."""
    return lambda taps, _: taps[k][part]


def _tap_field(
    ax: _Axis, pick: Callable[[list[Tap], PrimExpr | None], Any]
) -> Callable[[PrimExpr], PrimExpr]:
    """The function of an output index giving ``pick`` of its taps and outside test."""

    def fn(o: PrimExpr) -> PrimExpr:
        value = pick(*ax.taps(o))
        assert value is not None
        return value

    return fn


def _antialias_resize(
    x: te.Tensor, axes: list[_Axis], attrs: Attrs, out_shape: tuple[int, ...]
) -> te.Tensor:
    """Antialiased resize, one axis at a time like the reference."""
    cur = x
    for ax in axes:
        cur = _antialias_axis(cur, ax, attrs, x.dtype)
    if cur is x:
        return te.compute(out_shape, lambda *i: x[i], "resize")
    return cur


def _antialias_axis(prev: te.Tensor, ax: _Axis, attrs: Attrs, dtype: str) -> te.Tensor:
    """One axis: a small table of filter sums (the normaliser), then a reduction over the
    (many) taps; tf_crop_and_resize then fills the outside positions."""
    start, count = ax.antialias_range()
    rt = te.reduce_axis(count, f"t{ax.axis}")

    def norm(o: Any) -> PrimExpr:
        return te.sum(ax.antialias_tap(o, rt.var + start)[1], axis=rt)

    total = te.compute((ax.n_out,), norm, f"resize_norm{ax.axis}")
    shape = list(static_shape(prev))
    shape[ax.axis] = ax.n_out
    rk = te.reduce_axis(count, f"k{ax.axis}")

    def body(*i: Any) -> PrimExpr:
        o = i[ax.axis]
        idx, w = ax.antialias_tap(o, rk.var + start)
        t = total[o]
        t = tir.if_then_else(tir.eq(t, 0.0), tir.const(1.0, "float64"), t)
        src = list(i)
        src[ax.axis] = idx
        return te.sum(prev[tuple(src)] * (w / t).astype(dtype), axis=rk)

    y = te.compute(tuple(shape), body, f"resize_aa{ax.axis}")
    if attrs["coordinate_transformation_mode"] != "tf_crop_and_resize":
        return y
    fill = _fill(float(attrs["extrapolation_value"]), dtype)

    def extrapolate(*i: Any) -> PrimExpr:
        c = ax.coord(i[ax.axis])
        outside = tir.logical_or(c < _f(0.0), c > _f(ax.n_in - 1))
        return tir.if_then_else(outside, fill, y[i])

    return te.compute(tuple(shape), extrapolate, f"resize_crop{ax.axis}")


def _fill(value: float, dtype: str) -> PrimExpr:
    if dt.is_float(dtype):
        return tir.const(value, dtype)
    return tir.const(int(np.float64(value).astype(np.dtype(dtype)).item()), dtype)


def _block_compute(
    x: te.Tensor, out_shape: tuple[int, ...], source: Callable[..., tuple[Any, ...]], name: str
) -> te.Tensor:
    return te.compute(out_shape, lambda n, c, h, w: x[source(n, c, h, w)], name)


@register_compute("nn.depth_to_space")
def depth_to_space(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Channel blocks to spatial blocks (DCR: depth-column-row, CRD: column-row-depth)."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    bs = int(attrs["block_size"])
    last = attrs["data_layout"] == "NHWC"
    oc = int(ty.shape[3] if last else ty.shape[1])
    dcr = attrs["mode"] == "DCR"

    def channel(c: Any, h: Any, w: Any) -> Any:
        b1, b2 = h % bs, w % bs
        return (b1 * bs + b2) * oc + c if dcr else (c * bs + b1) * bs + b2

    if last:  # DCR: each output pixel copies one contiguous run of oc input channels
        return te.compute(
            ty.shape,
            lambda n, h, w, c: x[n, h // bs, w // bs, channel(c, h, w)],
            "depth_to_space",
        )

    def source(n: Any, c: Any, h: Any, w: Any) -> tuple[Any, ...]:
        return (n, channel(c, h, w), h // bs, w // bs)

    return _block_compute(x, ty.shape, source, "depth_to_space")


@register_compute("nn.space_to_depth")
def space_to_depth(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Spatial blocks to channel blocks (DCR or CRD channel order)."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    bs = int(attrs["block_size"])
    c_in = static_shape(x)[1]
    dcr = attrs["mode"] == "DCR"

    def source(n: Any, c: Any, h: Any, w: Any) -> tuple[Any, ...]:
        if dcr:
            ci, b1, b2 = c % c_in, c // c_in // bs, c // c_in % bs
        else:
            ci, b1, b2 = c // (bs * bs), c // bs % bs, c % bs
        return (n, ci, h * bs + b1, w * bs + b2)

    return _block_compute(x, ty.shape, source, "space_to_depth")
