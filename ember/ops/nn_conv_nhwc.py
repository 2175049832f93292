"""Channels-last convolutions (attribute ``data_layout="NHWC"``, planned by the
convert_layout pass): their legalization fallback, the depthwise compute and the schedule
of both packed forms.

An NHWC ``nn.conv_packed`` (ember.ops.nn_conv_layouts.conv_channels_last) and
``nn.conv_depthwise_packed`` (depthwise_channels_last) reduce into the same channels-last
accumulator ``conv[n, *sp, o]`` as the NCHW kernels, but their input needs no
channels-last copy (a padded copy when padded, else none) and their output stage is the
accumulator itself, so the epilogue writes contiguous channels. schedule_channels_last
tiles the output ``n, o/b, rows..., w/t | h%r, w%t, o%b`` as schedule_packed_conv tiles
NCHW outputs, with the same register tiles and micro-kernel calls.
"""

from __future__ import annotations

from typing import Any

from ember import tir
from ember.ir.expr import Call, Expr, call
from ember.ir.ops.common import channels_first_axes, channels_last_axes, data_layout
from ember.ir.types import TensorType
from ember.ops.common import scalar, static_shape
from ember.ops.nn_conv_f32 import (
    BLOCK,
    TILE_KERNEL,
    WHOLE_IMAGE_POSITIONS,
    block_kernel,
    kernel_max_cols,
    kernel_tile,
    positions_outer,
)
from ember.ops.nn_conv_flat import FLAT_TILE_LANES, flat_tile_blocks
from ember.ops.nn_conv_layouts import (
    CHANNELS_LAST_OUT,
    CHANNELS_LAST_PAD,
    GROUP_BLOCKS,
    conv_channels_last,
)
from ember.ops.nn_conv_narrow import NARROW_KERNELS, narrow_kernel_tile
from ember.ops.nn_conv_narrow_layout import widen_blocks
from ember.ops.nn_conv_pair import PAIR_MAX_COLS, pad_free, pair_blocks
from ember.ops.nn_conv_rewrite import tile_kernel_rewrite
from ember.ops.nn_schedule import (
    MATERIALIZE,
    MIN_PARALLEL_WORK,
    MIN_VECTOR_EXTENT,
    _compute_op,
    _extent,
    _size,
    _stage_shape,
    reduction_stages,
    schedule_anchor,
    schedule_output,
)
from ember.ops.nn_schedule_tiles import _tile_cols, register_tiles, tile_accumulator
from ember.ops.registry import COMPUTE_TARGET, ScheduleContext
from ember.tir import PrimExpr, te

#: the attribute naming a convolution's data layout (ember.ir.ops.common.DATA_LAYOUTS).
LAYOUT = "data_layout"


def conv_channels_first(node: Call) -> Expr:
    """An NHWC nn.conv that stays unpacked as the NCHW one between two transposes (the
    unpacked compute is channels first); an NCHW one unchanged."""
    if data_layout(node.attrs) != "NHWC":
        return node
    x, w = node.args
    ty = x.type
    ndim = ty.ndim if isinstance(ty, TensorType) else 4
    first = call("transpose", x, axes=channels_first_axes(ndim))
    attrs = {**dict(node.attrs), LAYOUT: "NCHW"}
    conv = call("nn.conv", first, w, name=node.name, **attrs)
    return call("transpose", conv, axes=channels_last_axes(ndim))


#: a convolution's strides, dilations, paddings before and after (nn_conv._conv_attrs).
ConvAttrs = tuple[tuple[int, ...], ...]


def conv_packed_nhwc(
    x: te.Tensor,
    wp: te.Tensor,
    ty: Any,
    conv: ConvAttrs,
    groups: int,
    tiles: tuple[bool, bool],
    taps_outer: bool = False,
) -> te.Tensor:
    """nn.conv_packed with data_layout "NHWC" (``tiles``: whether it takes the
    micro-kernel's layout and calls and whether its positions are flattened, both from
    ember.ops.nn_conv_pack.nhwc_tiles; ``taps_outer``: the weight is packed taps first,
    nn_conv_taps): flat_channels_last when flat, else conv_channels_last reading the input
    in place (padded copy when padded)."""
    strides, dilation, pad_begin, pad_end = conv
    kernel, flat = tiles
    wp = widen_blocks(wp, groups) if kernel else wp
    if flat:
        return flat_channels_last(x, wp, ty.shape, kernel, strides)
    wshape = static_shape(wp)
    taps = tuple(int(t) for t in wshape[2:-1])
    in_place = kernel and groups == 1 and (any(pad_begin) or any(pad_end))
    in_place = in_place and pad_free(COMPUTE_TARGET.get(), int(wshape[0]), taps, int(wshape[1]))
    return conv_channels_last(
        x, wp, ty, strides, dilation, pad_begin, pad_end, groups, taps_outer, kernel, in_place
    )


def depthwise_nhwc(
    x: te.Tensor, wp: te.Tensor, out_shape: tuple[Any, ...], conv: ConvAttrs
) -> te.Tensor:
    """The depthwise convolution of NHWC ``x`` with the packed weight ``wp`` (C/b, *k, b):
    the channels are the vector lanes of the input and the output, and the padding is a
    condition uniform over the lanes (a padded copy of a 56x56x144 image streamed 2 MB more
    through memory: 1.5x slower)."""
    strides, dilation, pad_begin, pad_end = conv
    wshape = static_shape(wp)
    nsp = len(wshape) - 2
    block = wshape[-1]
    xshape = static_shape(x)
    rk = [te.reduce_axis(wshape[1 + k], f"rk{k}") for k in range(nsp)]

    def body(n: Any, *rest: Any) -> PrimExpr:
        *sp, c = rest
        src = [sp[k] * strides[k] + rk[k].var * dilation[k] - pad_begin[k] for k in range(nsp)]
        conds = []
        for k in range(nsp):
            if pad_begin[k]:
                conds.append(src[k] >= 0)
            if pad_end[k]:
                conds.append(src[k] < xshape[1 + k])
        value = x[(n, *src, c)]
        if conds:
            value = tir.if_then_else(tir.logical_and(*conds), value, scalar(0, x.dtype))
        taps = [r.var for r in rk]
        return te.sum(value * wp[(c // block, *taps, c % block)], axis=rk)

    attrs = {"block": block, CHANNELS_LAST_OUT: 1}
    acc = te.compute(out_shape, body, "conv", attrs=attrs)
    return te.compute(out_shape, lambda *i: acc[i], "conv_out")


def flat_channels_last(
    x: te.Tensor,
    wp: te.Tensor,
    out_shape: tuple[Any, ...],
    kernel: bool,
    strides: tuple[int, ...] = (1, 1),
) -> te.Tensor:
    """A 1x1, stride-1, unpadded NHWC convolution over its positions flattened,
    ``conv[n, p, o]`` (a matrix product read in place: the positions of an NHWC image are
    already rows of channels), so that the register tiles run along all positions instead
    of each short row (1x1 96->576 at 14x14: rows of 14 took tiles of 5, 5 and 4), and
    loop-IR tiles stay inline (FLAT_ANY_SIZE). ``strides`` above 1 (flat_strided: loop-IR
    tiles only) read every stride-th row and column."""
    wshape = static_shape(wp)
    sh, sw = (int(s) for s in strides)
    block = wshape[-1]
    width = int(out_shape[2])
    positions = int(out_shape[1]) * width
    rc = te.reduce_axis(wshape[1], "rc")

    def body(n: Any, p: Any, o: Any) -> PrimExpr:
        w = wp[(o // block, rc.var, 0, 0, o % block)]
        return te.sum(x[(n, p // width * sh, p % width * sw, rc.var)] * w, axis=rc)

    attrs = {"block": block, TILE_KERNEL: int(kernel), CHANNELS_LAST_OUT: 1}
    acc = te.compute((out_shape[0], positions, wshape[0] * block), body, "conv", attrs=attrs)
    return te.compute(out_shape, lambda n, h, w, o: acc[(n, h * width + w, o)], "conv_out")


#: whether 1x1 convolutions of any image size take flat_channels_last (tiles of the flattened
#: positions, at most WHOLE_IMAGE_POSITIONS per kernel call), not only images of at most
#: WHOLE_IMAGE_POSITIONS. Their short-reduction tiles then stay inline loop IR of 6 positions
#: instead of row tiles turned into kernel calls (nn_conv_lanes.loop_tiles_call_kernel), and
#: the kernel's tiles span rows. One thread, thread CPU time, A/B in one process, load 4-5,
#: flat/rows: mobilenet_v2's 1x1 16->96 at 112x112 0.57, 24->144 at 56x56 0.58, 32->192 at
#: 28x28 0.75, 96->24 at 56x56 0.74, 32->16 at 112x112 0.71; ResNet-50's 64->256 at 56x56
#: 0.72, 128->512 at 28x28 0.72-0.93, 512->128 at 28x28 level; but 256->64 at 56x56
#: 1.10-1.14 and 512->256 at 28x28 1.06-1.14: kernel tiles of
#: ember.ops.nn_conv_pack.ROW_BAND_CHANNELS input channels or more keep their row bands at
#: those sizes (nn_conv_pack.nhwc_tiles decides).
FLAT_ANY_SIZE = True


def flat_fits(
    kernel_shape: tuple[int, ...],
    strides: tuple[int, ...],
    pads: tuple[int, ...],
    out_shape: tuple[Any, ...],
    groups: int,
) -> bool:
    """Whether an NHWC packed convolution takes flat_channels_last."""
    if groups != 1 or len(kernel_shape) != 2 or any(k != 1 for k in kernel_shape):
        return False
    if any(s != 1 for s in strides) or any(pads):
        return False
    return FLAT_ANY_SIZE or int(out_shape[1]) * int(out_shape[2]) <= WHOLE_IMAGE_POSITIONS


def channels_last_stage(ctx: ScheduleContext) -> te.Stage | None:
    """The group's channels-last accumulator (attribute CHANNELS_LAST_OUT), if any."""
    for stage in reduction_stages(ctx.sch, list(ctx.group_outputs)):
        op = _compute_op(stage)
        if op is not None and op.attrs.get(CHANNELS_LAST_OUT):
            return stage
    return None


#: the widest register tile of a channels-last depthwise output (whole rows up to it).
WHOLE_ROW_COLS = 6


#: the float32 lanes of accumulators an LLVM channels-last depthwise tile holds (14 AVX2
#: registers: 7 columns of 16 channels).
LLVM_DEPTHWISE_LANES = 112


def depthwise_cols(ctx: ScheduleContext) -> int:
    """The register tile of a channels-last depthwise convolution: whole rows of at most
    WHOLE_ROW_COLS columns, else the default (0); on LLVM, up to LLVM_DEPTHWISE_LANES / block
    columns (schedule_channels_last takes a divisor of the width: no guarded tail tile).
    mobilenet_v2 on llvm, one thread, CPU time, llvm/c per kernel: 4 columns (14 = 4+4+4+2,
    the tail guarded inside the vectorized channel loop, kept in a stack buffer) 1.09-1.50
    at 28x28x192, 14x14x384/576 and 7x7x960; 7 columns 0.67-0.85."""
    shape = static_shape(ctx.group_outputs[0])
    width = int(shape[-2]) if len(shape) >= 3 else 0
    acc = channels_last_stage(ctx)
    op = _compute_op(acc) if acc is not None else None
    block = int(op.attrs.get("block", 0)) if op is not None else 0
    if "llvm" in ctx.target.keys and width > WHOLE_ROW_COLS and 0 < block <= LLVM_DEPTHWISE_LANES:
        return LLVM_DEPTHWISE_LANES // block
    return width if 0 < width <= WHOLE_ROW_COLS else 0


#: the longest reduction (input channels per group x taps) of a channels-last convolution
#: on which the llvm kinds keep their loop-IR tiles rather than call the micro-kernel.
LLVM_LOOP_TILE_REDUCTION = 256


def llvm_loop_tiles(ctx: ScheduleContext) -> bool:
    """Whether the group's channels-last convolution keeps its loop-IR tiles (no kernel
    call, nn_conv_lanes.loop_tiles_call_kernel neither): on the llvm kinds for reductions of
    at most LLVM_LOOP_TILE_REDUCTION. gcc inlines the C kernel and folds its constant
    arguments; LLVM calls the runtime's generic copy once per tile (ember.codegen.llvm.tiles),
    which short reductions do not cover: mobilenet_v2, one thread, CPU time, llvm/c per
    kernel 1.05-1.31 calling it (1x1 16->96 at 112x112, 24->144 at 56x56, 32->192 at 28x28),
    0.53-0.96 on loop-IR tiles. Blocks of 16 only: the kernels for blocks of 8 and 24 win
    everywhere (nn_conv_f32.loop_tiles_win)."""
    acc = channels_last_stage(ctx)
    op = _compute_op(acc) if acc is not None else None
    if op is None or "llvm" not in ctx.target.keys:
        return False
    block = int(op.attrs.get("block", 0))
    return block == BLOCK and _size(op.reduce_axis) <= LLVM_LOOP_TILE_REDUCTION


def schedule_channels_last(
    ctx: ScheduleContext, max_cols: int = 0, blocks_inner: bool = False
) -> None:
    """An NHWC packed convolution: output tiles ``n, o/b, rows..., w/t | h%r, w%t, o%b``
    (outer loops fused and parallel, the channels vectorised), the accumulator computed at
    each tile; the micro-kernel's tile sizes and calls when the compute chose them
    (TILE_KERNEL); anything unexpected takes the generic anchor schedule."""
    sch = ctx.sch
    outputs = list(ctx.group_outputs)
    reds = reduction_stages(sch, outputs)
    acc = channels_last_stage(ctx)
    main = sch[outputs[0]]
    op = _compute_op(main)
    acc_op = _compute_op(acc) if acc is not None else None
    shape = static_shape(outputs[0])
    ok = len(outputs) == 1 and op is not None and not op.reduce_axis and len(shape) >= 3
    if not ok or acc is None or acc_op is None or op is None:
        schedule_anchor(ctx)
        return
    flat = len(_stage_shape(acc)) == 3 and len(shape) == 4
    if not flat and tuple(_stage_shape(acc)[:-1]) != tuple(shape[:-1]):
        schedule_anchor(ctx)
        return
    block = int(acc_op.attrs["block"])
    kernel = bool(acc_op.attrs.get(TILE_KERNEL)) and block_kernel(
        ctx.target, outputs[0].dtype, block
    )
    kernel = kernel and not llvm_loop_tiles(ctx)
    if kernel:
        ctx.post_lower.append(tile_kernel_rewrite)
    axes = list(op.axis)
    if flat:
        _schedule_flat(ctx, main, acc, kernel)
        return
    oo, oi = main.split(axes[-1], factor=block)
    spatial = axes[1:-1]
    max_cols = max_cols or register_tiles(ctx.target).conv_cols
    cols = _tile_cols(_extent(spatial[-1]), max_cols)
    materialize_rows(sch, outputs)
    middle = spatial[:-1]
    nrows = _tile_cols(_extent(middle[-1]), max_cols // cols) if middle else 1
    pair = 1
    if kernel:
        extents = [_extent(a) for a in spatial]
        tile = narrow_kernel_tile(extents, block, ctx.target) if block in NARROW_KERNELS else None
        taps = _size([r for r in acc_op.reduce_axis if r.name.startswith("rk")])
        group = int(acc_op.attrs.get(GROUP_BLOCKS, 0))
        pair = pair_blocks(ctx.target, _extent(oo), taps, group) if block == BLOCK else 1
        most = PAIR_MAX_COLS if pair > 1 else kernel_max_cols(ctx.target)
        nrows, cols = tile or kernel_tile(extents, most)
    wo, wi = main.split(spatial[-1], factor=cols)
    inner = [wi, oi]
    if pair > 1:  # tiles of two blocks (nn_conv_pair)
        oo, ob = main.split(oo, factor=pair)
        inner = [wi, ob, oi]
    if nrows > 1:
        ho, hi = main.split(middle[-1], factor=nrows)
        middle = [*middle[:-1], ho]
        inner = [hi, *inner]
    tiles = [*middle, wo, oo] if blocks_inner else [oo, *middle, wo]
    main.reorder(axes[0], *tiles, *inner)
    outer = main.fuse(axes[0], *tiles)
    if _size(axes) * _size(acc_op.reduce_axis) >= MIN_PARALLEL_WORK and _extent(outer) > 1:
        main.parallel(outer)
    main.vectorize(oi)
    tile_accumulator(main, outer, acc, reds, kernel, nrows, pair)


#: a padded copy of fewer than MIN_VECTOR_EXTENT channels (the stems' 3-channel images)
#: is vectorised along its whole padded row, columns and channels fused (False: a scalar
#: loop of 3 channels per column). The 224x224x3 copy of a 3x3 stride-2 stem (one thread,
#: thread CPU time, the generated functions timed alone, AMD Zen 5): 37.1 -> 10.3 us, its
#: 3->16 convolution 47 us.
FUSED_PAD_ROWS = True


def materialize_rows(sch: te.Schedule, outputs: list[te.Tensor]) -> None:
    """nn_schedule.materialize_tagged for channels-last groups: a padded copy
    (CHANNELS_LAST_PAD) as one padded row per parallel iteration, its channels vectorised
    (a flattened loop divided its index per element: DBNet's 3x3 depthwise 2x slower);
    other copies (the widened weight) as there."""
    out_ops = {id(t.op) for t in outputs}
    for op in sch.ops:
        if id(op) in out_ops or not isinstance(op, te.ComputeOp):
            continue
        if not op.attrs.get(MATERIALIZE) or isinstance(op.body, te.Reduce):
            continue
        stage = sch[op]
        if stage.attach is not None or stage.inlined:
            continue
        if not op.attrs.get(CHANNELS_LAST_PAD) or len(op.axis) < 3:
            schedule_output(stage)
            continue
        axes = list(op.axis)
        outer = stage.fuse(*axes[:-2])
        if _size(axes) >= MIN_PARALLEL_WORK and _extent(outer) > 1:
            stage.parallel(outer)
        if _extent(axes[-1]) >= MIN_VECTOR_EXTENT:
            stage.vectorize(axes[-1])
        elif FUSED_PAD_ROWS and _extent(axes[-2]) * _extent(axes[-1]) >= MIN_VECTOR_EXTENT:
            stage.vectorize(stage.fuse(axes[-2], axes[-1]))


#: a flattened multi-block tile of a layer of few tiles (FLAT_FEW_TILES) takes the largest
#: divisor of the positions from half its register limit up (no guarded tail tile), instead
#: of _tile_cols' from 7/8 of it: the tail ran its FMAs behind a guard per element, and with
#: two threads it was the second half's. resnet8's stride-2 1x1s: 256 positions in tiles of
#: 8 instead of 18 x 14 and a tail of 4, 64 in tiles of 4 instead of 9 x 7 and 1; ds_cnn's
#: 125 in tiles of 5 instead of 17 x 7 and 6. Whole models, A/B in one process, new / old,
#: one thread (CPU time) and two (wall): resnet8 0.986 / 0.973, ds_cnn_kws 0.950 / 0.941,
#: mobilenet_v2 0.997 / 0.995 (its few-tile layers: 49 and 196 positions); on llvm, which
#: took such layers in one block because of the tail, ds_cnn_kws 0.91 at one thread.
FLAT_HALF_DIVISORS = True


#: ... for layers of at most this many tiles of ``limit`` positions (a tail's share of the
#: layer is then at least 1/32).
FLAT_FEW_TILES = 32


def _flat_cols(width: int, limit: int) -> int:
    """Positions per flattened multi-block tile (see FLAT_HALF_DIVISORS)."""
    top = min(width, limit)
    best = max(d for d in range(1, top + 1) if width % d == 0)
    few = -(-width // top) <= FLAT_FEW_TILES
    return best if FLAT_HALF_DIVISORS and few and 2 * best >= top else _tile_cols(width, limit)


#: whether the stores of a flattened 1x1 tile of several blocks are straight code (its
#: positions and blocks unrolled) when the last block is partial (output channels not a
#: multiple of 16). Their loop of guarded lanes was vectorised by gcc across positions, a
#: gather and a scatter per vector: ShuffleNet's split groups of 34 channels at 28x28 took
#: 25.5 us, their products ~11. One thread, thread CPU time, A/B in one process: shufflenet
#: 3.08 -> 2.52 ms. Unrolled without a partial block, mobilenet_v2 took 1.019x, ResNet-50
#: 1.011x.
FLAT_UNROLL_STORES = True


def _schedule_flat(ctx: ScheduleContext, main: te.Stage, acc: te.Stage, kernel: bool) -> None:
    """schedule_channels_last for flat_channels_last: the output's positions fused, tiled
    ``n, o/b, p/t | p%t, o%b`` (positions outer for long reductions, positions_outer) with
    the whole image, or about WHOLE_IMAGE_POSITIONS of its positions, one tile of the
    kernel."""
    op = _compute_op(main)
    acc_op = _compute_op(acc)
    assert op is not None and acc_op is not None
    block = int(acc_op.attrs["block"])
    materialize_rows(ctx.sch, list(ctx.group_outputs))
    n, h, w, o = op.axis
    positions = main.fuse(h, w)
    acc_blocks = _extent(acc_op.axis[-1]) // block
    extra = acc_blocks > -(-_extent(o) // block)  # a zero block more (flat_extra_block)
    if not extra:
        oo, oi = main.split(o, factor=block)
    cols = _tile_cols(_extent(positions), register_tiles(ctx.target).matmul[0])
    if kernel:
        cols = _tile_cols(_extent(positions), WHOLE_IMAGE_POSITIONS)
    blocks = 1 if kernel else flat_tile_blocks(ctx.target, acc_blocks)
    if blocks > 1:
        wide = _flat_cols(_extent(positions), FLAT_TILE_LANES // (blocks * block))
        # LLVM keeps a guarded tail tile's accumulators of several blocks in memory: ds_cnn's
        # 1x1 64->64 at 25x5 (125 = 17 x 7 + 6) took 40.5 us against 24.3 with one block
        # (llvm, one thread, thread CPU time); the llvm kinds take them without a tail only
        tail = _extent(positions) % wide != 0
        blocks, cols = (1, cols) if tail and "llvm" in ctx.target.keys else (blocks, wide)
    po, pi = main.split(positions, factor=cols)
    if extra and blocks > 1:  # tiles of the padded blocks, the last one's stores guarded
        oo, rest = main.split(o, factor=blocks * block)
        ob, oi = main.split(rest, factor=block)
    elif extra:
        oo, oi = main.split(o, factor=block)
    elif blocks > 1:
        oo, ob = main.split(oo, factor=blocks)
    if blocks > 1:
        main.reorder(n, oo, po, pi, ob, oi)
        outer = main.fuse(n, oo, po)
        if FLAT_UNROLL_STORES and _extent(o) % block:
            main.unroll(pi)
            main.unroll(ob)
    elif kernel and positions_outer(_size(acc_op.reduce_axis), _extent(o)):
        main.reorder(n, po, oo, pi, oi)
        outer = main.fuse(n, po, oo)
    else:
        main.reorder(n, oo, po, pi, oi)
        outer = main.fuse(n, oo, po)
    if _size(op.axis) * _size(acc_op.reduce_axis) >= MIN_PARALLEL_WORK and _extent(outer) > 1:
        main.parallel(outer)
    main.vectorize(oi)
    acc.compute_at(main, outer)
    an, ap, ao = acc_op.axis
    if blocks > 1:
        aob, aoi = acc.split(ao, factor=block)
        acc.reorder(an, *acc_op.reduce_axis, ap, aob, aoi)
        acc.unroll(ap)
        acc.unroll(aob)
        acc.vectorize(aoi)
        return
    acc.reorder(an, *acc_op.reduce_axis, ap, ao)
    if not kernel:
        acc.unroll(ap)
    acc.vectorize(ao)
