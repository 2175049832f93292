"""ONNX handlers for sampling ops: GridSample (16: 4-D bilinear/nearest/bicubic; 20: N-d
linear/nearest/cubic), RoiAlign (10, 16: coordinate_transformation_mode), DeformConv (19,
2-D) and Col2Im (18; image_shape and block_shape must be static)."""

from __future__ import annotations

import numpy as np

from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.nn_common import required, spatial_attr, ttype, unsupported
from ember.frontend.onnx.registry import FLOAT_TYPES, onnx_op
from ember.ir.expr import Constant, Expr, call

#: GridSample-16 mode names and their opset-20 spelling.
_OLD_MODES = {"bilinear": "linear", "bicubic": "cubic"}


@onnx_op("GridSample", since=16, dtypes=FLOAT_TYPES)
def grid_sample(ctx: ConvertContext, node: NodeView) -> Expr:
    """GridSample: X (N, C, *D) sampled at grid (N, *out, nsp) -> (N, C, *out)."""
    x = required(ctx, node, 0, "X")
    grid = required(ctx, node, 1, "grid")
    mode = str(node.attr("mode", "linear" if node.opset >= 20 else "bilinear"))
    mode = _OLD_MODES.get(mode, mode)
    if mode not in ("linear", "nearest", "cubic"):
        ctx.fail(node, f"unknown mode {mode!r}; known: linear, nearest, cubic")
    padding = str(node.attr("padding_mode", "zeros"))
    if padding not in ("zeros", "border", "reflection"):
        ctx.fail(node, f"unknown padding_mode {padding!r}; known: zeros, border, reflection")
    xt, gt = ttype(ctx, node, x), ttype(ctx, node, grid)
    if node.opset < 20 and xt.ndim != 4:
        ctx.fail(node, f"GridSample-{node.opset} takes a 4-D X, got {xt}")
    if xt.ndim < 3 or gt.ndim != xt.ndim or gt.shape[-1] != xt.ndim - 2:
        ctx.fail(node, f"grid {gt} must be (N, *out, {xt.ndim - 2}) for X {xt}")
    return call(
        "image.grid_sample",
        x,
        grid,
        mode=mode,
        padding_mode=padding,
        align_corners=bool(node.attr("align_corners", 0)),
        name=node.name,
    )


@onnx_op("RoiAlign", since=10, dtypes=FLOAT_TYPES)
def roi_align(ctx: ConvertContext, node: NodeView) -> Expr:
    """RoiAlign (opset 10: output_half_pixel coordinates; 16: the attribute decides)."""
    x = required(ctx, node, 0, "X")
    rois = required(ctx, node, 1, "rois")
    batch = required(ctx, node, 2, "batch_indices")
    coord = "output_half_pixel"
    if node.opset >= 16:
        coord = str(node.attr("coordinate_transformation_mode", "half_pixel"))
    if coord not in ("half_pixel", "output_half_pixel"):
        ctx.fail(node, f"unknown coordinate_transformation_mode {coord!r}")
    mode = str(node.attr("mode", "avg"))
    if mode not in ("avg", "max"):
        ctx.fail(node, f"unknown mode {mode!r}; known: avg, max")
    if ttype(ctx, node, x).ndim != 4:
        ctx.fail(node, f"X must be 4-D (N, C, H, W), got {ttype(ctx, node, x)}")
    return call(
        "vision.roi_align",
        x,
        rois,
        batch,
        output_height=int(node.attr("output_height", 1)),
        output_width=int(node.attr("output_width", 1)),
        sampling_ratio=int(node.attr("sampling_ratio", 0)),
        spatial_scale=float(node.attr("spatial_scale", 1.0)),
        mode=mode,
        half_pixel=coord == "half_pixel",
        name=node.name,
    )


@onnx_op("DeformConv", since=19, dtypes=FLOAT_TYPES)
def deform_conv(ctx: ConvertContext, node: NodeView) -> Expr:
    """DeformConv on 2-D inputs; an omitted bias is zeros and an omitted mask ones."""
    x = required(ctx, node, 0, "X")
    w = required(ctx, node, 1, "W")
    offset = required(ctx, node, 2, "offset")
    xt, wt, ot = ttype(ctx, node, x), ttype(ctx, node, w), ttype(ctx, node, offset)
    if xt.ndim != 4:
        raise unsupported(ctx, node, f"DeformConv on a {xt.ndim - 2}-D input (2-D only)")
    kernel = spatial_attr(ctx, node, "kernel_shape", 2, 0)
    if kernel != [0, 0] and tuple(kernel) != wt.shape[2:]:
        ctx.fail(node, f"kernel_shape {kernel} does not match W {wt}")
    og = int(node.attr("offset_group", 1))
    dtype = np.dtype(xt.dtype)
    bias = node.input(3)
    if bias is None:
        bias = Constant(np.zeros((wt.shape[0],), dtype))
    mask = node.input(4)
    if mask is None:
        taps = og * wt.shape[2] * wt.shape[3]
        mask = Constant(np.ones((xt.shape[0], taps, *ot.shape[2:]), dtype))
    pads = spatial_attr(ctx, node, "pads", 4, 0)
    return call(
        "nn.deform_conv",
        x,
        w,
        offset,
        bias,
        mask,
        strides=spatial_attr(ctx, node, "strides", 2, 1),
        pads=pads,
        dilations=spatial_attr(ctx, node, "dilations", 2, 1),
        group=int(node.attr("group", 1)),
        offset_group=og,
        name=node.name,
    )


@onnx_op("Col2Im", since=18)
def col2im(ctx: ConvertContext, node: NodeView) -> Expr:
    """Col2Im: (N, C*prod(block), L) -> (N, C, *image_shape)."""
    x = required(ctx, node, 0, "input")
    image = [int(v) for v in ctx.require_const(node.input(1), "image_shape").reshape(-1)]
    block = [int(v) for v in ctx.require_const(node.input(2), "block_shape").reshape(-1)]
    nd = len(image)
    if len(block) != nd:
        ctx.fail(node, f"block_shape {block} and image_shape {image} differ in length")
    return call(
        "nn.col2im",
        x,
        image_shape=image,
        block_shape=block,
        dilations=spatial_attr(ctx, node, "dilations", nd, 1),
        pads=spatial_attr(ctx, node, "pads", 2 * nd, 0),
        strides=spatial_attr(ctx, node, "strides", nd, 1),
        name=node.name,
    )
