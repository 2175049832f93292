"""Packed float32 convolutions with the output positions as the vector lanes (NCHW tiles).

nn.conv_packed's usual tiles hold a few output positions x 16 output channels (the lanes),
so its epilogue writes the NCHW output one position at a time, 16 channels apart: scalar
stores ``H*W`` floats apart. When ``H*W*4`` is a multiple of 4096 bytes every channel's
row maps to the same L1 set and the 16 stores of a position evict each other (dbnet's 1x1
8->32 at 160x160, one thread: 2.6 ms; at 160x161 0.74 ms). Here a tile is one block of 16
output channels x 16 consecutive output positions of a row (of the flattened positions for
a 1x1 stride-1 unpadded convolution), the positions being the lanes::

    acc[o, p:p+16] += w[o, c, kh, kw] * x[c, h + kh, p + kw : p + kw + 16]

which is the micro-kernel's tile with the roles of its operands exchanged (the weight is
broadcast, the input loaded as two vectors: ember.ops.nn_conv_f32); the input stays NCHW
(no transposed copy) and the epilogue writes 16 contiguous floats per channel. It needs
unit stride along the row and rows (or positions) a multiple of 16 (``position_lanes``).
"""

from __future__ import annotations

from typing import Any

from ember.ops.common import static_shape
from ember.ops.nn_conv_f32 import BLOCK, loop_tiles_win, use_tile_kernel
from ember.ops.nn_conv_nhwc import channels_last_stage, llvm_loop_tiles, schedule_channels_last
from ember.ops.nn_conv_rewrite import (
    INTERPRET_EXTERNS,
    conv_tile_reference,
    tile_kernel_rewrite,
)
from ember.ops.nn_schedule import (
    MIN_PARALLEL_WORK,
    _compute_op,
    _extent,
    _size,
    materialize_tagged,
    reduction_stages,
    schedule_root_reduction,
)
from ember.ops.nn_schedule_tiles import register_tiles, schedule_dense_packed_conv
from ember.ops.registry import ScheduleContext
from ember.tir import IRMutator, PrimExpr, PrimFunc, simplify, te
from ember.tir.expr import Call, FloatImm, IntImm, const
from ember.tir.op import call_extern
from ember.tir.stmt import BufferStore, Evaluate, For, SeqStmt, Stmt

#: attribute of the reduction stage of a position-lanes convolution (its value: 1).
POSITION_LANES = "position_lanes"


#: position-lane tiles are taken for images of at most this many output positions, or of
#: a multiple of it (4 KiB rows: the usual tiles' stores alias in L1). Measured per layer
#: (one thread, thread CPU time, builds interleaved, load 7-10; lanes/usual): 3x3 3->16 at
#: 32x32 0.50, 16->16 at 32x32 0.87 (0.6 against the kernel), 32->32 at 16x16 0.92; 1x1
#: 8->32 at 160x160 0.35-0.68, 144->32 at 28x28 0.60; but 1x1 16->96 at 80x80 1.42-1.66,
#: at 112x112 1.61, 32->16 at 112x112 1.35, 24->120 at 40x40 1.09.
LANES_POSITIONS = 1024


def position_lanes(
    block: int, strides: tuple[int, ...], out_spatial: tuple[int, ...], flat: bool
) -> bool:
    """Whether a packed convolution takes position-lane tiles: blocks of BLOCK output
    channels, unit stride along the row, 16 dividing the row (all positions when ``flat``,
    a 1x1 stride-1 unpadded convolution), and a small or 4 KiB-aliasing image (above)."""
    if block != BLOCK or not out_spatial or strides[-1] != 1:
        return False
    positions = 1
    for d in out_spatial:
        positions *= int(d)
    if (positions if flat else int(out_spatial[-1])) % BLOCK:
        return False
    return positions <= LANES_POSITIONS or positions % LANES_POSITIONS == 0


def conv_position_lanes(
    xp: te.Tensor,
    wp: te.Tensor,
    out_shape: tuple[Any, ...],
    strides: tuple[int, ...],
    dilation: tuple[int, ...],
    groups: int,
    flat: bool,
) -> te.Tensor:
    """The reduction stage ``conv`` (N, channels padded to blocks, *out spatial), or (N,
    channels, positions) when ``flat``, reading the NCHW (padded) input ``xp``, reductions
    ordered kernel taps then input channels, and the output stage ``conv_out``."""
    wshape = static_shape(wp)
    nsp = len(wshape) - 3
    block = wshape[-1]
    per_group = wshape[0] // groups
    sp = [int(d) for d in out_shape[2:]]
    rk = [te.reduce_axis(wshape[2 + k], f"rk{k}") for k in range(nsp)]
    rc = te.reduce_axis(wshape[1], "rc")

    def reduce(n: Any, o: Any, pos: list[Any]) -> PrimExpr:
        src = [pos[k] * strides[k] + rk[k].var * dilation[k] for k in range(nsp)]
        chan = rc.var if groups == 1 else (o // block) // per_group * wshape[1] + rc.var
        w = wp[(o // block, rc.var, *[r.var for r in rk], o % block)]
        return te.sum(w * xp[(n, chan, *src)], axis=[*rk, rc])

    channels = wshape[0] * block
    if flat:

        def flat_body(n: Any, o: Any, p: Any) -> PrimExpr:
            idx = []
            rest = p
            for k in range(nsp - 1, -1, -1):
                idx.append(rest % sp[k] if k else rest)
                rest = rest // sp[k]
            return reduce(n, o, idx[::-1])

        positions = 1
        for d in sp:
            positions *= d
        attrs = {"block": block, POSITION_LANES: 1}
        acc = te.compute((out_shape[0], channels, positions), flat_body, "conv", attrs=attrs)

        def out(n: Any, o: Any, *i: Any) -> PrimExpr:
            p = i[0]
            for k in range(1, nsp):
                p = p * sp[k] + i[k]
            return acc[(n, o, p)]

        return te.compute(out_shape, out, "conv_out")
    shape = (out_shape[0], channels, *sp)
    acc = te.compute(
        shape,
        lambda n, o, *pos: reduce(n, o, list(pos)),
        "conv",
        attrs={"block": block, POSITION_LANES: 1},
    )
    return te.compute(out_shape, lambda n, o, *pos: acc[(n, o, *pos)], "conv_out")


def _group_block(ctx: ScheduleContext) -> int:
    """The output channels per tile of the group's packed convolution (BLOCK if none)."""
    for stage in reduction_stages(ctx.sch, list(ctx.group_outputs)):
        op = _compute_op(stage)
        if op is not None and op.attrs.get("block"):
            return int(op.attrs["block"])
    return BLOCK


def _outputs(ctx: ScheduleContext) -> int:
    """The output elements of the group's output."""
    count = 1
    for d in static_shape(ctx.group_outputs[0]):
        count *= int(d)
    return count


def _positions(ctx: ScheduleContext) -> int:
    """The output positions of the group's (N, C, *spatial) output."""
    count = 1
    for d in static_shape(ctx.group_outputs[0])[2:]:
        count *= int(d)
    return count


#: the fewest input channels for which loop-IR tiles call the kernel (loop_tiles_call_kernel).
MIN_LOOP_KERNEL_CHANNELS = 8


def loop_tiles_call_kernel(ctx: ScheduleContext) -> None:
    """On the micro-kernel's targets, the loop-IR tiles of a short reduction (the NCHW
    layout, e.g. resnet8's stride-2 convolutions) become calls of ember_f32_conv_tile too:
    gcc compiles their nest with the weight loads folded into every FMA (12 loads per 8
    FMAs) and the 3x3 taps as loops of 3; the kernel keeps the weights in registers. Not
    for fewer than MIN_LOOP_KERNEL_CHANNELS input channels unless a tile is a whole row
    (ds_cnn_kws's 10x4 1->64 stem at 25x5: tiles of 4 and 1 columns 20.0 against 18.1 us
    without the kernel; whole rows 16.5 against 18.3), nor for 1x1 convolutions over
    flattened positions (its 1x1 64->64 at 25x5: ds_cnn_kws 0.1151 -> 0.1199 ms best of
    1000, load 8.5)."""
    if not use_tile_kernel(ctx.target, ctx.group_outputs[0].dtype):
        return
    rank = len(static_shape(ctx.group_outputs[0]))
    if loop_tiles_win(ctx.target, _group_block(ctx), _positions(ctx), _outputs(ctx)):
        return
    least = 1 if whole_row_cols(ctx) else MIN_LOOP_KERNEL_CHANNELS
    for stage in reduction_stages(ctx.sch, list(ctx.group_outputs)):
        op = _compute_op(stage)
        channels = [_extent(r) for r in op.reduce_axis if r.var.name == "rc"] if op else []
        if not channels or channels[0] < least:
            return
        if op is None or len(op.axis) != rank:  # 1x1 over flattened positions: no gain
            return
    if tile_kernel_rewrite not in ctx.post_lower:
        ctx.post_lower.append(tile_kernel_rewrite)


#: output rows at most this wide are one register tile of the loop-IR schedule (2 x width
#: accumulators) on the micro-kernel's targets: ds_cnn_kws's 10x4 stem at 25x5 took a tile
#: of 4 columns and a guarded one for the fifth.
WHOLE_ROW_COLS = 6


def whole_row_cols(ctx: ScheduleContext) -> int:
    """The widest register tile for schedule_packed_conv (0: its default), see above."""
    if not use_tile_kernel(ctx.target, ctx.group_outputs[0].dtype):
        return 0
    if loop_tiles_win(ctx.target, _group_block(ctx), _positions(ctx), _outputs(ctx)):
        return 0
    shape = static_shape(ctx.group_outputs[0])
    width = int(shape[-1]) if len(shape) >= 3 else 0
    return width if 0 < width <= WHOLE_ROW_COLS else 0


#: the fewest output columns per register tile of a channels-last stem (at most
#: STEM_CHANNELS input channels per group) on AVX-512 C targets, which take the widest
#: tile from it up to the target's (14 columns) that divides the row: no guarded tail.
#: yolo's 3->16 stem at 160x160 (SiLU), one thread, thread CPU time, A/B interleaved:
#: 14 columns and a tail of 6 0.2665 ms, 10 columns 0.2435; 16 columns ran slower
#: everywhere (mobilenet_v2's 3->32 at 112x112 0.156 -> 0.208 ms), 10 with a tail at 112
#: too (pp_lcnet's 3->16 0.076 -> 0.081). 0: never.
STEM_MIN_COLS = 10
#: such stems run a tile's blocks of output channels one after the other (its input rows
#: stay in L1; False: each block over the whole image): mobilenet_v2's 3->32 at 112x112,
#: A/B as above, 0.1371 -> 0.1323 and 0.1483 -> 0.1387 ms.
STEM_BLOCKS_INNER = True
#: the most input channels per group of a stem (STEM_MIN_COLS; the zoo's stems: 3).
STEM_CHANNELS = 4


def stem_cols(ctx: ScheduleContext, acc: te.Stage) -> int:
    """The register tile's columns for the channels-last reduction ``acc`` of a packed
    convolution with few input channels on an AVX-512 C target (see STEM_MIN_COLS; such
    stems also take STEM_BLOCKS_INNER), 0 for the schedule's default (no stem)."""
    keys = set(ctx.target.keys)
    if "x86-avx512" not in keys or "llvm" in keys or ctx.group_outputs[0].dtype != "float32":
        return 0
    op = _compute_op(acc)
    shape = static_shape(ctx.group_outputs[0])
    if op is None or not STEM_MIN_COLS or len(shape) != 4:
        return 0
    channels = [_extent(r) for r in op.reduce_axis if r.var.name == "rc"]
    if not channels or channels[0] > STEM_CHANNELS:
        return 0
    width, most = int(shape[-2]), register_tiles(ctx.target).conv_cols
    fits = [d for d in range(STEM_MIN_COLS, most + 1) if width % d == 0]
    if fits and width % most:
        return max(fits)
    return most if STEM_BLOCKS_INNER else 0


def schedule_conv_packed(ctx: ScheduleContext) -> None:
    """nn.conv_packed's schedule: position-lane tiles for the stages conv_position_lanes
    made, channels-last ones (nn_conv_nhwc; stems on AVX-512 as stem_cols says), else
    schedule_dense_packed_conv."""
    stage = channels_last_stage(ctx)
    if stage is not None:
        cols = stem_cols(ctx, stage)
        schedule_channels_last(ctx, cols, blocks_inner=bool(cols) and STEM_BLOCKS_INNER)
        if not llvm_loop_tiles(ctx):
            loop_tiles_call_kernel(ctx)
        return
    sch = ctx.sch
    outputs = list(ctx.group_outputs)
    reds = reduction_stages(sch, outputs)
    lanes = [r for r in reds if (op := _compute_op(r)) is not None and op.attrs.get(POSITION_LANES)]
    main = sch[outputs[0]]
    op = _compute_op(main)
    if len(lanes) != 1 or len(outputs) != 1 or op is None or op.reduce_axis:
        schedule_dense_packed_conv(ctx, whole_row_cols(ctx))
        loop_tiles_call_kernel(ctx)
        return
    acc = lanes[0]
    acc_op = _compute_op(acc)
    assert acc_op is not None
    materialize_tagged(sch, outputs)
    axes = list(op.axis)
    oo, oi = main.split(axes[1], factor=int(acc_op.attrs["block"]))
    flat = len(acc_op.axis) == 3 and len(axes) > 3
    if flat:
        middle: list[te.IterVar] = []
        row = main.fuse(*axes[2:])
    else:
        middle, row = axes[2:-1], axes[-1]
    po, pi = main.split(row, factor=BLOCK)
    main.reorder(axes[0], oo, *middle, po, oi, pi)
    outer = main.fuse(axes[0], oo, *middle, po)
    if _size(axes) * _size(acc_op.reduce_axis) >= MIN_PARALLEL_WORK and _extent(outer) > 1:
        main.parallel(outer)
    main.vectorize(pi)
    acc.compute_at(main, outer)
    a = list(acc_op.axis)
    acc.reorder(a[0], *a[2:-1], *acc_op.reduce_axis, a[1], a[-1])
    acc.vectorize(a[-1])
    for stage in reds:
        if stage is not acc:
            schedule_root_reduction(stage)
    ctx.post_lower.append(lanes_kernel_rewrite)


# --- the position-lane kernel call -------------------------------------------------------
#
# tile_kernel_rewrite turns a tile's reduction nest into a call of ember_f32_conv_tile; the
# lanes schedule then calls ember_f32_lanes_tile instead (ember/codegen/c/f32_lanes.py: each
# register tile over the whole reduction; 27 calls of 3-16 steps each before), and drops
# the zeroing nest just before the call when it covers the whole tile (the kernel starts
# from zeroed registers: the zeroing was 10-16% of a tile's time).

_CONV_TILE = "ember_f32_conv_tile"
_LANES_TILE = "ember_f32_lanes_tile"


def _lanes_call(call: Call, zero: int) -> Evaluate:
    """``call`` (of ember_f32_conv_tile) as ember_f32_lanes_tile with the flag ``zero``."""
    args = [*call.args[:9], const(zero, "int32"), *call.args[9:]]
    return Evaluate(call_extern("int32", _LANES_TILE, *args))


def _tile_call(s: Stmt) -> Call | None:
    if isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.op == _CONV_TILE:
        return s.value
    return None


def _zeroes_tile(init: Stmt, call: Call) -> bool:
    """Whether ``init`` is a loop nest storing 0 to every element of ``call``'s
    accumulators: a compact buffer of ncols x BLOCK floats, each visited once."""
    loops: list[For] = []
    body = init
    while isinstance(body, For):
        loops.append(body)
        body = body.body
    if not loops or not isinstance(body, BufferStore) or body.buffer.data is not call.args[0]:
        return False
    if not (isinstance(body.value, FloatImm) and body.value.value == 0.0):
        return False
    ncols, buf = call.args[5], body.buffer
    shape = buf.const_shape()
    if not isinstance(ncols, IntImm) or shape is None or buf.strides:
        return False
    if any(
        not isinstance(f.min, IntImm) or f.min.value or not isinstance(f.extent, IntImm)
        for f in loops
    ):
        return False
    size = 1
    for d in shape:
        size *= int(d)
    if size != ncols.value * BLOCK:
        return False
    # the row-major offset of the store must be the nest's own row-major counter
    flat: PrimExpr = const(0, "int32")
    for idx, dim in zip(body.indices, shape, strict=True):
        flat = flat * int(dim) + idx
    count: PrimExpr = const(0, "int32")
    for f in loops:
        count = count * f.extent + f.loop_var  # type: ignore[operator]
    diff = simplify(flat - count)
    return isinstance(diff, IntImm) and diff.value == 0 and _extent_product(loops) == size


def _extent_product(loops: list[For]) -> int:
    total = 1
    for f in loops:
        total *= int(f.extent.value)  # type: ignore[attr-defined]
    return total


class _LanesRewrite(IRMutator):
    def visit_Evaluate(self, s: Evaluate) -> Stmt:  # noqa: N802 - visitor naming
        call = _tile_call(s)
        return _lanes_call(call, 0) if call is not None else s

    def visit_SeqStmt(self, s: SeqStmt) -> Stmt:  # noqa: N802 - visitor naming
        out: list[Stmt] = []
        k = 0
        while k < len(s.seq):
            call = _tile_call(s.seq[k + 1]) if k + 1 < len(s.seq) else None
            if call is not None and _zeroes_tile(s.seq[k], call):
                out.append(_lanes_call(call, 1))
                k += 2
                continue
            out.append(self.visit_stmt(s.seq[k]))
            k += 1
        return out[0] if len(out) == 1 else SeqStmt(tuple(out))


def lanes_kernel_rewrite(func: PrimFunc) -> PrimFunc:
    """``func`` with its tile reductions calls of ember_f32_lanes_tile (see above)."""
    return _LanesRewrite().visit_func(tile_kernel_rewrite(func))


def lanes_tile_reference(acc: list[float], *args: Any) -> int:
    """ember_f32_lanes_tile in Python, for the TIR interpreter: ember_f32_conv_tile's
    arguments with the flag ``zero`` after ``cr`` (the 9th)."""
    ncols, zero = args[4], args[8]
    if zero:
        for k in range(max(ncols, 0) * BLOCK):
            acc[k] = 0.0
    return conv_tile_reference(acc, *args[:8], *args[9:])


# the interpreter's table of kernels (nn_conv_rewrite cannot import this module: it imports it)
INTERPRET_EXTERNS[_LANES_TILE] = lanes_tile_reference  # type: ignore[assignment]
