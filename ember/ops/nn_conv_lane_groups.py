"""Grouped convolutions whose groups are narrower than a block: several groups a block.

ResNeXt's 3x3 convolutions have 32 groups of 4 and 8 channels (RegNet's of 8 and 16): a
group's 4 outputs do not fill a block of 16 lanes, and packed per group in blocks of 8
(or unpacked, channels first between two transposes) they ran at 22-36% of the FMA limit.
Where a group has as many inputs as outputs (lane_group_block), a block of 16 output
channels holds 16/g whole groups that read 16 consecutive input channels, those of the
block itself: ``lane_groups_form`` packs such a convolution in blocks of 16 (the packed
weight (O/16, g, *k, 16) of any packed convolution), and its channels-last compute reads
input channel ``block + lane // g * g + c`` for the reduction's channel ``c < g``
(ember.ops.nn_conv_layouts.conv_channels_last). The tile rewrite
(ember.ops.nn_conv_rewrite) turns each register tile into one call of its LANE_GROUP_KERNEL
(ember/codegen/c/f32_lane_groups.py), which loads a position's 16 input channels once per
kernel tap and spreads each group's channel ``c`` over the group's lanes with a shuffle:
4 shuffles and 4 fused multiply-adds per position and tap for groups of 4, no work on
zeros. Only the c kind on AVX-512 CPUs has the kernel; elsewhere the legalizer keeps the
other forms (the loop IR of this compute would gather each lane).
"""

from __future__ import annotations

import numpy as np

from ember.ir.expr import Call, Constant, Expr
from ember.ir.ops.common import data_layout
from ember.ir.ops.nn_conv_weights import lane_group_block
from ember.ops.nn_conv_pack import to_packed
from ember.ops.registry import LEGALIZE_TARGET
from ember.target import Target

__all__ = ["LANE_GROUPS", "lane_groups_form", "lane_groups_target"]

#: whether grouped convolutions of narrow groups pack several groups a block (the module
#: docstring); False keeps blocks of 8 per group, or the unpacked compute.
LANE_GROUPS = True


def lane_groups_target(target: Target | None) -> bool:
    """Whether ``target`` compiles LANE_GROUP_KERNEL's AVX-512 code: the c kind on an
    AVX-512 CPU record (the llvm kinds have no copy of it)."""
    if target is None:
        return False
    keys = set(target.keys)
    return "x86-avx512" in keys and "llvm" not in keys


def lane_groups_form(node: Call) -> Expr | None:
    """``node`` (an NHWC nn.conv with a constant float32 weight) packed with several groups
    a block of 16 when this build's target has the kernel and its groups fit
    (lane_group_block); None for any other."""
    x, w = node.args
    if not LANE_GROUPS or not isinstance(w, Constant) or data_layout(node.attrs) != "NHWC":
        return None
    data = np.asarray(w.data)
    if data.dtype != np.float32 or data.ndim != 4 or not lane_groups_target(LEGALIZE_TARGET.get()):
        return None
    block = lane_group_block(data.shape, int(node.attrs["groups"]))
    return to_packed(node, block) if block else None
