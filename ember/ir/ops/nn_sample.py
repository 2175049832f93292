"""Sampling ops: image.grid_sample (ONNX GridSample, N-d), vision.roi_align (RoiAlign),
nn.deform_conv (2-D DeformConv) and nn.col2im (Col2Im, N-d).

Each reads its input at computed positions: GridSample at the grid's normalised
coordinates (nearest, linear or cubic taps; zeros, border or reflection padding), RoiAlign
at a bilinear sampling grid per region of interest, DeformConv at the kernel taps moved by
learned offsets (bilinear, zeros outside), Col2Im sums the sliding blocks back into an image.
The references follow the ONNX reference implementation's arithmetic (float32 coordinates).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import tensor_arg
from ember.ir.types import TensorType, Type
from ember.support.dtypes import is_float

#: interpolation modes and padding modes of image.grid_sample.
GRID_MODES = ("nearest", "linear", "cubic")
GRID_PADDING = ("zeros", "border", "reflection")
#: Keys' cubic coefficient ONNX GridSample uses.
CUBIC_A = -0.75


def _grid_sample_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = tensor_arg(types, 0, "X")
    grid = tensor_arg(types, 1, "grid")
    nsp = x.ndim - 2
    if nsp < 1 or grid.ndim != x.ndim or grid.shape[-1] != nsp or grid.shape[0] != x.shape[0]:
        raise IRError(f"grid {grid} must be (N, *out, {nsp}) for input {x}")
    if attrs["mode"] not in GRID_MODES or attrs["padding_mode"] not in GRID_PADDING:
        raise IRError(
            f"grid_sample mode {attrs['mode']!r} / padding {attrs['padding_mode']!r}; known: "
            f"{', '.join(GRID_MODES)} / {', '.join(GRID_PADDING)}"
        )
    if not is_float(grid.dtype) or (attrs["mode"] != "nearest" and not is_float(x.dtype)):
        raise IRError(f"grid_sample needs a float grid (and float data to interpolate): {x}")
    return TensorType((x.shape[0], x.shape[1], *grid.shape[1:-1]), x.dtype)


def reflect(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``v`` reflected at the borders lo and hi until it lies between them (float64)."""
    v = np.asarray(v, np.float64)
    span = hi - lo
    if span <= 0:
        return np.full_like(v, lo)
    below, above = lo - v, v - hi
    dx = np.where(v < lo, below, above)
    k = np.trunc(dx / span)
    r = dx - k * span
    even = k % 2 == 0
    low_side = np.where(even, lo + r, hi - r)
    high_side = np.where(even, hi - r, lo + r)
    return np.where(v < lo, low_side, np.where(v > hi, high_side, v))


def cubic_coeffs(t: np.ndarray) -> list[np.ndarray]:
    """Keys cubic weights of the taps at floor-1 .. floor+2 for fraction ``t``."""
    a = CUBIC_A
    s = [t + 1, t, 1 - t, 2 - t]
    far = [((a * d - 5 * a) * d + 8 * a) * d - 4 * a for d in (s[0], s[3])]
    near = [((a + 2) * d - (a + 3)) * d * d + 1 for d in (s[1], s[2])]
    return [far[0], near[0], near[1], far[1]]


def _grid_axis_taps(
    g: np.ndarray, length: int, attrs: Attrs
) -> list[tuple[np.ndarray, np.ndarray | None, np.ndarray]]:
    """(index, valid mask or None, weight) per tap along one spatial axis."""
    f32 = np.float32
    g = g.astype(f32)
    if attrs["align_corners"]:
        c = (g + f32(1)) / f32(2) * f32(length - 1)
        lo, hi = 0.0, length - 1.0
    else:
        c = ((g + f32(1)) * f32(length) - f32(1)) / f32(2)
        lo, hi = -0.5, length - 0.5
    if attrs["mode"] == "nearest":
        c = np.rint(c)
    pad = attrs["padding_mode"]
    outside = (c < lo) | (c > hi)
    if pad == "border":
        c = np.where(outside, np.clip(c, 0, length - 1), c).astype(f32)
    elif pad == "reflection":
        c = reflect(c, lo, hi).astype(f32)
    if attrs["mode"] == "nearest":
        raw, weights = [c.astype(np.int64)], [np.ones_like(c)]
    else:
        base = np.floor(c)
        t = (c - base).astype(f32)
        b = base.astype(np.int64)
        if attrs["mode"] == "linear":
            raw, weights = [b, b + 1], [f32(1) - t, t]
        else:
            raw, weights = [b - 1, b, b + 1, b + 2], cubic_coeffs(t)
    taps: list[tuple[np.ndarray, np.ndarray | None, np.ndarray]] = []
    for r, w in zip(raw, weights, strict=True):
        if pad == "zeros":
            taps.append((np.clip(r, 0, length - 1), (r >= 0) & (r < length), w))
        elif pad == "border":
            taps.append((np.clip(r, 0, length - 1), None, w))
        else:
            idx = np.trunc(reflect(r.astype(np.float64), lo, hi)).astype(np.int64)
            taps.append((np.clip(idx, 0, length - 1), None, w))
    return taps


def _grid_sample_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, grid = xs
    nsp = x.ndim - 2
    xt = np.moveaxis(x, 1, -1)  # (N, *D, C)
    n_idx = np.arange(x.shape[0]).reshape((-1,) + (1,) * nsp)
    per_axis = [_grid_axis_taps(grid[..., nsp - 1 - i], x.shape[2 + i], attrs) for i in range(nsp)]
    acc = np.zeros((*grid.shape[:-1], x.shape[1]), np.float64)
    for combo in itertools.product(*per_axis):
        vals = xt[(n_idx, *(idx for idx, _, _ in combo))].astype(np.float64)
        weight = np.ones(grid.shape[:-1], np.float64)
        for _, valid, w in combo:
            weight = weight * w
            if valid is not None:
                weight = weight * valid
        acc += vals * weight[..., None]
    return np.ascontiguousarray(np.moveaxis(acc, -1, 1)).astype(x.dtype)


def _roi_align_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = tensor_arg(types, 0, "X")
    rois = tensor_arg(types, 1, "rois")
    idx = tensor_arg(types, 2, "batch_indices")
    if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4 or idx.shape != (rois.shape[0],):
        raise IRError(f"roi_align takes X (N,C,H,W), rois (R,4), batch_indices (R,): {types}")
    if attrs["mode"] not in ("avg", "max") or not is_float(x.dtype):
        raise IRError(f"roi_align needs float data and mode avg or max, got {attrs['mode']!r}")
    return TensorType(
        (rois.shape[0], x.shape[1], attrs["output_height"], attrs["output_width"]), x.dtype
    )


def roi_geometry(roi: np.ndarray, attrs: Attrs, f32: Any = np.float32) -> tuple[Any, ...]:
    """(start_h, start_w, bin_h, bin_w, grid_h, grid_w) of one region, in float32 (or the
    float type ``f32``)."""
    scale = f32(attrs["spatial_scale"])
    off = f32(0.5) if attrs["half_pixel"] else f32(0.0)
    x0, y0, x1, y1 = (f32(v) * scale - off for v in roi)
    rw, rh = x1 - x0, y1 - y0
    if not attrs["half_pixel"]:
        rw, rh = max(rw, f32(1)), max(rh, f32(1))
    ph, pw = attrs["output_height"], attrs["output_width"]
    bh, bw = rh / f32(ph), rw / f32(pw)
    ratio = attrs["sampling_ratio"]
    gh = ratio if ratio > 0 else int(np.ceil(rh / f32(ph)))
    gw = ratio if ratio > 0 else int(np.ceil(rw / f32(pw)))
    return y0, x0, bh, bw, gh, gw


def _bilinear_taps(y: Any, x: Any, h: int, w: int, f32: Any) -> list[tuple[int, int, Any]]:
    """RoiAlign's four (row, col, weight) taps at (y, x); none outside [-1, h] x [-1, w]."""
    y, x = f32(y), f32(x)
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return [(0, 0, 0.0)] * 4
    y, x = max(y, f32(0)), max(x, f32(0))
    yl, xl = int(y), int(x)
    if yl >= h - 1:
        yl = yh = h - 1
        y = f32(yl)
    else:
        yh = yl + 1
    if xl >= w - 1:
        xl = xh = w - 1
        x = f32(xl)
    else:
        xh = xl + 1
    ly, lx = y - f32(yl), x - f32(xl)
    hy, hx = f32(1) - ly, f32(1) - lx
    return [(yl, xl, hy * hx), (yl, xh, hy * lx), (yh, xl, ly * hx), (yh, xh, ly * lx)]


def _roi_align_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, rois, batch = xs
    _, c, h, w = x.shape
    ph, pw = attrs["output_height"], attrs["output_width"]
    out = np.zeros((rois.shape[0], c, ph, pw), x.dtype)
    f32: Any = np.float64 if x.dtype == np.float64 else np.float32
    for r in range(rois.shape[0]):
        geometry = roi_geometry(rois[r], attrs, f32)
        y0, x0, bh, bw = (f32(v) for v in geometry[:4])
        gh, gw = int(geometry[4]), int(geometry[5])
        img = x[int(batch[r])].astype(f32)
        for i, j in itertools.product(range(ph), range(pw)):
            samples = []
            for iy, ix in itertools.product(range(gh), range(gw)):
                yy = y0 + f32(i) * bh + (f32(iy) + f32(0.5)) * bh / f32(gh)
                xx = x0 + f32(j) * bw + (f32(ix) + f32(0.5)) * bw / f32(gw)
                taps = _bilinear_taps(yy, xx, h, w, f32)
                terms = np.stack([f32(wt) * img[:, a, b] for a, b, wt in taps])
                samples.append(terms.sum(0) if attrs["mode"] == "avg" else terms.max(0))
            if not samples:
                continue
            stack = np.stack(samples)
            count = max(gh * gw, 1)
            out[r, :, i, j] = stack.sum(0) / f32(count) if attrs["mode"] == "avg" else stack.max(0)
    return out


def _deform_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = tensor_arg(types, 0, "X")
    w = tensor_arg(types, 1, "W")
    offset = tensor_arg(types, 2, "offset")
    if x.ndim != 4 or w.ndim != 4 or offset.ndim != 4:
        raise IRError(f"deform_conv supports 2-D inputs (N,C,H,W), got {x}, {w}, {offset}")
    group, og = attrs["group"], attrs["offset_group"]
    kh, kw = w.shape[2:]
    if x.shape[1] != w.shape[1] * group or w.shape[0] % group or x.shape[1] % og:
        raise IRError(f"deform_conv: channels of {x} and {w} do not fit group {group}")
    if offset.shape[1] != og * kh * kw * 2:
        raise IRError(
            f"offset {offset} must have offset_group*kh*kw*2 = {og * kh * kw * 2} channels"
        )
    expect = tuple(
        (x.shape[2 + i] + p[i] + p[i + 2] - attrs["dilations"][i] * (k - 1) - 1) // s[i] + 1
        for i, k in enumerate((kh, kw))
        for p, s in [(attrs["pads"], attrs["strides"])]
    )
    if offset.shape[2:] != expect or offset.shape[0] != x.shape[0]:
        raise IRError(f"offset {offset} must be (N, ..., {expect[0]}, {expect[1]}) for {x}")
    return TensorType((x.shape[0], w.shape[0], *offset.shape[2:]), x.dtype)


def _deform_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w, offset, bias, mask = xs
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    oh, ow = offset.shape[2:]
    og = attrs["offset_group"]
    sh, sw = attrs["strides"]
    dh, dw = attrs["dilations"]
    ph, pw = attrs["pads"][0], attrs["pads"][1]
    off = offset.reshape(n, og, kh, kw, 2, oh, ow).astype(np.float64)
    msk = mask.reshape(n, og, kh, kw, oh, ow).astype(np.float64)
    cols = np.zeros((n, c, kh, kw, oh, ow), np.float64)
    base_h = (np.arange(oh) * sh - ph)[:, None]
    base_w = (np.arange(ow) * sw - pw)[None, :]
    for b, ch, i, j in itertools.product(range(n), range(c), range(kh), range(kw)):
        g = ch // (c // og)
        yy = base_h + i * dh + off[b, g, i, j, 0]
        xx = base_w + j * dw + off[b, g, i, j, 1]
        y0, x0 = np.floor(yy), np.floor(xx)
        acc = np.zeros((oh, ow))
        for dy, dx in itertools.product((0, 1), (0, 1)):
            ry, rx = (y0 + dy).astype(int), (x0 + dx).astype(int)
            wy = 1 - np.abs(yy - (y0 + dy))
            wx = 1 - np.abs(xx - (x0 + dx))
            ok = (ry >= 0) & (ry < h) & (rx >= 0) & (rx < wd)
            acc += (
                np.where(ok, x[b, ch][np.clip(ry, 0, h - 1), np.clip(rx, 0, wd - 1)], 0) * wy * wx
            )
        cols[b, ch, i, j] = acc * msk[b, g, i, j]
    group = attrs["group"]
    out = np.zeros((n, oc, oh, ow), np.float64)
    per = oc // group
    for gi in range(group):
        col = cols[:, gi * cg : (gi + 1) * cg]
        wt = w[gi * per : (gi + 1) * per].astype(np.float64)
        out[:, gi * per : (gi + 1) * per] = np.einsum("ncijhw,ocij->nohw", col, wt)
    out += bias.astype(np.float64).reshape(1, -1, 1, 1)
    return out.astype(x.dtype)


def col2im_blocks(attrs: Attrs) -> tuple[int, ...]:
    """The number of sliding blocks along each image axis."""
    image, block = attrs["image_shape"], attrs["block_shape"]
    nd = len(image)
    pads, dil, strides = attrs["pads"], attrs["dilations"], attrs["strides"]
    return tuple(
        (image[i] + pads[i] + pads[i + nd] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1
        for i in range(nd)
    )


def _col2im_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = tensor_arg(types, 0, "input")
    image, block = tuple(attrs["image_shape"]), tuple(attrs["block_shape"])
    nd = len(image)
    ok = len(block) == nd and all(
        len(attrs[k]) == n for k, n in (("pads", 2 * nd), ("dilations", nd), ("strides", nd))
    )
    if not ok or x.ndim != 3:
        raise IRError(f"col2im: input {x} must be (N, C*prod(block), L), attrs one per axis")
    k = int(np.prod(block))
    blocks = col2im_blocks(attrs)
    if x.shape[1] % k or x.shape[2] != int(np.prod(blocks)) or min(blocks) < 1:
        raise IRError(f"col2im: input {x} does not hold {blocks} blocks of {list(block)}")
    return TensorType((x.shape[0], x.shape[1] // k, *image), x.dtype)


def _col2im_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    image, block = tuple(attrs["image_shape"]), tuple(attrs["block_shape"])
    nd = len(image)
    blocks = col2im_blocks(attrs)
    k = int(np.prod(block))
    n, ck, _ = x.shape
    data = x.reshape(n, ck // k, *block, *blocks)
    pads, dil, strides = attrs["pads"], attrs["dilations"], attrs["strides"]
    padded = np.zeros(
        (n, ck // k, *(image[i] + pads[i] + pads[i + nd] for i in range(nd))), x.dtype
    )
    for kk in itertools.product(*(range(b) for b in block)):
        index: tuple[Any, ...] = tuple(
            slice(kk[i] * dil[i], kk[i] * dil[i] + strides[i] * (blocks[i] - 1) + 1, strides[i])
            for i in range(nd)
        )
        every: tuple[Any, ...] = (slice(None), slice(None))
        padded[every + index] += data[every + tuple(kk)]
    crop = tuple(slice(pads[i], pads[i] + image[i]) for i in range(nd))
    return np.ascontiguousarray(padded[every + crop])


register_op(
    OpDef(
        name="image.grid_sample",
        num_inputs=2,
        infer_type=_grid_sample_type,
        reference=_grid_sample_ref,
        pattern=OpPattern.INJECTIVE,
        attrs={
            "mode": Attr("str", "linear", "nearest, linear or cubic"),
            "padding_mode": Attr("str", "zeros", "zeros, border or reflection"),
            "align_corners": Attr("bool", False),
        },
        doc="Sample X at the grid's normalised coordinates (ONNX GridSample).",
    )
)

register_op(
    OpDef(
        name="vision.roi_align",
        num_inputs=3,
        infer_type=_roi_align_type,
        reference=_roi_align_ref,
        pattern=OpPattern.OPAQUE,
        attrs={
            "output_height": Attr("int", 1),
            "output_width": Attr("int", 1),
            "sampling_ratio": Attr("int", 0, "samples per bin side (0: adaptive)"),
            "spatial_scale": Attr("float", 1.0),
            "mode": Attr("str", "avg", "avg or max"),
            "half_pixel": Attr("bool", True, "shift the regions by half a pixel"),
        },
        doc="Average or max of bilinear samples per bin of each region (ONNX RoiAlign).",
    )
)

register_op(
    OpDef(
        name="nn.deform_conv",
        num_inputs=5,
        infer_type=_deform_type,
        reference=_deform_ref,
        pattern=OpPattern.OPAQUE,
        attrs={
            "strides": Attr("ints", (1, 1)),
            "pads": Attr("ints", (0, 0, 0, 0)),
            "dilations": Attr("ints", (1, 1)),
            "group": Attr("int", 1),
            "offset_group": Attr("int", 1),
        },
        doc="2-D deformable convolution: X, W, offset, bias, mask (ONNX DeformConv).",
    )
)

register_op(
    OpDef(
        name="nn.col2im",
        num_inputs=1,
        infer_type=_col2im_type,
        reference=_col2im_ref,
        pattern=OpPattern.OPAQUE,
        attrs={
            "image_shape": Attr("ints"),
            "block_shape": Attr("ints"),
            "dilations": Attr("ints"),
            "pads": Attr("ints"),
            "strides": Attr("ints"),
        },
        doc="Sum sliding blocks (N, C*prod(block), L) back into an image (ONNX Col2Im).",
    )
)
