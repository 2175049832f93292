"""Pools: nn.max_pool, nn.avg_pool (N-d, padding, dilation, ceil mode, count_include_pad)
and the global pools, on (N, C, *spatial) data, or (N, *spatial, C) with data_layout "NHWC"
(the convert_layout pass: the channels are then the vector lanes).

A window tap outside the input reads the reduction's identity through an inlined bounds
check (no padded buffer), except in padded pools over (N, C, *spatial) data: their windows
slide along the contiguous last axis, whose conditional strided reads gcc vectorizes as
masked gathers (a 3x3 stride-2 max pool of 1x64x112x112 took 728 us, onnxruntime 110),
so they read a materialized copy of the input with its padding (pad_input). The average
divides by the number of taps inside the counted
region, a closed-form integer expression of the output index, so no count tensor exists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember import tir
from ember.ir.op import Attrs
from ember.ir.ops.common import data_layout, padding, spatial
from ember.ir.types import Type
from ember.ops.common import out_tensor_type, scalar, static_shape
from ember.ops.nn_common import ceil_div, check_dtype, lowest, prod_expr, product
from ember.ops.nn_schedule import MATERIALIZE, schedule_anchor
from ember.ops.registry import register_compute, register_schedule
from ember.tir import PrimExpr, te

#: whether padded channels-first pools read a padded copy (_Window.pad_input). A/B in one
#: process, one thread (thread CPU time) and two: inception_v1 0.96x and 0.96x the time,
#: yolo, densenet121 and squeezenet within 1.6%, outputs bitwise equal.
PAD_COPY = True


class _Window:
    """The window geometry of one pool call (static ints)."""

    def __init__(self, x: te.Tensor, attrs: Attrs, out_shape: tuple[int, ...]) -> None:
        #: data_layout "NHWC": data and result channels last (in_shape, out kept NCHW-ordered)
        self.last = data_layout(attrs) == "NHWC"
        self.in_shape = _first(static_shape(x), self.last)
        nsp = len(self.in_shape) - 2
        self.nsp = nsp
        self.kernel = tuple(int(k) for k in attrs["pool_size"])
        self.strides = spatial(attrs, "strides", nsp, 1)
        self.dilation = spatial(attrs, "dilation", nsp, 1)
        self.pads = padding(attrs, nsp)
        self.out = _first(out_shape, self.last)[2:]
        self.axes = [te.reduce_axis(self.kernel[k], f"rk{k}") for k in range(nsp)]
        #: the input copy with its padding (pad_input), read by ``tap`` without conditions
        self.padded_input: te.Tensor | None = None

    def _final_tap(self, k: int) -> int:
        """The padded position of the last tap of the last window along spatial axis k."""
        return (self.out[k] - 1) * self.strides[k] + (self.kernel[k] - 1) * self.dilation[k]

    def padded(self) -> bool:
        """Whether some window tap falls outside the input."""
        return any(
            b > 0 or self._final_tap(k) - b >= self.in_shape[2 + k]
            for k, (b, _) in enumerate(self.pads)
        )

    def _conds(self, sp: tuple[Any, ...]) -> tuple[list[PrimExpr], list[PrimExpr]]:
        conds = []
        src = []
        for k in range(self.nsp):
            begin = self.pads[k][0]
            pos = sp[k] * self.strides[k] + self.axes[k].var * self.dilation[k] - begin
            if begin > 0:
                conds.append(pos >= 0)
            if self._final_tap(k) - begin >= self.in_shape[2 + k]:
                conds.append(pos < self.in_shape[2 + k])
            src.append(pos)
        return conds, src

    def tap(self, x: te.Tensor, n: Any, c: Any, sp: tuple[Any, ...], fill: PrimExpr) -> PrimExpr:
        """x at the current tap of the window of output position ``sp`` (``fill`` outside;
        a ``pad_input`` copy is read without conditions)."""
        if x is self.padded_input:
            src = [
                sp[k] * self.strides[k] + self.axes[k].var * self.dilation[k]
                for k in range(self.nsp)
            ]
            return x[(n, c, *src)]
        conds, src = self._conds(sp)
        value = x[(n, *src, c)] if self.last else x[(n, c, *src)]
        if not conds:
            return value
        return tir.if_then_else(tir.logical_and(*conds), value, fill)

    def pad_input(self, x: te.Tensor, fill: PrimExpr) -> te.Tensor:
        """``x`` (N, C, *spatial) with its padding, materialized (``fill`` outside), read by
        ``tap`` at padded positions; ``x`` itself for channels-last or unpadded pools."""
        if self.last or not PAD_COPY or not self.padded():
            return x
        shape = list(static_shape(x)[:2])
        for k in range(self.nsp):
            shape.append(max(self.in_shape[2 + k] + self.pads[k][0], self._final_tap(k) + 1))

        def body(n: Any, c: Any, *p: Any) -> PrimExpr:
            src = [p[k] - self.pads[k][0] for k in range(self.nsp)]
            inside = tir.logical_and(
                *(tir.logical_and(s >= 0, s < self.in_shape[2 + k]) for k, s in enumerate(src))
            )
            return tir.if_then_else(inside, x[(n, c, *src)], fill)

        self.padded_input = te.compute(tuple(shape), body, "pool_pad", attrs={MATERIALIZE: True})
        return self.padded_input

    def compute(self, shape: Any, body: Callable[..., PrimExpr], name: str) -> te.Tensor:
        """``te.compute`` of ``body(n, c, *sp)`` over the output ``shape`` in this layout."""
        if self.last:
            return te.compute(shape, lambda n, *r: body(n, r[-1], *r[:-1]), name)
        return te.compute(shape, body, name)

    def whole(self) -> bool:
        """Whether the single window covers the whole input, tap for tap (a global pool)."""
        return (
            all(int(d) == 1 for d in self.out)
            and all(b == 0 and e == 0 for b, e in self.pads)
            and all(d == 1 for d in self.dilation)
            and self.kernel == tuple(int(d) for d in self.in_shape[2:])
        )

    def count(self, sp: tuple[Any, ...], include_pad: bool) -> PrimExpr:
        """How many taps of the window at ``sp`` fall in the counted region (at least 1)."""
        counts = []
        for k in range(self.nsp):
            size = self.in_shape[2 + k]
            begin, end = self.pads[k]
            lo, hi = (0, size + begin + end) if include_pad else (begin, size + begin)
            start = sp[k] * self.strides[k]
            d, kern = self.dilation[k], self.kernel[k]
            first = tir.max(ceil_div(lo - start, d), 0)
            stop = tir.min(ceil_div(hi - start, d), kern)
            counts.append(tir.max(stop - first, 0))
        total = prod_expr(counts)
        assert total is not None
        return tir.max(total, 1)


@register_compute("nn.max_pool")
def max_pool(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Max over each window; taps outside the input never win."""
    x = inputs[0]
    check_dtype("nn.max_pool", x.dtype)
    ty = out_tensor_type(out_type)
    win = _Window(x, attrs, ty.shape)
    fill = lowest(x.dtype)
    src = win.pad_input(x, fill)

    def body(n: Any, c: Any, *sp: Any) -> PrimExpr:
        return te.max(win.tap(src, n, c, sp, fill), axis=win.axes)

    return win.compute(ty.shape, body, "max_pool")


@register_compute("nn.avg_pool")
def avg_pool(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Window sum divided by the number of taps inside the input (or its padding too)."""
    x = inputs[0]
    check_dtype("nn.avg_pool", x.dtype)
    ty = out_tensor_type(out_type)
    win = _Window(x, attrs, ty.shape)
    zero = scalar(0, x.dtype)
    src = win.pad_input(x, zero)

    def window_sum(n: Any, c: Any, *sp: Any) -> PrimExpr:
        return te.sum(win.tap(src, n, c, sp, zero), axis=win.axes)

    whole = win.whole() and not win.last
    total = _column_reduce(x, ty.shape, "sum", "pool_sum") if whole else None
    total = total if total is not None else win.compute(ty.shape, window_sum, "pool_sum")
    include = bool(attrs["count_include_pad"])

    def body(n: Any, c: Any, *sp: Any) -> PrimExpr:
        at = (n, *sp, c) if win.last else (n, c, *sp)
        return total[at] / win.count(sp, include).astype(x.dtype)

    return win.compute(ty.shape, body, "avg_pool")


@register_compute("nn.lp_pool")
def lp_pool(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """(window sum of |x|^p)^(1/p), zero padding (p = 1 and 2 without pow)."""
    x = inputs[0]
    check_dtype("nn.lp_pool", x.dtype)
    ty = out_tensor_type(out_type)
    win = _Window(x, attrs, ty.shape)
    p = float(attrs["p"])
    zero = scalar(0, x.dtype)

    def power(v: PrimExpr) -> PrimExpr:
        if p == 2.0:
            return v * v
        if p == 1.0:
            return tir.abs(v)
        return tir.pow(tir.abs(v), scalar(p, x.dtype))

    def window_sum(n: Any, c: Any, *sp: Any) -> PrimExpr:
        return te.sum(power(win.tap(x, n, c, sp, zero)), axis=win.axes)

    total = te.compute(ty.shape, window_sum, "pool_sum")

    def body(*i: Any) -> PrimExpr:
        if p == 2.0:
            return tir.sqrt(total[i])
        if p == 1.0:
            return total[i]
        return tir.pow(total[i], scalar(1.0 / p, x.dtype))

    return te.compute(ty.shape, body, "lp_pool")


@register_compute("nn.max_pool_argmax")
def max_pool_argmax(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Flat input index (int64) of each window's first maximum (ONNX MaxPool Indices):
    the window max, then the smallest kernel offset whose tap equals it."""
    x = inputs[0]
    check_dtype("nn.max_pool_argmax", x.dtype)
    ty = out_tensor_type(out_type)
    win = _Window(x, attrs, ty.shape)
    fill = lowest(x.dtype)

    def window_max(n: Any, c: Any, *sp: Any) -> PrimExpr:
        return te.max(win.tap(x, n, c, sp, fill), axis=win.axes)

    peak = te.compute(ty.shape, window_max, "pool_max")
    win2 = _Window(x, attrs, ty.shape)
    ksize = product(win2.kernel)

    def first_hit(n: Any, c: Any, *sp: Any) -> PrimExpr:
        flat: PrimExpr = scalar(0, "int32")
        for k, ax in enumerate(win2.axes):
            flat = flat * win2.kernel[k] + ax.var
        hit = tir.eq(win2.tap(x, n, c, sp, fill), peak[(n, c, *sp)])
        return te.min(tir.if_then_else(hit, flat, scalar(ksize, "int32")), axis=win2.axes)

    which = te.compute(ty.shape, first_hit, "pool_which")
    sizes = win.in_shape[2:]
    row_major = int(attrs["storage_order"]) == 0

    def body(n: Any, c: Any, *sp: Any) -> PrimExpr:
        k = which[(n, c, *sp)].astype("int64")
        positions = []
        rest = k
        for a in range(win.nsp - 1, -1, -1):
            off = rest % win.kernel[a]
            rest = rest // win.kernel[a]
            start = sp[a].astype("int64") * win.strides[a] - win.pads[a][0]
            pos = start + off * win.dilation[a]
            positions.append(tir.min(tir.max(pos, 0), sizes[a] - 1))
        positions.reverse()
        order = range(win.nsp) if row_major else range(win.nsp - 1, -1, -1)
        flat: PrimExpr = (n.astype("int64") * win.in_shape[1] + c.astype("int64")) * product(sizes)
        stride = 1
        for a in reversed(list(order)):
            flat = flat + positions[a] * stride
            stride *= sizes[a]
        return flat

    return te.compute(ty.shape, body, "max_pool_argmax")


#: whole-map reductions over rows at least this wide reduce each column first (below).
MIN_COLUMNS = 4


def _column_reduce(
    x: te.Tensor, out_shape: tuple[int, ...], combiner: str, name: str
) -> te.Tensor | None:
    """The sum (or max) of each (n, c) map of ``x`` in two stages: per column over the rows
    (the columns are the vector lanes, W independent chains), then across the columns;
    None when the rows are narrower than MIN_COLUMNS. The single chain of the one-stage
    reduction waits on every add: ds_cnn_kws's 25x5 average pool of 64 channels, resnet8's
    8x8 (c target, gcc keeps float sums in order)."""
    shape = static_shape(x)
    if len(shape) < 4 or int(shape[-1]) < MIN_COLUMNS:
        return None
    reducer = te.sum if combiner == "sum" else te.max
    rows = [te.reduce_axis(int(s), f"rk{k}") for k, s in enumerate(shape[2:-1])]

    def column(n: Any, c: Any, w: Any) -> PrimExpr:
        return reducer(x[(n, c, *(a.var for a in rows), w)], axis=rows)

    cols = te.compute(
        (shape[0], shape[1], shape[-1]), column, f"{name}_cols", attrs={"reduce_after": 2}
    )
    rw = te.reduce_axis(int(shape[-1]), "rw")
    return te.compute(out_shape, lambda n, c, *_: reducer(cols[(n, c, rw.var)], axis=[rw]), name)


def _global(x: te.Tensor, out_shape: tuple[int, ...], combiner: str, last: bool) -> te.Tensor:
    """The sum or max over the spatial axes of ``x`` (channels last with ``last``: the
    channels are the vector lanes of one reduction over all positions)."""
    whole = None if last else _column_reduce(x, out_shape, combiner, f"global_{combiner}")
    if whole is not None:
        return whole
    shape = static_shape(x)
    axes = [te.reduce_axis(s, f"rk{k}") for k, s in enumerate(shape[1:-1] if last else shape[2:])]
    reducer = te.sum if combiner == "sum" else te.max

    def body(n: Any, c: Any, *_: Any) -> PrimExpr:
        taps = tuple(a.var for a in axes)
        return reducer(x[(n, *taps, c)] if last else x[(n, c, *taps)], axis=axes)

    if last:
        return te.compute(out_shape, lambda n, *r: body(n, r[-1]), f"global_{combiner}")
    return te.compute(out_shape, body, f"global_{combiner}")


def _first(shape: Any, last: bool) -> tuple[int, ...]:
    """A shape in NCHW order (from NHWC when ``last``)."""
    dims = tuple(int(d) for d in shape)
    return (dims[0], dims[-1], *dims[1:-1]) if last else dims


@register_compute("nn.global_avg_pool")
def global_avg_pool(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Mean over all spatial axes (kept as size-1 axes)."""
    x = inputs[0]
    check_dtype("nn.global_avg_pool", x.dtype)
    ty = out_tensor_type(out_type)
    last = data_layout(attrs) == "NHWC"
    total = _global(x, ty.shape, "sum", last)
    size = scalar(product(_first(static_shape(x), last)[2:]), x.dtype)
    return te.compute(ty.shape, lambda *i: total[i] / size, "global_avg_pool")


@register_compute("nn.global_max_pool")
def global_max_pool(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Max over all spatial axes (kept as size-1 axes)."""
    x = inputs[0]
    check_dtype("nn.global_max_pool", x.dtype)
    return _global(x, out_tensor_type(out_type).shape, "max", data_layout(attrs) == "NHWC")


for _name in (
    "nn.max_pool",
    "nn.max_pool_argmax",
    "nn.avg_pool",
    "nn.lp_pool",
    "nn.global_avg_pool",
    "nn.global_max_pool",
):
    register_schedule(_name)(schedule_anchor)
