"""Input layouts and loop nests of ``nn.conv_packed`` (helpers of ember.ops.nn_conv): the
padded copy of an input, the channels-last reduction the C micro-kernel tiles, and the 1x1
convolution flattened over positions (a matrix product, positions x channels)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import tir
from ember.ops.common import scalar, static_shape
from ember.ops.nn_conv_f32 import MAX_COLS, TILE_KERNEL, kernel_tile
from ember.ops.nn_conv_narrow import CHANNELS_LAST_COPY
from ember.ops.nn_schedule import MATERIALIZE, TRANSPOSED_COPY
from ember.tir import PrimExpr, te


def pad_tensor(
    x: te.Tensor,
    before: tuple[int, ...],
    after: tuple[int, ...],
    value: float = 0.0,
    materialize: bool = False,
    transposed: int | None = None,
) -> te.Tensor:
    """``x`` zero-padded (or ``value``-padded) on its trailing len(before) axes; with
    ``materialize`` the nn anchor schedule keeps it in a buffer instead of inlining it (as a
    transposed copy, nn_schedule.TRANSPOSED_COPY, when ``transposed`` names its axis)."""
    shape = static_shape(x)
    nsp = len(before)
    if not any(before) and not any(after):
        return x
    lead = len(shape) - nsp
    padded = list(shape[:lead]) + [shape[lead + k] + before[k] + after[k] for k in range(nsp)]

    def body(*i: Any) -> PrimExpr:
        conds = []
        src = list(i[:lead])
        for k in range(nsp):
            pos = i[lead + k] - before[k]
            if before[k] > 0:
                conds.append(pos >= 0)
            if after[k] > 0:
                conds.append(pos < shape[lead + k])
            src.append(pos)
        if not conds:
            return x[tuple(src)]
        return tir.if_then_else(tir.logical_and(*conds), x[tuple(src)], scalar(value, x.dtype))

    attrs: dict[str, Any] | None = {MATERIALIZE: True} if materialize else None
    if attrs is not None and transposed is not None:
        attrs[TRANSPOSED_COPY] = transposed
    return te.compute(padded, body, "pad", attrs=attrs)


#: attribute of a channels-last accumulator whose output stage is channels last as well
#: (data_layout "NHWC"; scheduled by nn_conv_nhwc.schedule_channels_last).
CHANNELS_LAST_OUT = "channels_last_out"

#: attribute of a grouped convolution's channels-last accumulator: the blocks of output
#: channels per group (the blocks a register tile may share one input's channels across).
GROUP_BLOCKS = "group_blocks"

#: attribute of the padded copy of a channels-last input: copied a padded row per parallel
#: iteration (nn_conv_nhwc.materialize_rows), no index division per element.
CHANNELS_LAST_PAD = "channels_last_pad"


def pad_rows(x: te.Tensor, before: tuple[int, ...], after: tuple[int, ...]) -> te.Tensor:
    """``x`` (N, *sp, C) zero-padded on its spatial axes (and channels to ``after[-1]``
    more) in a buffer of its own (CHANNELS_LAST_PAD); ``x`` itself when unpadded."""
    padded = pad_tensor(x, before, after, materialize=True)
    if padded is not x and isinstance(padded.op, te.ComputeOp):
        padded.op.attrs[CHANNELS_LAST_PAD] = 1
    return padded


#: reduce input channels outermost in the channels-last convolution (rc, kernel rows,
#: kernel columns): the packed weight (blocks, channels, taps..., block) is then read
#: contiguously, so that the micro-kernel's chunks of the reduction (f32_kernels.py) are
#: contiguous 16 KiB of weights the hardware prefetcher streams, instead of one cache line
#: per step at a stride of taps x 64 bytes. With taps innermost every position reads one
#: cache line per tap at once, which needs the channel pitch of channel_pitch; and a chunk
#: reads the lines of all the tile's padded positions, which must stay in L1 with the
#: chunk's weights for the register tiles after the first: so only for images the
#: micro-kernel takes whole (nn_conv_f32.kernel_tile) of at most CHANNELS_OUTER_POSITIONS
#: positions. Measured per layer (one thread, CPU time, interleaved, load 8-12; taps outer
#: -> channels outer, best of 25-40, ms): 3x3 512->512 at 7x7 4.8 -> 3.5 and 5.6 -> 3.9;
#: 256->256 at 14x14 3.3 -> 3.2 and 3.4 -> 3.5, at 10x10 2.1 -> 2.0 and 2.7 -> 2.8; with
#: row tiles 128->128 at 28x28 4.4 -> 5.6, 64->64 at 56x56 4.0 -> 5.5. A weight packed taps
#: first (ember.ops.nn_conv_taps: every 16-channel block layer) reduces taps outer instead.
CHANNELS_OUTER = True
CHANNELS_OUTER_POSITIONS = 64


def channels_outer(out_spatial: tuple[int, ...]) -> bool:
    """Whether the channels-last convolution of output extents ``out_spatial`` reduces over
    the input channels outermost (see CHANNELS_OUTER)."""
    height, width = kernel_tile(list(out_spatial))
    whole = height * width == int(np.prod(out_spatial))
    return CHANNELS_OUTER and whole and MAX_COLS < height * width <= CHANNELS_OUTER_POSITIONS


#: channels from which a channels-last copy gets a padded pitch (channel_pitch): with
#: fewer, positions are at most 256 bytes apart and their lines spread over 16+ L1 sets.
PITCH_MIN_CHANNELS = 128


def channel_pitch(channels: int) -> int:
    """The floats per position of a channels-last copy of ``channels`` channels: an even
    number of cache lines (16 floats) from PITCH_MIN_CHANNELS on gets one more line, so that
    the lines of neighbouring positions and rows (9 per position with 3x3 taps, all read at
    once with channels outer) do not all map to the same few of the 64 L1 sets (512
    channels, 2 KiB apart: 2 sets)."""
    if channels >= PITCH_MIN_CHANNELS and channels % 32 == 0:
        return channels + 16
    return channels


def pad_channels_last(
    x: te.Tensor, before: tuple[int, ...], after: tuple[int, ...], pitch: bool = False
) -> te.Tensor:
    """``x`` (N, C, *sp) zero-padded on its spatial axes and laid out channels last,
    (N, *padded, C), in a buffer of its own; with ``pitch`` the channels are zero-padded to
    channel_pitch (never read by the convolution)."""
    shape = static_shape(x)
    nsp = len(before)
    last = te.compute(
        (shape[0], *shape[2:], shape[1]),
        lambda n, *r: x[(n, r[nsp], *r[:nsp])],
        "channels_last",
    )
    extra = channel_pitch(int(shape[1])) - int(shape[1]) if pitch else 0
    padded = pad_tensor(last, (*before, 0), (*after, extra), materialize=True, transposed=nsp)
    if isinstance(padded.op, te.ComputeOp):  # rows where planes conflict: nn_conv_narrow
        padded.op.attrs[CHANNELS_LAST_COPY] = int(np.prod(shape[2:]))
    return padded


def conv_channels_last(
    x: te.Tensor,
    wp: te.Tensor,
    ty: Any,
    strides: tuple[int, ...],
    dilation: tuple[int, ...],
    pad_begin: tuple[int, ...],
    pad_end: tuple[int, ...],
    groups: int,
    taps_outer: bool = False,
    nhwc_kernel: bool | None = None,
    pad_free: bool = False,
) -> te.Tensor:
    """conv_packed reading a channels-last padded copy of the input, reducing over the
    input channels then the kernel taps (the weight contiguous; CHANNELS_OUTER) or the
    taps then the channels (contiguous in the copy, and in the weight when it is packed
    taps first: ``taps_outer``, nn_conv_taps). With ``nhwc_kernel`` set (data_layout
    "NHWC": ``x`` and the result channels last) the copy is the padding alone (none when
    unpadded) and the result needs no transpose; its value says whether the schedule calls
    the micro-kernel (TILE_KERNEL). ``pad_free`` (NHWC, taps outer): no copy at all, the
    padding a condition on each read (the kernel of ember.ops.nn_conv_pair.pad_free)."""
    wshape = static_shape(wp)
    nsp = len(wshape) - 3
    block = wshape[-1]
    blocks_per_group = wshape[0] // groups
    # several groups a block (ember.ops.nn_conv_lane_groups): the channels of a group
    lane_width = int(wshape[1]) if groups > wshape[0] else 0  # as many inputs as outputs
    nhwc = nhwc_kernel is not None
    out_sp = ty.shape[1:-1] if nhwc else ty.shape[2:]
    outer = not taps_outer and channels_outer(tuple(int(d) for d in out_sp))
    outer = outer and not lane_width  # the kernel's order: taps, then a group's channels
    in_place = nhwc and pad_free and not outer
    if in_place:
        xp = x
    elif nhwc:
        padded = any(pad_begin) or any(pad_end)
        extra = channel_pitch(int(static_shape(x)[-1])) - int(static_shape(x)[-1])
        extra = extra if outer and padded else 0
        if lane_width:  # a partial last block reads its missing groups' channels: zeros
            extra = wshape[0] * block - int(static_shape(x)[-1])
        xp = pad_rows(x, (*pad_begin, 0), (*pad_end, extra))
    else:
        xp = pad_channels_last(x, pad_begin, pad_end, pitch=outer)
    rk = [te.reduce_axis(wshape[2 + k], f"rk{k}") for k in range(nsp)]
    rc = te.reduce_axis(wshape[1], "rc")
    xshape = static_shape(x)

    def body(n: Any, *rest: Any) -> PrimExpr:
        *sp, o = rest
        src = [sp[k] * strides[k] + rk[k].var * dilation[k] for k in range(nsp)]
        taps = [r.var for r in rk]
        if lane_width:  # the block's first channel, then its lane's group's
            chan = (o // block) * block + (o % block) // lane_width * wshape[1] + rc.var
        elif groups == 1:
            chan = rc.var
        else:
            chan = (o // block) // blocks_per_group * wshape[1] + rc.var
        value: PrimExpr
        if in_place:  # the padding as conditions (nn_conv_nhwc.depthwise_nhwc's form)
            src = [src[k] - pad_begin[k] for k in range(nsp)]
            conds = [src[k] >= 0 for k in range(nsp) if pad_begin[k]]
            conds += [src[k] < xshape[1 + k] for k in range(nsp) if pad_end[k]]
            value = x[(n, *src, chan)]
            if conds:
                value = tir.if_then_else(tir.logical_and(*conds), value, scalar(0, x.dtype))
        else:
            value = xp[(n, *src, chan)]
        prod = value * wp[(o // block, rc.var, *taps, o % block)]
        return te.sum(prod, axis=[rc, *rk] if outer else [*rk, rc])

    shape = (ty.shape[0], *out_sp, wshape[0] * block)
    attrs = {"block": block, TILE_KERNEL: 1 if nhwc_kernel is None else int(nhwc_kernel)}
    if groups != 1:
        attrs[GROUP_BLOCKS] = blocks_per_group or 1
    if nhwc:
        acc = te.compute(shape, body, "conv", attrs={**attrs, CHANNELS_LAST_OUT: 1})
        return te.compute(ty.shape, lambda n, *r: acc[(n, *r)], "conv_out")
    acc = te.compute(shape, body, "conv", attrs=attrs)
    return te.compute(ty.shape, lambda n, o, *sp: acc[(n, *sp, o)], "conv_out")


#: a 1x1 convolution with at least this many output channels reads a positions-major copy
#: of its input (the copy costs 1/channels of the convolution). Measured single thread on
#: AVX2 (ember/onnxruntime, busy machine): 1x1 64->256 at 56x56 1.35 -> 1.04, 2048->512 at
#: 7x7 1.86 -> 1.23, 512->2048 at 7x7 1.40 -> 1.23; but 64->64 at 56x56 1.09 -> 1.85.
TRANSPOSE_MIN_CHANNELS = 256


def _positions_last(x: te.Tensor, sp: list[int], strides: tuple[int, ...] = ()) -> te.Tensor:
    """``x`` (N, C, *) at the output positions ``sp`` of a 1x1 convolution of ``strides``
    (default 1) as (N, positions, C) in a buffer of its own: the convolution's tile then
    reads each position's channels contiguously."""
    shape = static_shape(x)
    steps = strides or (1,) * len(sp)

    def body(n: Any, p: Any, c: Any) -> PrimExpr:
        idx = []
        rest = p
        for k in range(len(sp) - 1, -1, -1):
            idx.append((rest % sp[k] if k else rest) * steps[k])
            rest = rest // sp[k]
        return x[(n, c, *reversed(idx))]

    positions = int(np.prod(sp))
    attrs = {MATERIALIZE: True, TRANSPOSED_COPY: 1}
    return te.compute((shape[0], positions, shape[1]), body, "x_nhwc", attrs=attrs)


def pointwise(
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    before: tuple[int, ...],
    after: tuple[int, ...],
) -> bool:
    """Whether a convolution is 1x1, stride 1, unpadded: a matrix product over positions."""
    return all(k == 1 for k in kernel) and all(s == 1 for s in strides) and not any(before + after)


def strided_pointwise(
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    before: tuple[int, ...],
    after: tuple[int, ...],
    out_channels: int,
) -> bool:
    """Whether a 1x1 unpadded convolution with a stride above 1 (ResNet's downsample
    shortcuts) is a matrix product over a subsampled positions-major copy of its input
    (flat_pointwise with ``strides``): at least TRANSPOSE_MIN_CHANNELS outputs, so that the
    copy costs little. Read in place, every block of 16 output channels streamed the whole
    input (3.2 MiB at 256x56x56, beyond L2) for the quarter of it that it uses."""
    return (
        all(k == 1 for k in kernel)
        and any(s > 1 for s in strides)
        and not any(before + after)
        and out_channels >= TRANSPOSE_MIN_CHANNELS
    )


def flat_pointwise(
    x: te.Tensor,
    wp: te.Tensor,
    ty: Any,
    shape: tuple[int, ...],
    groups: int,
    blocks_per_group: int,
    kernel: bool,
    strides: tuple[int, ...] = (),
) -> te.Tensor:
    """A 1x1 unpadded packed convolution with its spatial positions flattened into one
    axis, ``conv[n, p, o]`` (a matrix product, positions x channels): register tiles run
    along all positions, so small images (14x14, 7x7) leave at most one partial tile
    instead of one per row (schedule_packed_conv tiles the flattened axis). With
    ``strides`` above 1 (strided_pointwise; the micro-kernel's layout) it reads a
    positions-major copy of the input at the strided positions."""
    block = static_shape(wp)[-1]
    sp = [int(d) for d in ty.shape[2:]]
    positions = int(np.prod(sp))
    rc = te.reduce_axis(static_shape(wp)[1], "rc")
    wide = static_shape(wp)[0] * block >= TRANSPOSE_MIN_CHANNELS
    strided = any(s > 1 for s in strides)
    if strided and not (kernel and wide):
        raise ValueError("flat_pointwise: a strided 1x1 convolution needs the kernel's layout")
    xt = _positions_last(x, sp, strides) if kernel and wide else None

    def body(n: Any, p: Any, o: Any) -> PrimExpr:
        chan = (
            rc.var
            if groups == 1
            else (o // block) // blocks_per_group * static_shape(wp)[1] + rc.var
        )
        w = wp[(o // block, rc.var, *([0] * len(sp)), o % block)]
        if xt is not None:
            return te.sum(xt[(n, p, chan)] * w, axis=rc)
        idx = []
        rest = p
        for k in range(len(sp) - 1, -1, -1):
            idx.append(rest % sp[k] if k else rest)
            rest = rest // sp[k]
        chan = (
            rc.var
            if groups == 1
            else (o // block) // blocks_per_group * static_shape(wp)[1] + rc.var
        )
        prod = x[(n, chan, *reversed(idx))] * wp[(o // block, rc.var, *([0] * len(sp)), o % block)]
        return te.sum(prod, axis=rc)

    attrs = {"block": block, TILE_KERNEL: int(kernel)}
    acc = te.compute((shape[0], positions, shape[-1]), body, "conv", attrs=attrs)

    def out(n: Any, o: Any, *i: Any) -> PrimExpr:
        flat = i[0]
        for k in range(1, len(sp)):
            flat = flat * sp[k] + i[k]
        return acc[(n, flat, o)]

    return te.compute(ty.shape, out, "conv_out")
