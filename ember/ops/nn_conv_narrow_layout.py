"""The packed weight of a convolution in blocks of 8 output channels regrouped in blocks of
24 for the C kernel ``ember_f32_conv_tile24`` (see ember.ops.nn_conv_narrow).

The legalizer packs 24 output channels as three blocks of 8 (blocks of 16 would pad them to
32: ember.ir.ops.nn_conv_weights.pack_block). A tile of 24 channels x 4 positions loads three weight
vectors and broadcasts four inputs per 12 FMAs where three tiles of 8 channels x 8 positions
load three weights and broadcast 24 inputs per 24: the layer's compute reads the weight
through a copy laid out ``(O/24, I, *k, 24)``, materialised once per call (96->24 3x3:
20,736 floats, well under 1% of the convolution's time).
"""

from __future__ import annotations

from typing import Any

from ember.ops.common import static_shape
from ember.ops.nn_conv_narrow import NARROW_BLOCK, WIDE_BLOCK
from ember.ops.nn_schedule import MATERIALIZE
from ember.tir import te


def widen_blocks(wp: te.Tensor, groups: int) -> te.Tensor:
    """``wp`` (O/8, I, *k, 8) as (O/24, I, *k, 24) when it is an ungrouped weight of blocks of
    8 whose count divides by 3 (its channels, padding included, are unchanged); else ``wp``."""
    wshape = static_shape(wp)
    factor = WIDE_BLOCK // NARROW_BLOCK
    if groups != 1 or wshape[-1] != NARROW_BLOCK or wshape[0] % factor:
        return wp

    def body(ob: Any, *rest: Any) -> Any:
        *mid, lane = rest
        return wp[(ob * factor + lane // NARROW_BLOCK, *mid, lane % NARROW_BLOCK)]

    shape = (wshape[0] // factor, *wshape[1:-1], WIDE_BLOCK)
    return te.compute(shape, body, "weight_wide", attrs={MATERIALIZE: True})
