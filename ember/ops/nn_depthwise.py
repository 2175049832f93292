"""Depthwise convolutions on wide images: rows of NCHW, vectorised along the output width.

``nn.conv_depthwise_packed`` (ember.ops.nn_conv) computes narrow images channel-blocked:
the b channels of a block are the vector lanes, which needs a channel-blocked copy of the
padded input (a transposition) and writes the output back through a transposition. On
wide images rows are long enough to fill the vector lanes on their own, so both
transpositions are waste: ``depthwise_rows`` reads the padded input in NCHW and the anchor
schedule (nn_schedule.schedule_anchor) computes one output row per parallel iteration,
``acc[w] += xs[.., w + shift] * weight`` vectorised along w. For stride s > 1 along the
width the padded copy is split by column parity once, ``xs[..., r, j] = padded[..., j*s +
r]``, so that every tap reads a contiguous run (tap kw reads parity (kw*d) % s from column
(kw*d) // s on); the copy reads the input once, in order.
"""

from __future__ import annotations

from typing import Any

from ember import tir
from ember.ir.op import Attrs
from ember.ir.ops.common import padding, spatial
from ember.ops.common import scalar, static_shape
from ember.ops.nn_conv_nhwc import channels_last_stage, depthwise_cols, schedule_channels_last
from ember.ops.nn_depthwise_kernel import depthwise_kernel_cols, depthwise_kernel_rewrite
from ember.ops.nn_schedule import (
    MATERIALIZE,
    MIN_PARALLEL_WORK,
    MIN_VECTOR_EXTENT,
    _extent,
    _size,
    materialize_tagged,
    reduction_stages,
)
from ember.ops.nn_schedule_tiles import _tile_cols, schedule_packed_conv
from ember.ops.registry import ScheduleContext
from ember.tir import PrimExpr, te

#: output rows at least this wide are computed as NCHW rows (depthwise_rows), narrower ones
#: channel-blocked.
ROW_MIN_WIDTH = 28


#: the attributes of the padded copies: own buffers, computed per channel (schedule_depthwise).
_PER_CHANNEL = {MATERIALIZE: True, "per_channel": True}


def use_rows(out_shape: tuple[int, ...], in_shape: tuple[int, ...], attrs: Attrs) -> bool:
    """Whether a depthwise convolution of ``in_shape`` data with output ``out_shape`` runs
    as NCHW rows: outputs at least ROW_MIN_WIDTH wide (strided ones too: their copies are
    made per output row, so any plane size fits the stack)."""
    del in_shape, attrs  # the choice depends on the output width alone
    return len(out_shape) >= 3 and int(out_shape[-1]) >= ROW_MIN_WIDTH


def _split_padded(
    x: te.Tensor, before: tuple[int, ...], after: tuple[int, ...], stride: int
) -> te.Tensor:
    """The zero-padded input (N, C, *sp) with its last axis split by ``stride``:
    ``(N, C, *padded[:-1], stride, ceil(padded[-1] / stride))``, ``[..., r, j]`` holding
    padded column ``j * stride + r`` (zero past the end). Two copies when stride > 1: the
    padded one (masked contiguous loads) and the split (plain strided loads); one copy
    selecting from strided columns is a masked gather, 3x slower than both."""
    shape = static_shape(x)
    nsp = len(shape) - 2
    padded = [shape[2 + k] + before[k] + after[k] for k in range(nsp)]
    cols = -(-padded[-1] // stride)
    padded[-1] = cols * stride
    out_shape = (*shape[:2], *padded[:-1], stride, cols)

    def pad(n: Any, c: Any, *p: Any) -> PrimExpr:
        pos = [p[k] - before[k] for k in range(nsp)]
        conds = []
        for k in range(nsp):
            if before[k] > 0:
                conds.append(pos[k] >= 0)
            if padded[k] - before[k] > shape[2 + k]:
                conds.append(pos[k] < shape[2 + k])
        value = x[(n, c, *pos)]
        if not conds:
            return value
        return tir.if_then_else(tir.logical_and(*conds), value, scalar(0, x.dtype))

    xp = te.compute((*shape[:2], *padded), pad, "pad", attrs=_PER_CHANNEL)
    if stride == 1:
        return xp

    def split(n: Any, c: Any, *i: Any) -> PrimExpr:
        *rows, r, j = i
        return xp[(n, c, *rows, j * stride + r)]

    return te.compute(out_shape, split, "pad_split", attrs=_PER_CHANNEL)


def depthwise_rows(x: te.Tensor, wp: te.Tensor, attrs: Attrs, shape: tuple[int, ...]) -> te.Tensor:
    """The depthwise convolution of ``x`` (N, C, *sp) with the packed weight ``wp``
    (C/b, *k, b) as one reduction stage over the kernel taps, output ``shape`` in NCHW."""
    wshape = static_shape(wp)
    nsp = len(wshape) - 2
    block = wshape[-1]
    strides = spatial(attrs, "strides", nsp, 1)
    dilation = spatial(attrs, "dilation", nsp, 1)
    pads = padding(attrs, nsp)
    s = strides[-1]
    xs = _split_padded(x, tuple(b for b, _ in pads), tuple(e for _, e in pads), s)
    rk = [te.reduce_axis(wshape[1 + k], f"rk{k}") for k in range(nsp)]

    def body(n: Any, c: Any, *o: Any) -> PrimExpr:
        src = [o[k] * strides[k] + rk[k].var * dilation[k] for k in range(nsp - 1)]
        tap = rk[-1].var * dilation[-1]
        col = (o[-1] + tap,) if s == 1 else (tap % s, o[-1] + tap // s)
        value = xs[(n, c, *src, *col)]
        return te.sum(value * wp[(c // block, *(r.var for r in rk), c % block)], axis=rk)

    return te.compute(shape, body, "conv", attrs={"rows": True})


#: vector lanes of a row tile (AVX2 floats) and the widest row tile, in columns: a tile's
#: accumulators are tile / ROW_LANES vector registers, kept there across the kernel taps.
ROW_LANES = 8
ROW_TILE = 64


def schedule_depthwise(ctx: ScheduleContext) -> None:
    """nn.conv_depthwise_packed: NCHW rows (a reduction stage tagged ``rows``) register-tiled
    along the width, their accumulators t / 8 vectors whose loops run ``taps..., w/8
    (unrolled), w%8 (vectorised)``, t the widest multiple of 8 dividing the width (_row_cols):
    stride 1 computes a tile per parallel iteration of the output (``n, c, h, w/t``) from a
    padded copy made at root; strided ones compute a row per parallel iteration (``n, c,
    h``), its two copies (padded, split by parity) made in that iteration for the rows it
    reads. Measured one thread, CPU time, busy machine, median (per channel -> per row):
    96x112x112 stride 2 1.21 -> 0.83 ms, 144x56x56 0.46 -> 0.29 ms; DBNet's 32x160x160
    (channel-blocked before: its plane outgrew the stack) 2.0 -> 1.35 ms. The
    channel-blocked form takes schedule_packed_conv, the channels-last one (nn_conv_nhwc)
    schedule_channels_last."""
    if channels_last_stage(ctx) is not None:
        cols = depthwise_kernel_cols(ctx)  # rows of ember_f32_dw3x3 calls (or 0: none)
        if cols:
            ctx.post_lower.append(depthwise_kernel_rewrite)
        schedule_channels_last(ctx, cols or depthwise_cols(ctx), blocks_inner=True)
        return
    sch = ctx.sch
    outputs = list(ctx.group_outputs)
    reds = reduction_stages(sch, outputs)
    rows = [r for r in reds if _is_rows(r)]
    main = sch[outputs[0]]
    op = main.op
    ok = len(outputs) == 1 and isinstance(op, te.ComputeOp) and not op.reduce_axis
    if not rows or not ok or not isinstance(op, te.ComputeOp) or len(rows) != len(reds):
        schedule_packed_conv(ctx, max_cols=_blocked_cols(outputs[0]))
        return
    acc = rows[0]
    acc_op = acc.op
    assert isinstance(acc_op, te.ComputeOp)
    axes = list(op.axis)
    copies = _per_channel(sch)
    work = _size(axes) * _size(acc_op.reduce_axis)
    if len(copies) == 1:  # stride 1: a row tile per iteration, the padded copy at root
        cols = _row_cols(_extent(axes[-1]))
        wo, wi = main.split(axes[-1], factor=cols)
        outer = main.fuse(*axes[:-1], wo)
        main.vectorize(wi)
    else:  # strided: a row per iteration, its copies made there
        outer = main.fuse(*axes[:-1])
        if _extent(axes[-1]) >= MIN_VECTOR_EXTENT:
            main.vectorize(axes[-1])
    if work >= MIN_PARALLEL_WORK and _extent(outer) > 1:
        main.parallel(outer)
    acc.compute_at(main, outer)
    a_axes = list(acc_op.axis)
    if len(copies) == 1:
        _tile_row(acc, a_axes[-1], cols, a_axes[:-1])
    else:
        cols = _row_cols(_extent(a_axes[-1]))
        wo, wi = acc.split(a_axes[-1], factor=cols)
        _tile_row(acc, wi, cols, [*a_axes[:-1], wo])
        row = len(a_axes) - 2
        parent, at = acc, a_axes[row]
        for stage in reversed(copies):  # the split copy reads the padded one
            stage.compute_at(parent, at)
            copy_op = stage.op
            assert isinstance(copy_op, te.ComputeOp)
            stage.vectorize(copy_op.axis[-1])
            parent, at = stage, copy_op.axis[row]
    materialize_tagged(sch, outputs)


#: channel-blocked rows at most this wide are one register tile (2 x width accumulators):
#: ds_cnn_kws's rows of 5 took a tile of 4 and a guarded one of 4 for the fifth column.
WHOLE_ROW_COLS = 6


def _blocked_cols(out: te.Tensor) -> int:
    """The widest register tile of a channel-blocked depthwise output (0: the default)."""
    shape = static_shape(out)
    width = int(shape[-1]) if len(shape) >= 3 else 0
    return width if 0 < width <= WHOLE_ROW_COLS else 0


def _row_cols(width: int) -> int:
    """The columns of a row tile: the widest multiple of ROW_LANES up to ROW_TILE that
    divides ``width`` (80 -> 40, 112 -> 56: no guarded tail inside the taps' loops), else
    _tile_cols's choice."""
    exact = [c for c in range(ROW_LANES, ROW_TILE + 1, ROW_LANES) if width % c == 0]
    return max(exact) if exact else _tile_cols(width, ROW_TILE)


def _tile_row(acc: te.Stage, axis: te.IterVar, cols: int, before: list[te.IterVar]) -> None:
    """Loops of a row tile of ``cols`` accumulators: ``before..., taps..., axis`` with
    ``axis`` split into vectors of ROW_LANES (unrolled) when it holds several."""
    op = acc.op
    assert isinstance(op, te.ComputeOp)
    if cols % ROW_LANES == 0 and cols > ROW_LANES:
        vo, vi = acc.split(axis, factor=ROW_LANES)
        acc.reorder(*before, *op.reduce_axis, vo, vi)
        acc.unroll(vo)
        acc.vectorize(vi)
    else:
        acc.reorder(*before, *op.reduce_axis, axis)
        acc.vectorize(axis)


def _per_channel(sch: te.Schedule) -> list[te.Stage]:
    """The stages tagged ``per_channel`` (the padded copies of depthwise_rows)."""
    return [
        sch[op]
        for op in sch.ops
        if isinstance(op, te.ComputeOp) and op.attrs.get("per_channel") and not sch[op].inlined
    ]


def _is_rows(stage: te.Stage) -> bool:
    op = stage.op
    return isinstance(op, te.ComputeOp) and bool(op.attrs.get("rows"))
