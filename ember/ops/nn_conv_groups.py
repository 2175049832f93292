"""Grouped convolutions whose groups do not pack: one convolution per group.

A grouped convolution packs (ember.ir.ops.nn_conv_weights.packed_block) when a block of 16
or 8 output channels divides each group's outputs; ShuffleNet's 1x1 convolutions of 4
groups of 68 and 34 channels do not, and the unpacked compute (channels first, a scalar
loop over each group's inputs) ran them at 5-8% of the FMA limit: 13 ms a run at one
thread against onnxruntime's 2.5. ``split_groups`` rewrites such a convolution, with a
constant weight, as its groups' convolutions on their slices of the input channels,
concatenated along the channels: each is a plain packed convolution in blocks of
split_block's (68 outputs in 5 blocks of 16, 34 in 3, the last one partial), which
computes each output's products in the same order. convert_layout lays them out channels last, as
the convolutions that pack (split_block is its test too).
"""

from __future__ import annotations

import numpy as np

from ember.ir.expr import Call, Constant, Expr, call, const
from ember.ir.ops.common import data_layout
from ember.ir.ops.nn_conv_weights import split_block
from ember.ir.types import TensorType
from ember.ops.nn_conv_pack import to_packed

__all__ = ["SPLIT_GROUPS", "split_groups"]

#: whether grouped convolutions whose groups do not pack are split (split_groups).
SPLIT_GROUPS = True


def split_groups(node: Call) -> Expr | None:
    """``node`` (an nn.conv with a constant float32 weight whose groups do not pack, see
    split_block) as one packed convolution per group on its input channels, concatenated
    along the channels; None for any other."""
    x, w = node.args
    if not SPLIT_GROUPS or not isinstance(w, Constant):
        return None
    data = np.asarray(w.data)
    groups = int(node.attrs["groups"])
    if data.dtype != np.float32 or data.ndim < 3:
        return None
    block = split_block(data.shape, groups)
    ty = x.type
    if not block or not isinstance(ty, TensorType):
        return None
    if not all(isinstance(d, int | np.integer) for d in ty.shape):
        return None
    shape = [int(d) for d in ty.shape]
    axis = len(shape) - 1 if data_layout(node.attrs) == "NHWC" else 1
    per_in, per_out = int(data.shape[1]), int(data.shape[0]) // groups
    attrs = {**dict(node.attrs), "groups": 1}
    parts: list[Expr] = []
    for g in range(groups):
        begin, end = [0] * len(shape), list(shape)
        begin[axis], end[axis] = g * per_in, (g + 1) * per_in
        part = call("strided_slice", x, begin=begin, end=end, strides=[1] * len(shape))
        weight = const(np.ascontiguousarray(data[g * per_out : (g + 1) * per_out]))
        name = f"{node.name}_g{g}" if node.name else ""
        conv = call("nn.conv", part, weight, name=name, **attrs)
        parts.append(to_packed(conv, block))
    return call("concatenate", *parts, axis=axis)
