"""Convolutions and matrix products: the out-elementwise-fusable anchors of most groups.

``nn.conv`` is N-d (NC[D]HW data, (O, I/groups, k...) weights); the padded input is a
separate stage computed once into a buffer, so the reduction's inner loop has no branch.
``nn.conv_transpose`` is the convolution of the stride-dilated, padded input (one buffer,
zeros included) with the flipped kernel. ``nn.dense`` is ``x @ w.T`` (legalized to
``nn.matmul`` with a transposed weight when the weight is a constant); ``nn.matmul``
follows numpy (1-D operands promoted, batch dims broadcast); its reduction stage sits behind
an identity output stage so that ``schedule_matmul`` can register-tile it (mb rows x nb
columns per iteration of the reduction) even without an epilogue. Other schedules:
``ember.ops.nn_schedule`` (one output row per parallel iteration, the reduction computed
at that row with the row loop innermost, vectorised).

An ``nn.conv`` whose weight is a constant at build time is legalized to ``nn.conv_packed``
(ungrouped, or grouped with a block dividing the channels of a group) or to
``nn.conv_depthwise_packed`` (one filter per channel); both ops are defined in
ember.ir.ops.nn_conv and exist only after legalization. The weight is re-laid out once
with b output channels innermost and the convolution runs register-tiled over b output
channels (the vector lanes) times up to 14 output columns (schedule_packed_conv), 2-10x
faster than the row schedule on ResNet-50's convolutions. A 1x1, stride-1, unpadded
convolution reduces over its positions flattened into one axis (a matrix product, positions
x channels), so that its register tiles run along all positions (flat_pointwise in
ember.ops.nn_conv_layouts).
Where the C micro-kernel runs (float32 on AVX2 C targets, ember.ops.nn_conv_f32), the
padded input is copied channels last and reduced over the kernel taps then the input
channels (the weight packed taps first for it, ember.ops.nn_conv_taps), and 1x1
convolutions with many outputs read a positions-major copy: each tile then reads contiguous
channels. Other targets keep the NCHW loop nests unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import tir
from ember.ir.expr import Call, Constant, Expr, call, const
from ember.ir.op import Attrs
from ember.ir.ops.common import data_layout, padding, spatial
from ember.ir.types import TensorType, Type
from ember.ops.common import out_tensor_type, scalar, static_shape
from ember.ops.nn_common import check_dtype
from ember.ops.nn_conv_dead_taps import drop_dead_taps
from ember.ops.nn_conv_f32 import TILE_KERNEL
from ember.ops.nn_conv_groups import split_groups
from ember.ops.nn_conv_lane_groups import lane_groups_form
from ember.ops.nn_conv_lanes import conv_position_lanes, schedule_conv_packed
from ember.ops.nn_conv_layouts import (
    conv_channels_last,
    flat_pointwise,
    pad_tensor,
    pointwise,
    strided_pointwise,
)
from ember.ops.nn_conv_narrow_layout import widen_blocks
from ember.ops.nn_conv_nhwc import conv_channels_first, conv_packed_nhwc, depthwise_nhwc
from ember.ops.nn_conv_pack import kernel_layout, lanes_layout, nhwc_tiles, to_packed
from ember.ops.nn_conv_taps import taps_first_view
from ember.ops.nn_conv_transpose import conv_transpose_to_pointwise
from ember.ops.nn_conv_winograd import conv_winograd as winograd_compute
from ember.ops.nn_conv_winograd import winograd_form
from ember.ops.nn_conv_winograd_epilogue import schedule_winograd
from ember.ops.nn_depthwise import depthwise_rows, schedule_depthwise, use_rows
from ember.ops.nn_rnn import streamed_matmul
from ember.ops.nn_schedule import MATERIALIZE, schedule_conv_anchor, schedule_dot_anchor
from ember.ops.nn_schedule_tiles import schedule_matmul
from ember.ops.registry import (
    register_compute,
    register_legalize,
    register_schedule,
)
from ember.tir import PrimExpr, te
from ember.tir import const as tir_const


def _conv_attrs(attrs: Attrs, nsp: int) -> tuple[tuple[int, ...], ...]:
    pads = padding(attrs, nsp)
    return (
        spatial(attrs, "strides", nsp, 1),
        spatial(attrs, "dilation", nsp, 1),
        tuple(b for b, _ in pads),
        tuple(e for _, e in pads),
    )


@register_compute("nn.conv")
def conv(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Direct N-d grouped convolution."""
    x, w = inputs
    check_dtype("nn.conv", x.dtype)
    ty = out_tensor_type(out_type)
    wshape = static_shape(w)
    nsp = len(wshape) - 2
    strides, dilation, pad_begin, pad_end = _conv_attrs(attrs, nsp)
    groups = int(attrs["groups"])
    out_ch, in_per_group = wshape[0], wshape[1]
    out_per_group = out_ch // groups
    xp = pad_tensor(x, pad_begin, pad_end, materialize=True)
    rc = te.reduce_axis(in_per_group, "rc")
    rk = [te.reduce_axis(wshape[2 + k], f"rk{k}") for k in range(nsp)]

    def body(n: Any, o: Any, *sp: Any) -> PrimExpr:
        chan = rc.var if groups == 1 else (o // out_per_group) * in_per_group + rc.var
        src = [sp[k] * strides[k] + rk[k].var * dilation[k] for k in range(nsp)]
        prod = xp[(n, chan, *src)] * w[(o, rc.var, *(r.var for r in rk))]
        return te.sum(prod, axis=[rc, *rk])

    return te.compute(ty.shape, body, "conv")


@register_compute("nn.conv_transpose")
def conv_transpose(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Transposed N-d convolution as a convolution of the implicitly upsampled input."""
    x, w = inputs
    check_dtype("nn.conv_transpose", x.dtype)
    ty = out_tensor_type(out_type)
    xshape, wshape = static_shape(x), static_shape(w)
    nsp = len(wshape) - 2
    strides, dilation, pad_begin, _ = _conv_attrs(attrs, nsp)
    groups = int(attrs["groups"])
    in_per_group = xshape[1] // groups
    out_per_group = wshape[1]
    kernel = wshape[2:]
    # position q of the upsampled input holds x[q / s] when s divides q; output y reads
    # q = y + k * d - lo, lo being the implicit "full" padding minus the requested one.
    # The upsampled, padded input is one buffer indexed by p = q + lo (branch-free reads).
    lo = [dilation[k] * (kernel[k] - 1) - pad_begin[k] for k in range(nsp)]
    out_sp = [int(d) for d in ty.shape[2:]]
    up_shape = [*xshape[:2], *(out_sp[k] + dilation[k] * (kernel[k] - 1) for k in range(nsp))]

    def upsampled(n: Any, c: Any, *p: Any) -> PrimExpr:
        conds = []
        src = []
        for k in range(nsp):
            q = p[k] - lo[k]
            if lo[k] > 0:
                conds.append(q >= 0)
            if up_shape[2 + k] - lo[k] > (xshape[2 + k] - 1) * strides[k] + 1:
                conds.append(q < (xshape[2 + k] - 1) * strides[k] + 1)
            if strides[k] > 1:
                conds.append(tir.eq(q % strides[k], 0))
                q = q // strides[k]
            src.append(q)
        if not conds:
            return x[(n, c, *src)]
        return tir.if_then_else(tir.logical_and(*conds), x[(n, c, *src)], scalar(0, x.dtype))

    up = te.compute(up_shape, upsampled, "upsampled", attrs={MATERIALIZE: True})
    rc = te.reduce_axis(in_per_group, "rc")
    rk = [te.reduce_axis(kernel[k], f"rk{k}") for k in range(nsp)]

    def body(n: Any, o: Any, *sp: Any) -> PrimExpr:
        if groups == 1:
            chan, oc = rc.var, o
        else:
            chan, oc = (o // out_per_group) * in_per_group + rc.var, o % out_per_group
        src = [sp[k] + rk[k].var * dilation[k] for k in range(nsp)]
        flipped = [kernel[k] - 1 - rk[k].var for k in range(nsp)]
        return te.sum(up[(n, chan, *src)] * w[(chan, oc, *flipped)], axis=[rc, *rk])

    return te.compute(ty.shape, body, "conv_transpose")


@register_compute("nn.dense")
def dense(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """x (..., K) times w (N, K) transposed."""
    x, w = inputs
    check_dtype("nn.dense", x.dtype)
    ty = out_tensor_type(out_type)
    k = static_shape(x)[-1]
    rk = te.reduce_axis(k, "rk")

    def body(*i: Any) -> PrimExpr:
        return te.sum(x[(*i[:-1], rk.var)] * w[i[-1], rk.var], axis=rk)

    return te.compute(ty.shape, body, "dense")


def _batch_index(shape: tuple[int, ...], batch: list[Any]) -> list[Any]:
    """Indices into the batch dims ``shape`` of one operand for output batch ``batch``."""
    offset = len(batch) - len(shape)
    return [tir_const(0, "int32") if d == 1 else batch[offset + k] for k, d in enumerate(shape)]


@register_compute("nn.matmul")
def matmul(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """numpy matmul: a 1-D lhs is a row, a 1-D rhs a column (both dropped from the result);
    batch dimensions broadcast."""
    a, b = inputs
    check_dtype("nn.matmul", a.dtype)
    ty = out_tensor_type(out_type)
    ashape, bshape = static_shape(a), static_shape(b)
    rk = te.reduce_axis(ashape[-1], "rk")

    def body(*index: Any) -> PrimExpr:
        idx = list(index)
        j = None if len(bshape) == 1 else idx.pop()
        i = None if len(ashape) == 1 else idx.pop()
        a_idx = [rk.var] if i is None else [*_batch_index(ashape[:-2], idx), i, rk.var]
        b_idx = [rk.var] if j is None else [*_batch_index(bshape[:-2], idx), rk.var, j]
        return te.sum(a[tuple(a_idx)] * b[tuple(b_idx)], axis=rk)

    acc = te.compute(ty.shape, body, "matmul")
    # an identity output stage (inlined into an epilogue), so that schedule_matmul can always
    # compute the reduction at a tile of the group's output
    return te.compute(ty.shape, lambda *i: acc[i], "matmul_out")


@register_legalize("nn.dense")
def dense_to_matmul(node: Call) -> Expr:
    """nn.dense with a constant weight -> nn.matmul with the weight transposed at compile
    time: the (K, N) layout makes the kernel's inner loop a contiguous, vectorised
    ``acc[j] += x[k] * w[k, j]`` (15-35x faster than dot products over (N, K) rows)."""
    x, w = node.args
    if not isinstance(w, Constant):
        return node
    wt = const(np.ascontiguousarray(np.asarray(w.data).T))
    return call("nn.matmul", x, wt, name=node.name)


#: whether products of single rows and a transposed computed matrix become dot products
#: along the matrix's rows (_row_times_transposed).
ROW_DOTS = True

#: a constant rhs whose column count this does not divide gets zero columns up to a multiple
#: of it (then a slice): 97 columns ran one scalar column at a time, 3 GFLOP/s.
MATMUL_PAD_COLUMNS = 16


#: a computed (not constant) rhs of more than this many columns, a number no multiple of
#: 8 divides, is zero-padded to a multiple of PAD_ACTIVATION_COLUMNS (then sliced): ViT's
#: attention scores, (3, 197, 64) @ (3, 64, 197), have no column tile without a tail, and a
#: tail tile's accumulators in memory took 3x the time of the others. One thread, thread
#: CPU time: 1.06 ms (tiles of one column), 0.18 ms (tiles of 64 and a tail) -> 0.078 ms padded
#: to 224 (0.074 and the 3.7 us pad, fused with the transpose of k), and an 8 us slice.
PAD_ACTIVATION_COLUMNS = 32
PAD_ACTIVATION_MIN = 64


def _pad_activation_rhs(node: Call) -> Expr | None:
    """``node`` (an nn.matmul of a computed rhs (..., K, N), N over PAD_ACTIVATION_MIN
    and not a multiple of 8) as the product with the rhs zero-padded to a multiple of
    PAD_ACTIVATION_COLUMNS columns, the extra columns sliced off; None otherwise."""
    a, b = node.args
    if isinstance(b, Constant) or not PAD_ACTIVATION_COLUMNS:
        return None
    aty, bty = a.type, b.type
    if not isinstance(aty, TensorType) or not isinstance(bty, TensorType):
        return None
    if len(bty.shape) < 2 or len(aty.shape) < 2 or bty.dtype != "float32":
        return None
    if not all(isinstance(d, int | np.integer) for d in (*aty.shape, *bty.shape)):
        return None
    cols = int(bty.shape[-1])
    if cols <= PAD_ACTIVATION_MIN or cols % 8 == 0:  # a multiple of 8: tiles without a tail
        return None
    pad = -cols % PAD_ACTIVATION_COLUMNS
    width = [0] * (2 * len(bty.shape))
    width[-1] = pad
    padded = call("nn.pad", b, pad_width=width)
    out = call("nn.matmul", a, padded, name=node.name)
    oty = node.type
    assert isinstance(oty, TensorType)
    shape = [int(d) for d in oty.shape]
    end = [*shape[:-1], cols]
    return call("strided_slice", out, begin=[0] * len(shape), end=end, strides=[1] * len(shape))


def _row_times_transposed(node: Call) -> Expr | None:
    """``x @ transpose(k)`` (the last two axes of a computed k swapped) where x has one row
    per batch, as ``sum(x * k, last axis)`` reshaped: each output a dot product along k's
    contiguous rows. GPT-2's decoding step (one query against 128 cached keys, 6 heads)
    materialized the cache's transpose, 16 us a layer, for a 3 us product."""
    a, b = node.args
    if not isinstance(b, Call) or b.op_name != "transpose":
        return None
    aty, kty, oty = a.type, b.args[0].type, node.type
    if not all(isinstance(t, TensorType) for t in (aty, kty, oty)):
        return None
    assert isinstance(aty, TensorType) and isinstance(kty, TensorType)
    assert isinstance(oty, TensorType)
    rank = len(kty.shape)
    swap = (*range(rank - 2), rank - 1, rank - 2)
    if rank < 2 or tuple(b.attrs["axes"]) != swap or len(aty.shape) < 2 or aty.shape[-2] != 1:
        return None
    if aty.dtype not in ("float32", "float64") or isinstance(b.args[0], Constant):
        return None
    products = call("multiply", a, b.args[0])
    dots = call("sum", products, axes=(len(oty.shape) - 1,), keepdims=False, name=node.name)
    return call("reshape", dots, newshape=tuple(int(d) for d in oty.shape))


@register_legalize("nn.matmul")
def matmul_rows(node: Call) -> Expr:
    """A matrix product the tiled schedule runs well: a batched lhs (..., M, K) times a
    matrix becomes one (B*M, K) x (K, N) product reshaped back (a (24, 1, 512) lhs read a
    512 KB weight once per batch row, 6x slower), and a constant (K, N) rhs with N over
    MATMUL_PAD_COLUMNS and no multiple of it gets zero columns, sliced off after."""
    a, b = node.args
    ashape = a.type.shape if isinstance(a.type, TensorType) else ()
    bshape = b.type.shape if isinstance(b.type, TensorType) else ()
    dots = _row_times_transposed(node) if ROW_DOTS else None
    if dots is not None:
        return dots
    if len(ashape) >= 2 and len(bshape) >= 2 and not isinstance(b, Constant):
        padded = _pad_activation_rhs(node)
        if padded is not None:
            return padded
    if len(ashape) < 2 or len(bshape) != 2:
        return node
    cols = int(bshape[1])
    pad = -cols % MATMUL_PAD_COLUMNS if isinstance(b, Constant) and cols > MATMUL_PAD_COLUMNS else 0
    dims = [int(d) for d in ashape]
    rows = int(np.prod(dims[:-1]))
    lhs = a if len(ashape) == 2 else call("reshape", a, newshape=(rows, dims[-1]))
    streamed = None if pad else streamed_matmul(lhs, b, rows)  # nn_rnn: column blocks
    if len(ashape) == 2 and not pad:
        return node if streamed is None else streamed
    if pad and isinstance(b, Constant):
        b = const(np.pad(np.asarray(b.data), ((0, 0), (0, pad))))
    out = streamed if streamed is not None else call("nn.matmul", lhs, b, name=node.name)
    if pad:
        out = call("strided_slice", out, begin=[0, 0], end=[rows, cols], strides=[1, 1])
    return out if len(ashape) == 2 else call("reshape", out, newshape=(*dims[:-1], cols))


register_schedule("nn.conv")(schedule_conv_anchor)
register_schedule("nn.conv_packed")(schedule_conv_packed)
register_schedule("nn.conv_transpose")(schedule_conv_anchor)
register_schedule("nn.conv_winograd")(schedule_winograd)
register_schedule("nn.matmul")(schedule_matmul)
register_schedule("nn.dense")(schedule_dot_anchor)


# --- convolutions with weights packed at compile time (nn_conv_pack) ----------------------


@register_legalize("nn.conv_transpose")
def legalize_conv_transpose(node: Call) -> Expr:
    """Kernel == stride: a packed 1x1 conv and a depth-to-space (ember.ops.nn_conv_transpose)."""
    return conv_transpose_to_pointwise(node)


@register_legalize("nn.conv")
def conv_to_packed(node: Call) -> Expr:
    """nn.conv with a constant weight -> nn.conv_packed with the weight re-laid out at
    compile time (output channels innermost, in blocks of PACK_BLOCKS; grouped convs when
    a block divides the channels of a group), or nn.conv_depthwise_packed (one filter per
    channel); anything else stays (a channels-last one between transposes). Where the build
    selects it, a 3x3 stride-1 one becomes nn.conv_winograd (ember.ops.nn_conv_winograd).
    A grouped one whose groups do not pack becomes one nn.conv per group
    (ember.ops.nn_conv_groups); one of narrow groups packs several groups a block where the
    target has their kernel (ember.ops.nn_conv_lane_groups). Kernel taps that only read
    padding are dropped first (ember.ops.nn_conv_dead_taps)."""
    pruned = drop_dead_taps(node)
    if pruned is not None:
        return pruned
    lanes = lane_groups_form(node)
    if lanes is not None:
        return lanes
    split = split_groups(node)
    if split is not None:
        return split
    wino = winograd_form(node)
    if wino is not None:
        return wino
    out = to_packed(node)
    return conv_channels_first(node) if out is node else out


@register_compute("nn.conv_packed")
def conv_packed(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """The packed-weight convolution: a channels-last reduction stage ``conv`` and a
    transposing output stage (inlined into the epilogue, or the group's output when there
    is none), so that the reduction can always be computed at a tile of the group's output."""
    x, wp = inputs
    check_dtype("nn.conv_packed", x.dtype)
    ty = out_tensor_type(out_type)
    first = bool(dict(attrs).get("taps_first", 0))  # quantized_conv_packed: none
    wp = taps_first_view(wp) if first else wp
    wshape = static_shape(wp)
    nsp = len(wshape) - 3
    strides, dilation, pad_begin, pad_end = _conv_attrs(attrs, nsp)
    block = wshape[-1]
    groups = int(attrs["groups"])
    blocks_per_group = wshape[0] // groups
    rc = te.reduce_axis(wshape[1], "rc")
    rk = [te.reduce_axis(wshape[2 + k], f"rk{k}") for k in range(nsp)]
    strided = any(int(v) > 1 for v in strides)
    kernel = kernel_layout(x.dtype, wshape, ty.shape, strided=strided)
    flat = pointwise(wshape[2:-1], strides, pad_begin, pad_end) and nsp > 1
    out_elems = int(np.prod([int(d) for d in ty.shape]))
    if data_layout(attrs) == "NHWC":  # nn_conv_nhwc: no copy but the padding, no transpose
        conv = _conv_attrs(attrs, nsp)
        if groups > wshape[0]:  # several groups a block: the lane-group kernel's tiles
            return conv_packed_nhwc(x, wp, ty, conv, groups, (True, False), first)
        tiles = nhwc_tiles(x.dtype, wshape, ty.shape, conv, groups)
        return conv_packed_nhwc(x, wp, ty, conv, groups, tiles, first)
    if lanes_layout(x.dtype, block, strides, tuple(ty.shape[2:]), flat, out_elems):
        xl = x if flat else pad_tensor(x, pad_begin, pad_end, materialize=True)
        return conv_position_lanes(xl, wp, ty.shape, strides, dilation, groups, flat)
    if kernel:  # blocks of 8 regrouped by 24 for the narrow kernel (nn_conv_narrow_layout)
        wp = widen_blocks(wp, groups)
        wshape, block = static_shape(wp), static_shape(wp)[-1]
        blocks_per_group = wshape[0] // groups
    shape = (ty.shape[0], *ty.shape[2:], wshape[0] * block)
    if (
        kernel
        and nsp > 1
        and strided_pointwise(wshape[2:-1], strides, pad_begin, pad_end, shape[-1])
    ):
        return flat_pointwise(x, wp, ty, shape, groups, blocks_per_group, kernel, strides)
    if kernel and not pointwise(wshape[2:-1], strides, pad_begin, pad_end):
        return conv_channels_last(
            x, wp, ty, strides, dilation, pad_begin, pad_end, groups, taps_outer=first
        )
    xp = pad_tensor(x, pad_begin, pad_end, materialize=True)

    def body(n: Any, *rest: Any) -> PrimExpr:
        *sp, o = rest
        src = [sp[k] * strides[k] + rk[k].var * dilation[k] for k in range(nsp)]
        taps = [r.var for r in rk]
        # a block never straddles two groups, so the group is a function of the block index
        # (uniform over the vector lanes once the tile's block is fixed)
        chan = rc.var if groups == 1 else (o // block) // blocks_per_group * wshape[1] + rc.var
        prod = xp[(n, chan, *src)] * wp[(o // block, rc.var, *taps, o % block)]
        return te.sum(prod, axis=[rc, *rk])

    # channels last, so that a tile's accumulators are ``block`` contiguous floats per column;
    # all the weight's channels (padding included), so that every tile is a whole block
    shape = (ty.shape[0], *ty.shape[2:], wshape[0] * block)
    if pointwise(wshape[2:-1], strides, pad_begin, pad_end) and nsp > 1:
        return flat_pointwise(x, wp, ty, shape, groups, blocks_per_group, kernel)
    acc = te.compute(shape, body, "conv", attrs={"block": block, TILE_KERNEL: 0})
    return te.compute(ty.shape, lambda n, o, *sp: acc[(n, *sp, o)], "conv_out")


@register_compute("nn.conv_winograd")
def conv_winograd(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Winograd F(m x m, 3 x 3): one call of ember_f32_winograd (ember.ops.nn_conv_winograd)."""
    return winograd_compute(inputs, attrs, out_type)


# --- depthwise convolutions (packed by nn_conv_pack) ---------------------------------------


@register_compute("nn.conv_depthwise_packed")
def conv_depthwise_packed(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """The channel-blocked padded input (materialised), a channels-last reduction stage
    ``conv`` over the kernel taps and a transposing output stage, as in conv_packed."""
    x, wp = inputs
    check_dtype("nn.conv_depthwise_packed", x.dtype)
    ty = out_tensor_type(out_type)
    if data_layout(attrs) == "NHWC":  # nn_conv_nhwc: channels across the vector lanes
        return depthwise_nhwc(x, wp, ty.shape, _conv_attrs(attrs, len(ty.shape) - 2))
    if use_rows(ty.shape, static_shape(x), attrs):
        return depthwise_rows(x, wp, attrs, ty.shape)
    xshape, wshape = static_shape(x), static_shape(wp)
    nsp = len(wshape) - 2
    strides, dilation, pad_begin, pad_end = _conv_attrs(attrs, nsp)
    block = wshape[-1]
    padded = [xshape[2 + k] + pad_begin[k] + pad_end[k] for k in range(nsp)]

    def blocked(n: Any, cb: Any, *rest: Any) -> PrimExpr:
        *p, ci = rest
        conds = []
        src = []
        for k in range(nsp):
            pos = p[k] - pad_begin[k]
            if pad_begin[k] > 0:
                conds.append(pos >= 0)
            if pad_end[k] > 0:
                conds.append(pos < xshape[2 + k])
            src.append(pos)
        value = x[(n, cb * block + ci, *src)]
        if not conds:
            return value
        return tir.if_then_else(tir.logical_and(*conds), value, scalar(0, x.dtype))

    shape_b = (xshape[0], xshape[1] // block, *padded, block)
    xb = te.compute(shape_b, blocked, "pad_blocked", attrs={MATERIALIZE: True})
    rk = [te.reduce_axis(wshape[1 + k], f"rk{k}") for k in range(nsp)]

    def body(n: Any, *rest: Any) -> PrimExpr:
        *sp, c = rest
        src = [sp[k] * strides[k] + rk[k].var * dilation[k] for k in range(nsp)]
        taps = [r.var for r in rk]
        prod = xb[(n, c // block, *src, c % block)] * wp[(c // block, *taps, c % block)]
        return te.sum(prod, axis=rk)

    shape = (ty.shape[0], *ty.shape[2:], ty.shape[1])
    acc = te.compute(shape, body, "conv", attrs={"block": block})
    return te.compute(ty.shape, lambda n, c, *sp: acc[(n, *sp, c)], "conv_out")


register_schedule("nn.conv_depthwise_packed")(schedule_depthwise)
