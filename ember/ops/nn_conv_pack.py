"""The packed forms of constant-weight convolutions, chosen by nn_conv's legalizer:
``nn.conv_packed`` (output channels in blocks, ember.ir.ops.nn_conv_weights.packed_block;
taps first where nn_conv_taps says so) and ``nn.conv_depthwise_packed`` (one filter per
channel); and the tiles the packed compute takes (kernel_layout, lanes_layout)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.ir.expr import Call, Constant, Expr, call, const
from ember.ir.ops.common import data_layout, spatial
from ember.ir.ops.nn_conv_weights import pack_conv_weight, packed_block
from ember.ops.nn_conv_f32 import (
    BLOCK,
    WHOLE_IMAGE_POSITIONS,
    avx512_loop_tiles_win,
    block_kernel,
    loop_tiles_win,
    tile_kernel_pays,
    use_tile_kernel,
)
from ember.ops.nn_conv_flat import flat_extra_block, flat_strided
from ember.ops.nn_conv_lanes import position_lanes
from ember.ops.nn_conv_nhwc import LAYOUT, flat_fits
from ember.ops.nn_conv_taps import taps_first
from ember.ops.registry import COMPUTE_TARGET, LEGALIZE_TARGET

# --- convolutions with weights packed at compile time -------------------------------------
#
# ``nn.conv_packed`` is a convolution whose constant weight was re-laid out by the
# legalizer from (O, I/groups, *k) to (O/b, I/groups, *k, b): b consecutive output channels of one
# input channel and kernel tap are contiguous, so the kernel's innermost loop is a vector
# of b output channels, ``acc[w, 0:b] += x[c, h, w] * wp[o/b, c, kh, kw, 0:b]`` (TVM's
# NCHW[x]c kernel layout with the data left in NCHW). schedule_packed_conv computes a
# tile of b channels times a few output columns per iteration of the reduction.


def to_packed(node: Call, block: int = 0) -> Expr:
    """nn.conv_packed or nn.conv_depthwise_packed for ``node`` (``node`` itself when its
    weight is not a constant that packs); ``block``: that block of output channels instead
    of packed_block's (a split group's, ember.ops.nn_conv_groups)."""
    x, w = node.args
    if not isinstance(w, Constant):
        return node
    data = np.asarray(w.data)
    if data.dtype not in (np.float32, np.float64, np.int32) or data.ndim < 3:
        return node
    groups = int(node.attrs["groups"])
    block = block or packed_block(data.shape, groups)
    if not block:
        return node
    if groups > 1 and data.shape[1] == 1 and data.shape[0] == groups:
        return depthwise_to_packed(node, data)
    attrs = {k: node.attrs[k] for k in ("strides", "padding", "dilation", "groups", LAYOUT)}
    nsp = data.ndim - 2
    shape = node.tensor_type.shape
    dims = shape[1:-1] if data_layout(node.attrs) == "NHWC" else shape[2:]
    static = all(isinstance(d, int | np.integer) for d in dims)
    out = tuple(int(d) for d in dims) if static else ()
    strides = spatial(node.attrs, "strides", nsp, 1)
    first = taps_first(data.shape[2:], data.shape[1], block, strides, out)
    packed = data
    if _extra_block(node, data, block):  # a zero block: a count the flat tiles divide
        blocks = -(-data.shape[0] // block) + 1
        packed = np.zeros((blocks * block, *data.shape[1:]), data.dtype)
        packed[: data.shape[0]] = data
    wp = const(pack_conv_weight(packed, block, first))
    return call(
        "nn.conv_packed",
        x,
        wp,
        name=node.name,
        channels=data.shape[0],
        taps_first=int(first),
        **attrs,
    )


def _extra_block(node: Call, data: np.ndarray, block: int) -> bool:
    """Whether ``node``'s packed weight gets one zero block more (flat_extra_block): a
    float32, one-group, channels-last 1x1 with stride 1 and no padding (flattened
    positions) in blocks of BLOCK, for a target that tiles several blocks."""
    if block != BLOCK or data.dtype != np.float32 or int(node.attrs["groups"]) != 1:
        return False
    if data_layout(node.attrs) != "NHWC" or any(int(k) != 1 for k in data.shape[2:]):
        return False
    nsp = data.ndim - 2
    if any(s != 1 for s in spatial(node.attrs, "strides", nsp, 1)):
        return False
    if any(int(p) for p in node.attrs["padding"]):
        return False
    return flat_extra_block(LEGALIZE_TARGET.get(), -(-int(data.shape[0]) // block))


# --- depthwise convolutions ---------------------------------------------------------------
#
# ``nn.conv_depthwise_packed`` (groups = channels, one filter per channel) reads a padded
# copy of the input blocked by channels, (N, C/b, *padded, b), and a (C/b, *k, b) weight:
# the b channels of a block are the vector lanes, so short rows (MobileNet's 14x14 and 7x7
# stages) and strided windows still give full-width contiguous vector loads. The blocked
# copy is a transposition, as cheap as the row schedule's padded copy only on small images;
# measured single thread on MobileNetV2's shapes (row schedule -> packed): 112x112 32ch
# 0.33 -> 0.33 ms, stride 2 56x56 144ch 0.32 -> 0.22, 28x28 192ch 0.21 -> 0.13, 14x14 384ch
# 0.13 -> 0.062, 7x7 960ch 0.13 -> 0.045: never slower, so every depthwise convolution
# whose channels divide into blocks is packed.


def depthwise_to_packed(node: Call, data: np.ndarray) -> Expr:
    """nn.conv with one filter per channel -> nn.conv_depthwise_packed (else ``node``)."""
    groups = int(node.attrs["groups"])
    block = packed_block(data.shape, groups)
    if data.shape[1] != 1 or data.shape[0] != groups or not block:
        return node
    blocked = data.reshape(groups // block, block, *data.shape[2:])
    wp = np.ascontiguousarray(np.moveaxis(blocked, 1, -1))
    attrs = {k: node.attrs[k] for k in ("strides", "padding", "dilation", LAYOUT)}
    return call("nn.conv_depthwise_packed", node.args[0], const(wp), name=node.name, **attrs)


# --- the compute's choice of tiles ---------------------------------------------------------


#: channels-last (NHWC) 1x1 convolutions with blocks of BLOCK output channels take the
#: micro-kernel's tiles on short reductions too (False: tile_kernel_pays decides, as for
#: NCHW). tile_kernel_pays weighs the channels-last copy of an NCHW input, which an NHWC
#: input does not need; the kernel's tiles (bands of whole rows, a block's weights read
#: once per band) then beat the loop-IR tiles of 4-6 columns that the tile rewrite turns
#: into one short kernel call each. ResNet-50, one thread, thread CPU time, interleaved in
#: one process, load 5-13 (loop-IR tiles -> kernel tiles, ms, medians): 1x1 64->256 at
#: 56x56 (its 4 layers) 14.4 -> 10.6, 12.6 -> 11.1 and 15.3 -> 12.8; 128->512 at 28x28
#: 11.0 -> 8.4, 10.4 -> 9.4 and 12.4 -> 10.9; alone after the residual's conv, 64->256
#: 5.84 -> 5.39, 128->512 4.64 -> 3.97. Only on images of more than
#: WHOLE_IMAGE_POSITIONS positions (smaller ones the kernel takes whole: MobileNetV2's 1x1
#: 96->576 and 64->384 at 14x14 ran 1.34x and 1.08x their time) and from
#: NHWC_KERNEL_CHANNELS input channels (its 16->96 at 112x112 and 24->144 at 56x56, row
#: pieces of 6 columns: 0.96-1.45x, not shown to win at a load of 13).
NHWC_POINTWISE_KERNEL = True
NHWC_KERNEL_CHANNELS = 64


def kernel_layout(
    dtype: str,
    wshape: tuple[int, ...],
    out_shape: Any,
    channels_last: bool = False,
    strided: bool = False,
) -> bool:
    """Whether conv_packed (packed weight ``wshape``, output ``out_shape`` as N, C,
    *spatial) lays its input out for the C micro-kernel and its schedule calls it
    (attribute TILE_KERNEL of the reduction stage): the target being lowered for runs the
    kernel (ember.ops.nn_conv_f32.use_tile_kernel) and the layer is long enough for it to
    pay (tile_kernel_pays), or it is a ``channels_last`` 1x1 of blocks of BLOCK on an
    image larger than WHOLE_IMAGE_POSITIONS with at least NHWC_KERNEL_CHANNELS input
    channels (NHWC_POINTWISE_KERNEL). Elsewhere the NCHW layout stays: the llvm back end's
    tiles measured slower channels last (3x3 64ch 56x56 3.2 -> 4.2 ms, one thread, busy
    machine). On AVX-512 CPUs avx512_loop_tiles_win keeps some blocks of BLOCK on loop-IR
    tiles (``strided``: the convolution has a stride above 1)."""
    target = COMPUTE_TARGET.get()
    block = int(wshape[-1])
    if target is None or not block_kernel(target, dtype, block):
        return False
    taps = int(np.prod(wshape[2:-1]))
    positions = int(np.prod([int(d) for d in out_shape[2:]]))
    outputs = int(np.prod([int(d) for d in out_shape]))
    reduction = int(np.prod(wshape[1:-1]))
    if loop_tiles_win(target, block, positions, outputs, reduction):
        return False
    if block == BLOCK and avx512_loop_tiles_win(target, int(wshape[1]), taps, positions, strided):
        return False
    short = channels_last and NHWC_POINTWISE_KERNEL and taps == 1 and block == BLOCK
    if short and positions > WHOLE_IMAGE_POSITIONS and int(wshape[1]) >= NHWC_KERNEL_CHANNELS:
        return True
    return tile_kernel_pays(int(wshape[1]), taps, positions, block)


#: NHWC 1x1 convolutions with at least this many input channels, on the micro-kernel's
#: layout and on images of more than WHOLE_IMAGE_POSITIONS positions, keep the kernel's row
#: bands instead of flattened positions: ResNet-50, one thread, thread CPU time, A/B in one
#: process, load 4-5, flat/rows: 256->64 at 56x56 1.10-1.14, 512->256 at 28x28 1.06-1.14
#: (below it flat won: 64->256 at 56x56 0.72, 128->512 at 28x28 0.72-0.93).
ROW_BAND_CHANNELS = 256


def nhwc_tiles(
    dtype: str,
    wshape: tuple[int, ...],
    out_shape: Any,
    conv: tuple[tuple[int, ...], ...],
    groups: int,
) -> tuple[bool, bool]:
    """``(kernel, flat)`` for an NHWC conv_packed (packed weight ``wshape``, output
    ``out_shape`` as N, *spatial, C; ``conv`` its strides, dilations, paddings before and
    after): whether it takes the micro-kernel's layout (kernel_layout, channels last) and
    whether its positions are flattened into one matrix product
    (ember.ops.nn_conv_nhwc.flat_channels_last; strided 1x1s on AVX-512 C targets too,
    on loop-IR tiles: nn_conv_flat.flat_strided). The one place both are decided."""
    nchw_shape = (out_shape[0], out_shape[-1], *out_shape[1:-1])
    strides, _, pad_begin, pad_end = conv
    strided = any(int(v) > 1 for v in strides)
    pads = (*pad_begin, *pad_end)
    if strided and flat_strided(COMPUTE_TARGET.get(), dtype, wshape, strides, pads, groups):
        return False, True
    kernel = kernel_layout(dtype, wshape, nchw_shape, channels_last=True, strided=strided)
    flat = flat_fits(wshape[2:-1], strides, pads, out_shape, groups)
    positions = int(np.prod([int(d) for d in out_shape[1:-1]]))
    if flat and kernel and positions > WHOLE_IMAGE_POSITIONS:
        flat = int(wshape[1]) < ROW_BAND_CHANNELS
    return kernel, flat


def lanes_layout(
    dtype: str,
    block: int,
    strides: tuple[int, ...],
    out_spatial: tuple[Any, ...],
    flat: bool,
    outputs: int = 0,
) -> bool:
    """Whether conv_packed takes position-lane tiles (ember.ops.nn_conv_lanes): the target
    runs the micro-kernel and the layer's rows fit them."""
    target = COMPUTE_TARGET.get()
    if target is None or not use_tile_kernel(target, dtype):
        return False
    spatial = tuple(int(d) for d in out_spatial)
    if loop_tiles_win(target, block, int(np.prod(spatial)), outputs):
        return False
    return position_lanes(block, strides, spatial, flat)
