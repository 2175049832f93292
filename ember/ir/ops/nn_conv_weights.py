"""numpy helpers of the convolution ops (ember.ir.ops.nn_conv): the im2col reference every
conv op's reference calls, and the packed weight layouts of nn.conv_packed and
nn.conv_depthwise_packed (pack_conv_weight, its inverse, unpack_depthwise_weight) and the
block of output channels a weight packs in (packed_block)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ember.ir.ops.common import pad_or_crop, widen


def conv_reference(
    x: np.ndarray,
    w: np.ndarray,
    strides: Sequence[int],
    pads: Sequence[tuple[int, int]],
    dilation: Sequence[int],
    groups: int,
) -> np.ndarray:
    """N-d grouped convolution of ``x`` (N, C, ...) with ``w`` (O, C/g, ...), im2col style.

    The columns are laid out ``(N, G, Cg*K, P)`` so one broadcast matmul with the
    ``(G, Og, Cg*K)`` weight yields NC[D]HW directly; 1x1 stride-1 convolutions skip im2col.
    """
    nsp = x.ndim - 2
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    kernel = w.shape[2:]
    og = o // groups
    xw = widen(x)
    w = widen(w).astype(xw.dtype, copy=False)
    pointwise = all(k == 1 for k in kernel) and all(s == 1 for s in strides)
    if pointwise and not any(b or e for b, e in pads):
        y = np.matmul(w.reshape(groups, og, cg), xw.reshape(n, groups, cg, -1))
        return y.reshape(n, o, *x.shape[2:]).astype(x.dtype, copy=False)
    xp = pad_or_crop(xw, pads)
    extents = [d * (k - 1) + 1 for d, k in zip(dilation, kernel, strict=True)]
    win = sliding_window_view(xp, extents, axis=tuple(range(2, 2 + nsp)))
    step = tuple(slice(None, None, s) for s in strides) + tuple(
        slice(None, None, d) for d in dilation
    )
    win = win[(slice(None), slice(None), *step)]
    out_sp = win.shape[2 : 2 + nsp]
    pixels = int(np.prod(out_sp, dtype=np.int64))
    ksize = int(np.prod(kernel, dtype=np.int64))
    # (N, C, *out, *k) -> (N, C, *k, *out) -> (N, G, Cg*K, P): the one copy of im2col
    order = (0, 1, *range(2 + nsp, 2 + 2 * nsp), *range(2, 2 + nsp))
    cols = win.transpose(order).reshape(n, groups, cg * ksize, pixels)
    y = np.matmul(w.reshape(groups, og, cg * ksize), cols)  # (N, G, Og, P)
    return y.reshape(n, o, *out_sp).astype(x.dtype, copy=False)


def unpack_conv_weight(wp: np.ndarray, channels: int = 0, taps_first: bool = False) -> np.ndarray:
    """(ceil(O/b), I, *k, b) -> (O, I, *k) (O = ``channels``, or all of them when 0): the
    inverse of pack_conv_weight (``taps_first``: from (ceil(O/b), *k, I, b))."""
    nk = wp.ndim - 3
    if taps_first:
        wp = np.moveaxis(wp, wp.ndim - 2, 1)
    order = (0, wp.ndim - 1, *range(1, wp.ndim - 1))
    plain = np.transpose(wp, order).reshape(wp.shape[0] * wp.shape[-1], *wp.shape[1 : 2 + nk])
    return np.ascontiguousarray(plain[: channels or plain.shape[0]])


def pack_conv_weight(w: np.ndarray, block: int, taps_first: bool = False) -> np.ndarray:
    """(O, I, *k) -> (ceil(O/b), I, *k, b), the output channels zero-padded to a multiple of
    the block ``b``; with ``taps_first`` (ceil(O/b), *k, I, b), the kernel taps before the
    input channels (attribute ``taps_first`` of nn.conv_packed)."""
    o = w.shape[0]
    padded = -(-o // block) * block
    if padded != o:
        w = np.concatenate([w, np.zeros((padded - o, *w.shape[1:]), w.dtype)])
    blocked = w.reshape(padded // block, block, *w.shape[1:])
    order = (0, *range(2, blocked.ndim), 1)
    if taps_first:
        order = (0, *range(3, blocked.ndim), 2, 1)
    return np.ascontiguousarray(np.transpose(blocked, order))


def unpack_depthwise_weight(wp: np.ndarray) -> np.ndarray:
    """(C/b, *k, b) -> (C, 1, *k): the plain weight of a packed depthwise convolution."""
    plain = np.moveaxis(wp, -1, 1)
    return np.ascontiguousarray(plain.reshape(wp.shape[0] * wp.shape[-1], 1, *wp.shape[1:-1]))


#: output-channel block sizes tried by the legalizer, widest first (see pack_block, packed_block).
#: Measured single thread: 1x1 960->320 at 7x7 0.30 ms with 16, 0.46 ms with 8; 512->1000
#: at 13x13 1.84 ms padded to 63 blocks of 16, 2.14 ms as 125 blocks of 8.
PACK_BLOCKS: tuple[int, ...] = (16, 8)


def pack_block(channels: int) -> int:
    """The output-channel block of a packed convolution with ``channels`` outputs: the
    widest of PACK_BLOCKS whose zero-padding of the weight wastes at most 1/8 of the work
    (1000 channels: 63 blocks of 16, padded to 1008), else 0 (not packed)."""
    for b in PACK_BLOCKS:
        padded = -(-channels // b) * b
        if (padded - channels) * 8 <= padded:
            return b
    return 0


def packed_block(wshape: Sequence[int], groups: int) -> int:
    """The block of output channels the nn.conv legalizer packs a weight of shape
    ``wshape`` (O, I/groups, *k) in: a depthwise weight's channels, a grouped one's per
    group, dividing by one of PACK_BLOCKS; else pack_block(O); 0 when it does not pack."""
    if groups == 1:
        return pack_block(int(wshape[0]))
    if int(wshape[1]) == 1 and int(wshape[0]) == groups:  # depthwise: blocks of channels
        return next((b for b in PACK_BLOCKS if groups % b == 0), 0)
    per_group = int(wshape[0]) // groups
    return next((b for b in PACK_BLOCKS if per_group % b == 0), 0)


#: the most groups of a grouped convolution that is split into one convolution per group
#: when its groups do not pack (split_block; ShuffleNet v1 has 3, 4 or 8): each group is a
#: kernel of its own, with a slice of the input and a share of the concatenation.
MAX_SPLIT_GROUPS = 8

#: whether a split group takes blocks of 16 while they pad it by less than a third
SPLIT_WIDE = True

#: whether groups that pack in blocks of 8 only are split for blocks of 16 (split_block):
#: ShuffleNet's 4 groups of 136 at 7x7 ran at 32% of the FMA limit in blocks of 8;
#: shufflenet 0.90x at one thread, 0.92x at two
SPLIT_NARROW = True


def split_block(wshape: Sequence[int], groups: int) -> int:
    """The block of output channels each group's convolution packs in when a grouped
    convolution of weight shape ``wshape`` (O, I/groups, *k) is split into its groups
    (ember.ops.nn_conv_groups), the last block partial: blocks of 16 when they pad a group
    by less than a third (SPLIT_WIDE), else the block that pads least; groups that pack in
    blocks of 8 only are split for blocks of 16 that pad them by at most 1/8
    (SPLIT_NARROW: ShuffleNet's 136 channels a group, 144). 0 when it is not split (one
    group, depthwise, groups that pack in blocks of 16, more than MAX_SPLIT_GROUPS groups,
    or a padding of a quarter of the block or more: 4 or 6 outputs a group).

    ShuffleNet's 1x1 convolutions of 4 groups of 68 and 34 channels: blocks of 16 (80 and
    48), where the unpacked compute ran them at 5-8% of the FMA limit."""
    if not 1 < groups <= MAX_SPLIT_GROUPS:
        return 0
    if int(wshape[1]) == 1 and int(wshape[0]) == groups:
        return 0
    per_group = int(wshape[0]) // groups
    packs = packed_block(wshape, groups)
    wide = PACK_BLOCKS[0]
    waste = _padded(per_group, wide) - per_group
    if packs == wide:
        return 0
    if packs:  # in narrow blocks only: split when wide ones pad a group by at most 1/8
        return wide if SPLIT_NARROW and 8 * waste <= _padded(per_group, wide) else 0
    if SPLIT_WIDE and 3 * waste < _padded(per_group, wide):
        return wide
    block = min(PACK_BLOCKS, key=lambda b: (_padded(per_group, b), -b))
    padded = _padded(per_group, block)
    return block if 4 * (padded - per_group) < padded else 0


#: the channels per group of a grouped convolution whose groups share the lanes of one
#: block of 16 output channels (lane_group_block): ResNeXt's 3x3 of 32 groups of 4 and 8.
LANE_GROUP_WIDTHS: tuple[int, ...] = (2, 4, 8)


#: whether lane groups take output channels that are no multiple of 16 (the last block
#: partial: zero weights, and zero input channels in the padded copy): RegNetX-200MF's
#: stages of 24, 56, 152 and 368 channels in groups of 8.
LANE_GROUP_PARTIAL = True


def lane_group_block(wshape: Sequence[int], groups: int) -> int:
    """The block of output channels (16) of a grouped convolution of weight shape ``wshape``
    (O, I/groups, *k) whose groups are narrower than a block, as many input as output
    channels each (one of LANE_GROUP_WIDTHS), so that a block's 16 lanes hold whole groups
    and read 16 consecutive input channels (ember.ops.nn_conv_lane_groups; the last block
    partial where 16 does not divide O, LANE_GROUP_PARTIAL); 0 for any other
    convolution."""
    per_group = int(wshape[0]) // groups if groups > 1 else 0
    wide = PACK_BLOCKS[0]
    if per_group not in LANE_GROUP_WIDTHS or int(wshape[1]) != per_group:
        return 0
    return wide if int(wshape[0]) % wide == 0 or LANE_GROUP_PARTIAL else 0


def _padded(channels: int, block: int) -> int:
    return -(-channels // block) * block
