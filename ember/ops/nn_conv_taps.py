"""The order of a packed convolution's weight: the kernel taps before the input channels
where the C micro-kernel reduces taps outer, channels inner.

nn.conv_packed's weight is (O/b, I, *k, b) (``pack_conv_weight``): the micro-kernel reads
it contiguously when it reduces over the channels outermost (nn_conv_layouts.channels_outer:
small images taken whole), but the other layers reduce over the taps outermost and the
channels innermost (each position then reads contiguous channels of its channels-last
input), and step through the weight one cache line every taps x 64 bytes (576 bytes at
3x3). For those the legalizer packs (O/b, *k, I, b) (nn.conv_packed's ``taps_first``):
both operands are then read contiguously. ``taps_first`` decides per layer from its shape;
``taps_first_view`` gives the computes the (O/b, I, *k, b) shape they index, as a stage
that the lowering inlines, so that every path reading the weight (the micro-kernel's
channels-last reduction, the loop-IR tiles of other targets, the position-lane tiles, the
narrow kernels' regrouped copy) reads the right elements of either order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.ops.common import static_shape
from ember.ops.nn_conv_f32 import BLOCK, tile_kernel_pays
from ember.ops.nn_conv_lanes import position_lanes
from ember.ops.nn_conv_layouts import channels_outer
from ember.tir import PrimExpr, te

#: pack the weight taps first for the layers ``taps_first`` selects (False: never).
TAPS_FIRST = True


def taps_first(
    kernel: tuple[int, ...],
    in_per_group: int,
    block: int,
    strides: tuple[int, ...],
    out_spatial: tuple[int, ...],
) -> bool:
    """Whether a packed convolution's weight is packed taps first: a kernel of more than one
    tap, blocks of BLOCK output channels, a reduction the micro-kernel takes
    (nn_conv_f32.tile_kernel_pays) over the taps outermost (neither position-lane tiles nor
    the channels-outer order of small images)."""
    taps = int(np.prod(kernel))
    positions = int(np.prod(out_spatial))
    if not TAPS_FIRST or taps == 1 or block != BLOCK or not out_spatial:
        return False
    if not tile_kernel_pays(in_per_group, taps, positions, block):
        return False
    if position_lanes(block, strides, out_spatial, False):
        return False
    return not channels_outer(out_spatial)


def taps_first_view(wp: te.Tensor) -> te.Tensor:
    """A taps-first packed weight (O/b, *k, I, b) indexed as (O/b, I, *k, b): a stage of no
    attributes, which the lowering inlines into its readers (no copy)."""
    shape = static_shape(wp)

    def body(ob: Any, c: Any, *rest: Any) -> PrimExpr:
        *taps, lane = rest
        return wp[(ob, *taps, c, lane)]

    plain = (shape[0], shape[-2], *shape[1:-2], shape[-1])
    return te.compute(plain, body, "weight_taps")
