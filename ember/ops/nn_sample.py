"""Computes of the sampling ops (ember/ir/ops/nn_sample.py): image.grid_sample,
vision.roi_align, nn.deform_conv and nn.col2im.

* grid_sample is one injective compute: each output element reads its grid point, maps it
  to a float32 input coordinate per spatial axis (the reference's formulas), and sums the
  taps of every axis (1 nearest, 2 linear, 4 cubic) with the padding applied per tap;
* roi_align is hand-written loop IR (``te.extern``): its sampling grid per bin depends on
  the region, a run-time value, so the sample loops have data-dependent extents;
* deform_conv materialises the bilinear samples of every kernel tap (the deformable
  im2col, masked), then reduces them against the weights per group;
* col2im gathers, for each image element, the block entries that cover it (a reduction over
  the kernel positions whose stride divides the distance).
"""

from __future__ import annotations

import itertools
from typing import Any

from ember import tir
from ember.errors import CompileError
from ember.ir.op import Attrs
from ember.ir.ops.nn_sample import CUBIC_A, col2im_blocks
from ember.ir.types import Type
from ember.ops.common import out_tensor_type, static_shape
from ember.ops.nn_common import check_dtype, product, sum_expr
from ember.ops.registry import register_compute
from ember.tir import PrimExpr, te

F32, F64, I32 = "float32", "float64", "int32"


def _f(value: float, dtype: str = F32) -> PrimExpr:
    return tir.const(float(value), dtype)


def _reflect(v: PrimExpr, lo: float, hi: float) -> PrimExpr:
    """float64 ``v`` reflected at lo and hi until it lies between them."""
    span = hi - lo
    if span <= 0:
        return _f(lo, F64)
    below = _f(lo, F64) - v
    above = v - _f(hi, F64)
    dx = tir.if_then_else(v < _f(lo, F64), below, above)
    k = tir.trunc(dx / _f(span, F64))
    r = dx - k * _f(span, F64)
    even = tir.eq(tir.truncmod(k.astype("int64"), 2), 0)
    low_side = tir.if_then_else(even, _f(lo, F64) + r, _f(hi, F64) - r)
    high_side = tir.if_then_else(even, _f(hi, F64) - r, _f(lo, F64) + r)
    return tir.if_then_else(
        v < _f(lo, F64), low_side, tir.if_then_else(v > _f(hi, F64), high_side, v)
    )


def _clamp(i: PrimExpr, n: int) -> PrimExpr:
    return tir.min(tir.max(i, 0), n - 1)


def _cubic(t: PrimExpr) -> list[PrimExpr]:
    a = _f(CUBIC_A)
    one, two = _f(1.0), _f(2.0)
    s = [t + one, t, one - t, two - t]
    far = [
        ((a * d - _f(5 * CUBIC_A)) * d + _f(8 * CUBIC_A)) * d - _f(4 * CUBIC_A)
        for d in (s[0], s[3])
    ]
    near = [(_f(CUBIC_A + 2) * d - _f(CUBIC_A + 3)) * d * d + one for d in (s[1], s[2])]
    return [far[0], near[0], near[1], far[1]]


def _grid_coord(g: PrimExpr, length: int, attrs: Attrs) -> PrimExpr:
    """The float32 input coordinate of normalised grid value ``g`` along one axis, after
    the rounding of nearest mode and the border/reflection adjustment of the reference."""
    g = g.astype(F32)
    one, two = _f(1.0), _f(2.0)
    lo, hi = _grid_borders(length, attrs)
    if attrs["align_corners"]:
        c = (g + one) / two * _f(length - 1)
    else:
        c = ((g + one) * _f(length) - one) / two
    if attrs["mode"] == "nearest":
        c = tir.round(c)
    pad = attrs["padding_mode"]
    if pad == "border":
        outside = tir.logical_or(c < _f(lo), c > _f(hi))
        c = tir.if_then_else(outside, tir.min(tir.max(c, _f(0.0)), _f(length - 1)), c)
    elif pad == "reflection":
        c = _reflect(c.astype(F64), lo, hi).astype(F32)
    return c


def _grid_borders(length: int, attrs: Attrs) -> tuple[float, float]:
    return (0.0, length - 1.0) if attrs["align_corners"] else (-0.5, length - 0.5)


def _grid_taps(
    c: PrimExpr, length: int, attrs: Attrs
) -> list[tuple[PrimExpr, PrimExpr | None, PrimExpr | None]]:
    """(clamped index, valid or None, weight or None) per tap at coordinate ``c``."""
    mode, pad = attrs["mode"], attrs["padding_mode"]
    one = _f(1.0)
    if mode == "nearest":
        raw: list[tuple[PrimExpr, PrimExpr | None]] = [(c.astype(I32), None)]
    else:
        base = tir.floor(c)
        t = c - base
        b = base.astype(I32)
        if mode == "linear":
            raw = [(b, one - t), (b + 1, t)]
        else:
            raw = list(zip((b - 1, b, b + 1, b + 2), _cubic(t), strict=True))
    lo, hi = _grid_borders(length, attrs)
    taps: list[tuple[PrimExpr, PrimExpr | None, PrimExpr | None]] = []
    for r, w in raw:
        if pad == "zeros":
            valid = tir.logical_and(r >= 0, r < length)
            taps.append((_clamp(r, length), valid, w))
        elif pad == "border":
            taps.append((_clamp(r, length), None, w))
        else:
            idx = tir.trunc(_reflect(r.astype(F64), lo, hi)).astype(I32)
            taps.append((_clamp(idx, length), None, w))
    return taps


@register_compute("image.grid_sample")
def grid_sample(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """ONNX GridSample (see the module docstring)."""
    x, grid = inputs
    check_dtype("image.grid_sample", x.dtype)
    ty = out_tensor_type(out_type)
    dims = static_shape(x)[2:]
    nsp = len(dims)
    zero = tir.const(0, x.dtype)
    points = static_shape(grid)[:-1]
    coords = [
        te.compute(
            points,
            lambda *p, i=i: _grid_coord(grid[(*p, nsp - 1 - i)], dims[i], attrs),
            f"grid_coord{i}",
            attrs={"materialize": True},
        )
        for i in range(nsp)
    ]

    def body(n: Any, c: Any, *o: Any) -> PrimExpr:
        per_axis = [_grid_taps(coords[i][(n, *o)], dims[i], attrs) for i in range(nsp)]
        terms = []
        for combo in itertools.product(*per_axis):
            value = x[(n, c, *(idx for idx, _, _ in combo))]
            weight: PrimExpr | None = None
            for _, _, w in combo:
                if w is not None:
                    weight = w if weight is None else weight * w
            if weight is not None:
                value = value * weight.astype(x.dtype)
            valids = [v for _, v, _ in combo if v is not None]
            if valids:
                ok = valids[0] if len(valids) == 1 else tir.logical_and(*valids)
                value = tir.if_then_else(ok, value, zero)
            terms.append(value)
        total = sum_expr(terms)
        assert total is not None
        return total

    return te.compute(ty.shape, body, "grid_sample")


@register_compute("nn.col2im")
def col2im(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """ONNX Col2Im: each image element sums the block entries that cover it."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    block = [int(b) for b in attrs["block_shape"]]
    blocks = col2im_blocks(attrs)
    nd = len(block)
    pads, dil, strides = attrs["pads"], attrs["dilations"], attrs["strides"]
    kernel = product(block)
    zero = tir.const(0, x.dtype)

    def body(n: Any, c: Any, *p: Any) -> PrimExpr:
        rk = te.reduce_axis(kernel, "k")
        rest: PrimExpr = rk.var
        ks = []
        for i in reversed(range(nd)):
            ks.append(rest % block[i])
            rest = rest // block[i]
        ks.reverse()
        col: PrimExpr = tir.const(0, I32)
        valids = []
        for i in range(nd):
            q = p[i] + pads[i] - ks[i] * dil[i]
            qs = tir.max(q, 0) // strides[i]
            valids.append(tir.logical_and(q >= 0, qs < blocks[i]))
            if strides[i] > 1:
                valids.append(tir.eq(tir.max(q, 0) % strides[i], 0))
            col = col * blocks[i] + tir.min(qs, blocks[i] - 1)
        value = x[n, c * kernel + rk.var, col]
        return te.sum(tir.if_then_else(tir.logical_and(*valids), value, zero), axis=rk)

    return te.compute(ty.shape, body, "col2im")


def _bilinear_zeros(img: Any, y: PrimExpr, xw: PrimExpr, h: int, w: int, dtype: str) -> PrimExpr:
    """Bilinear sample of ``img(row, col)`` at float32 (y, x), zeros outside."""
    y0, x0 = tir.floor(y), tir.floor(xw)
    ty, tx = y - y0, xw - x0
    iy, ix = y0.astype(I32), x0.astype(I32)
    one = _f(1.0)
    terms = []
    for dy, wy in ((0, one - ty), (1, ty)):
        for dx, wx in ((0, one - tx), (1, tx)):
            r, c = iy + dy, ix + dx
            ok = tir.logical_and(tir.logical_and(r >= 0, r < h), tir.logical_and(c >= 0, c < w))
            value = img(_clamp(r, h), _clamp(c, w)) * (wy * wx).astype(dtype)
            terms.append(tir.if_then_else(ok, value, tir.const(0, dtype)))
    total = sum_expr(terms)
    assert total is not None
    return total


@register_compute("nn.deform_conv")
def deform_conv(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """2-D deformable convolution: masked bilinear columns, then a grouped reduction."""
    x, w, offset, bias, mask = inputs
    check_dtype("nn.deform_conv", x.dtype)
    ty = out_tensor_type(out_type)
    n, c, h, wd = static_shape(x)
    oc, cg, kh, kw = static_shape(w)
    oh, ow = static_shape(offset)[2:]
    og = int(attrs["offset_group"])
    per_og = c // og
    sh, sw = attrs["strides"]
    dh, dw = attrs["dilations"]
    ph, pw = attrs["pads"][0], attrs["pads"][1]
    dtype = x.dtype

    def columns(b: Any, ch: Any, i: Any, j: Any, y: Any, xo: Any) -> PrimExpr:
        g = ch // per_og
        tap = (g * kh + i) * kw + j
        off_y = offset[b, tap * 2, y, xo].astype(F64)
        off_x = offset[b, tap * 2 + 1, y, xo].astype(F64)
        yy = ((y * sh - ph + i * dh).astype(F64) + off_y).astype(F32)
        xx = ((xo * sw - pw + j * dw).astype(F64) + off_x).astype(F32)
        value = _bilinear_zeros(lambda r, q: x[b, ch, r, q], yy, xx, h, wd, dtype)
        return value * mask[b, tap, y, xo]

    cols = te.compute(
        (n, c, kh, kw, oh, ow), columns, "deform_columns", attrs={"materialize": True}
    )
    per_group = oc // int(attrs["group"])

    def body(b: Any, o: Any, y: Any, xo: Any) -> PrimExpr:
        rc = te.reduce_axis(cg, "rc")
        ri = te.reduce_axis(kh, "ri")
        rj = te.reduce_axis(kw, "rj")
        ch = o // per_group * cg + rc.var
        term = cols[b, ch, ri.var, rj.var, y, xo] * w[o, rc.var, ri.var, rj.var]
        return te.sum(term, axis=[rc, ri, rj])

    acc = te.compute(ty.shape, body, "deform_conv")
    return te.compute(ty.shape, lambda b, o, y, xo: acc[b, o, y, xo] + bias[o], "deform_bias")


@register_compute("vision.roi_align")
def roi_align(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """ONNX RoiAlign as loop IR with data-dependent sample loops."""
    x, rois, batch = inputs
    ty = out_tensor_type(out_type)
    if x.dtype not in (F32, F64):
        raise CompileError(f"vision.roi_align: {x.dtype} data is not supported; use float32")

    def build(ins: list[tir.Buffer], outs: list[tir.Buffer]) -> tir.Stmt:
        return _roi_align_body(ins, outs[0], static_shape(x), int(ty.shape[0]), attrs)

    result = te.extern(ty.shape, [x, rois, batch], build, name="roi_align", dtype=x.dtype)
    assert isinstance(result, te.Tensor)
    return result


def _roi_align_body(
    ins: list[tir.Buffer], out: tir.Buffer, shape: tuple[int, ...], nr: int, attrs: Attrs
) -> tir.Stmt:
    """The loops of roi_align: regions (in parallel), bins, the bin's samples, then the
    channels: a sample's corners and weights are computed once for all channels (they were
    recomputed per channel: 100 regions of 7 x 7 bins over 1x256x50x50 25.6 -> 4.1 ms at
    one thread, onnxruntime 9.0)."""
    xb, rb, bb = ins
    _, channels, h, w = shape
    ph, pw = int(attrs["output_height"]), int(attrs["output_width"])
    ratio = int(attrs["sampling_ratio"])
    half = bool(attrs["half_pixel"])
    avg = attrs["mode"] == "avg"
    wk = F64 if out.dtype == F64 else F32  # the working precision
    ib = tir.IRBuilder()
    y = ib.buffer(out)
    one = _f(1.0, wk)
    with ib.for_range(0, nr, "r", kind=tir.ForKind.PARALLEL) as r:
        scale, off = _f(attrs["spatial_scale"], wk), _f(0.5 if half else 0.0, wk)
        x0, y0, x1, y1 = (
            ib.let(nm, rb[r, k].astype(wk) * scale - off)
            for k, nm in enumerate(("x0", "y0", "x1", "y1"))
        )
        rw, rh = x1 - x0, y1 - y0
        if not half:
            rw, rh = tir.max(rw, one), tir.max(rh, one)
        rw_v, rh_v = ib.let("roi_w", rw), ib.let("roi_h", rh)
        bh = ib.let("bin_h", rh_v / _f(ph, wk))
        bw = ib.let("bin_w", rw_v / _f(pw, wk))
        if ratio > 0:
            gh: PrimExpr = tir.const(ratio, I32)
            gw: PrimExpr = tir.const(ratio, I32)
        else:
            gh = ib.let("grid_h", tir.ceil(rh_v / _f(ph, wk)).astype(I32))
            gw = ib.let("grid_w", tir.ceil(rw_v / _f(pw, wk)).astype(I32))
        count = ib.let("count", tir.max(gh * gw, 1).astype(wk))
        b = ib.let("b", _clamp(bb[r].astype(I32), shape[0]))
        with ib.for_range(0, ph, "i") as i, ib.for_range(0, pw, "j") as j:
            acc = ib.allocate(wk, (channels,), "acc")
            with ib.for_range(0, channels, "c", kind=tir.ForKind.VECTORIZED) as c:
                acc[c] = _f(0.0, wk)
            with ib.for_range(0, gh, "iy") as iy:
                yy = y0 + i.astype(wk) * bh + (iy.astype(wk) + _f(0.5, wk)) * bh / gh.astype(wk)
                with ib.for_range(0, gw, "ix") as ix:
                    xx = x0 + j.astype(wk) * bw + (ix.astype(wk) + _f(0.5, wk)) * bw / gw.astype(wk)
                    corners = _roi_corners(ib, ib.let("yy", yy), ib.let("xx", xx), h, w, wk)
                    with ib.for_range(0, channels, "c") as c:  # the sample's taps, each channel
                        terms = [wt * xb[b, c, row, col].astype(wk) for row, col, wt in corners]
                        if avg:
                            acc[c] = acc[c] + (terms[0] + terms[1] + terms[2] + terms[3])
                        else:
                            best = tir.max(tir.max(tir.max(terms[0], terms[1]), terms[2]), terms[3])
                            first = tir.logical_and(tir.eq(iy, 0), tir.eq(ix, 0))
                            acc[c] = tir.if_then_else(first, best, tir.max(acc[c], best))
            with ib.for_range(0, channels, "c") as c:
                result = acc[c] / count if avg else acc[c]
                y[r, c, i, j] = result.astype(out.dtype)
    return ib.get()


def _roi_corners(
    ib: tir.IRBuilder, yy: Any, xx: Any, h: int, w: int, wk: str
) -> list[tuple[PrimExpr, PrimExpr, PrimExpr]]:
    """The four corners (row, column, weight) of one sample, bound once for every channel
    (all weights zero outside [-1, h] x [-1, w])."""
    outside = ib.let(
        "outside",
        tir.logical_or(
            tir.logical_or(yy < _f(-1.0, wk), yy > _f(h, wk)),
            tir.logical_or(xx < _f(-1.0, wk), xx > _f(w, wk)),
        ),
    )
    yc, xc = tir.max(yy, _f(0.0, wk)), tir.max(xx, _f(0.0, wk))
    yl0, xl0 = ib.let("y0i", yc.astype(I32)), ib.let("x0i", xc.astype(I32))
    y_edge, x_edge = yl0 >= h - 1, xl0 >= w - 1
    yl = ib.let("y_low", tir.if_then_else(y_edge, h - 1, yl0))
    xl = ib.let("x_low", tir.if_then_else(x_edge, w - 1, xl0))
    yh = tir.if_then_else(y_edge, h - 1, yl0 + 1)
    xh = tir.if_then_else(x_edge, w - 1, xl0 + 1)
    ly = ib.let("ly", tir.if_then_else(y_edge, _f(0.0, wk), yc - yl.astype(wk)))
    lx = ib.let("lx", tir.if_then_else(x_edge, _f(0.0, wk), xc - xl.astype(wk)))
    hy, hx = _f(1.0, wk) - ly, _f(1.0, wk) - lx
    out: list[tuple[PrimExpr, PrimExpr, PrimExpr]] = []
    for k, (row, col, weight) in enumerate(
        [(yl, xl, hy * hx), (yl, xh, hy * lx), (yh, xl, ly * hx), (yh, xh, ly * lx)]
    ):
        row_s = ib.let(f"row{k}", tir.if_then_else(outside, 0, _clamp(row, h)))
        col_s = ib.let(f"col{k}", tir.if_then_else(outside, 0, _clamp(col, w)))
        wt = ib.let(f"w{k}", tir.if_then_else(outside, _f(0.0, wk), weight))
        out.append((row_s, col_s, wt))
    return out
