"""ONNX handlers for image ops: Resize (opsets 10..19: scales or sizes, axes,
keep_aspect_ratio_policy, every coordinate and nearest mode, linear and cubic), Upsample,
DepthToSpace, SpaceToDepth.

Scales, sizes and roi must be static. Resize-10 and Upsample use ``asymmetric``
coordinates and ORT's historical nearest rounding (floor when upsampling an axis, ceil when
downsampling it), so mixed up/down models resize in two separable steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.nn_common import required, ttype, unsupported
from ember.frontend.onnx.registry import ALL_TYPES, INT_TYPES, NUMERIC_TYPES, onnx_op
from ember.ir.expr import Expr, call


def _static(ctx: ConvertContext, node: NodeView, i: int, what: str) -> np.ndarray | None:
    """Input ``i`` as a static array, None when omitted or empty."""
    expr = node.input(i)
    if expr is None:
        return None
    value = ctx.require_const(expr, what)
    return value if value.size else None


def _out_size(size: int, scale: float) -> int:
    return int(math.floor(float(np.float32(size) * np.float32(scale))))


def _legacy_resize(
    ctx: ConvertContext, node: NodeView, x: Expr, scales: Sequence[float], mode: str
) -> Expr:
    """Resize-10 / Upsample: asymmetric coordinates, floor (up) or ceil (down) rounding."""
    xt = ttype(ctx, node, x)
    if mode not in ("nearest", "linear", "bilinear"):
        raise unsupported(ctx, node, f"mode {mode!r}")
    if len(scales) != xt.ndim:
        ctx.fail(node, f"scales {list(scales)} need one value per axis of {xt}")
    method = "nearest" if mode == "nearest" else "linear"
    groups = [[s >= 1.0 for s in scales], [s < 1.0 for s in scales]]
    y = x
    for rounding, chosen in zip(("floor", "ceil"), groups, strict=True):
        if not any(chosen):
            continue
        cur = ttype(ctx, node, y).shape
        step_scales = [s if c else 1.0 for s, c in zip(scales, chosen, strict=True)]
        sizes = [_out_size(n, s) for n, s in zip(cur, step_scales, strict=True)]
        y = call(
            "image.resize",
            y,
            sizes=sizes,
            scales=step_scales,
            method=method,
            coordinate_transformation_mode="asymmetric",
            nearest_mode=rounding,
            name=node.name,
        )
    return y


@onnx_op("Upsample", since=7, dtypes=NUMERIC_TYPES)
def upsample(ctx: ConvertContext, node: NodeView) -> Expr:
    """Upsample (scales as an attribute before opset 9, an input from 9)."""
    x = required(ctx, node, 0, "X")
    if node.opset < 9:
        scales = [float(s) for s in node.attr("scales")]
    else:
        value = _static(ctx, node, 1, "the scales")
        if value is None:
            ctx.fail(node, "the scales input is required")
        scales = [float(s) for s in value]
    return _legacy_resize(ctx, node, x, scales, node.attr("mode", "nearest"))


@onnx_op("Resize", since=10, dtypes=NUMERIC_TYPES)
def resize(ctx: ConvertContext, node: NodeView) -> Expr:
    """Resize: nearest / linear / cubic with ONNX coordinate transformations."""
    x = required(ctx, node, 0, "X")
    mode = node.attr("mode", "nearest")
    if node.opset < 11:
        value = _static(ctx, node, 1, "the scales")
        if value is None:
            ctx.fail(node, "the scales input is required")
        return _legacy_resize(ctx, node, x, [float(s) for s in value], mode)
    xt = ttype(ctx, node, x)
    rank = xt.ndim
    axes = [int(a) % rank for a in node.attr("axes", list(range(rank)))]
    roi = _static(ctx, node, 1, "the roi")
    scales_in = _static(ctx, node, 2, "the scales")
    sizes_in = _static(ctx, node, 3, "the sizes")
    if (scales_in is None) == (sizes_in is None):
        ctx.fail(node, "exactly one of scales and sizes must be given")
    scales = [1.0] * rank
    sizes = list(xt.shape)
    if scales_in is not None:
        if len(scales_in) != len(axes):
            ctx.fail(node, f"scales {scales_in.tolist()} need {len(axes)} values")
        for a, s in zip(axes, scales_in.tolist(), strict=True):
            scales[a] = float(s)
            sizes[a] = _out_size(xt.shape[a], s)
    elif sizes_in is not None:
        _sizes_and_scales(ctx, node, xt.shape, axes, sizes_in.tolist(), sizes, scales)
    attrs: dict[str, Any] = {
        "sizes": sizes,
        "scales": scales,
        "method": mode,
        "coordinate_transformation_mode": node.attr("coordinate_transformation_mode", "half_pixel"),
        "nearest_mode": node.attr("nearest_mode", "round_prefer_floor"),
        "cubic_coeff_a": node.attr("cubic_coeff_a", -0.75),
        "exclude_outside": bool(node.attr("exclude_outside", 0)),
        "extrapolation_value": node.attr("extrapolation_value", 0.0),
        "antialias": bool(node.attr("antialias", 0)) and mode != "nearest",
    }
    if roi is not None and attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        full = [0.0] * rank + [1.0] * rank
        n = len(axes)
        if len(roi) != 2 * n:
            ctx.fail(node, f"roi needs {2 * n} values (starts then ends), got {len(roi)}")
        for j, a in enumerate(axes):
            full[a] = float(roi[j])
            full[a + rank] = float(roi[j + n])
        attrs["roi"] = full
    if mode == "linear" and xt.dtype in INT_TYPES:  # onnxruntime: the float result truncated
        y = call("image.resize", call("cast", x, dtype="float32"), **attrs)
        return call("cast", y, dtype=xt.dtype, name=node.name)
    return call("image.resize", x, name=node.name, **attrs)


def _sizes_and_scales(
    ctx: ConvertContext,
    node: NodeView,
    shape: Sequence[int],
    axes: Sequence[int],
    given: Sequence[int],
    sizes: list[int],
    scales: list[float],
) -> None:
    """Fill ``sizes``/``scales`` from requested sizes and keep_aspect_ratio_policy."""
    if len(given) != len(axes):
        ctx.fail(node, f"sizes {list(given)} need {len(axes)} values")
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        for a, s in zip(axes, given, strict=True):
            sizes[a] = int(s)
        scales.clear()  # the op then uses out / in, and the exact output length
        return
    if policy not in ("not_larger", "not_smaller"):
        ctx.fail(node, f"unknown keep_aspect_ratio_policy {policy!r}")
    ratios = [float(np.float32(s) / np.float32(shape[a])) for a, s in zip(axes, given, strict=True)]
    common = min(ratios) if policy == "not_larger" else max(ratios)
    for a in axes:
        scales[a] = common
        sizes[a] = int(math.floor(common * shape[a] + 0.5))


@onnx_op("DepthToSpace", since=1, dtypes=ALL_TYPES)
def depth_to_space(ctx: ConvertContext, node: NodeView) -> Expr:
    """DepthToSpace (DCR or CRD)."""
    return call(
        "nn.depth_to_space",
        required(ctx, node, 0, "input"),
        block_size=node.attr("blocksize"),
        mode=node.attr("mode", "DCR"),
        name=node.name,
    )


@onnx_op("SpaceToDepth", since=1, dtypes=ALL_TYPES)
def space_to_depth(ctx: ConvertContext, node: NodeView) -> Expr:
    """SpaceToDepth (DCR, or CRD from opset 28)."""
    return call(
        "nn.space_to_depth",
        required(ctx, node, 0, "input"),
        block_size=node.attr("blocksize"),
        mode=node.attr("mode", "DCR"),
        name=node.name,
    )
