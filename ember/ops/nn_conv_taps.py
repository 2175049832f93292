"""The order of a packed convolution's weight: the kernel taps before the input channels
where the C micro-kernel reduces taps outer, channels inner.

nn.conv_packed's weight is (O/b, I, *k, b) (``pack_conv_weight``): the micro-kernel reads
it contiguously only when it reduces over the channels outermost (nn_conv_layouts.
channels_outer: small images taken whole, each position then reading a cache line per tap
at once); reducing over the taps outermost and the channels innermost (each position reads
contiguous channels of its channels-last input) steps through that weight one cache line
every taps x 64 bytes (576 bytes at 3x3). Packed (O/b, *k, I, b) instead (nn.conv_packed's
``taps_first``), the taps-outer reduction reads both operands contiguously, and wins on
every layer measured, the small images included (one thread, thread CPU time, interleaved
in one process, load 6-9, median of 31; taps-first taps outer / the order before): 3x3
512->512 at 7x7 0.75 (channels outer before), 256->256 at 8x8 0.76, 512->512 stride 2
14->7 0.85, 256->32 at 7x7 0.83, 128->128 at 8x8 0.89; 256->256 at 14x14 0.96, crnn's
256->256 at 4x25 0.98, 128->128 stride 2 56->28 0.90-0.95, 64->64 at 56x56 and 128->128 at
28x28 1.00 (taps outer before). ``taps_first`` decides per layer from its shape;
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
    """Whether a packed convolution's weight is packed taps first (its channels-last
    reduction then taps outer, whatever nn_conv_layouts.channels_outer says): a kernel of
    more than one tap, blocks of BLOCK output channels (the narrow kernels' blocks of 8 are
    regrouped by a copy channels first), a reduction long enough for the micro-kernel
    (nn_conv_f32.tile_kernel_pays) and no position-lane tiles (they broadcast the weight)."""
    taps = int(np.prod(kernel))
    positions = int(np.prod(out_spatial))
    if not TAPS_FIRST or taps == 1 or block != BLOCK or not out_spatial:
        return False
    if not tile_kernel_pays(in_per_group, taps, positions, block):
        return False
    return not position_lanes(block, strides, out_spatial, False)


def taps_first_view(wp: te.Tensor) -> te.Tensor:
    """A taps-first packed weight (O/b, *k, I, b) indexed as (O/b, I, *k, b): a stage of no
    attributes, which the lowering inlines into its readers (no copy)."""
    shape = static_shape(wp)

    def body(ob: Any, c: Any, *rest: Any) -> PrimExpr:
        *taps, lane = rest
        return wp[(ob, *taps, c, lane)]

    plain = (shape[0], shape[-2], *shape[1:-2], shape[-1])
    return te.compute(plain, body, "weight_taps")
