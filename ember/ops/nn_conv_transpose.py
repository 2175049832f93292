"""nn.conv_transpose whose kernel equals its stride: a 1x1 convolution and a depth-to-space.

A 2-d transposed convolution with kernel (s, s), stride (s, s), no padding, no output
padding, dilation 1 and one group (DBNet's and U-Net's 2x2 stride-2 upsampling heads)
writes each output pixel from exactly one kernel tap: ``y[o, s*h + a, s*w + b] =
sum_i x[i, h, w] * w[i, o, a, b]``. It is therefore a 1x1 convolution with s*s*O output
channels, ``(o, a, b)`` in CRD order, followed by ``nn.depth_to_space`` in CRD mode. The
1x1 convolution legalizes further into a packed, register-tiled ``nn.conv_packed``
(flattened over positions), the depth-to-space is a copy fused with the bias and
activation that follow. Measured single thread on DBNet's head (24 -> 24 channels, 80x80
-> 160x160): the upsampled-input convolution 12.9 ms, this form about 1 ms. The rewrite
itself is ember.ir.ops.nn_conv_transpose_form, which convert_layout shares (its NHWC form).
"""

from __future__ import annotations

from ember.ir.expr import Call, Expr
from ember.ir.ops.nn_conv_transpose_form import pointwise_form


def conv_transpose_to_pointwise(node: Call) -> Expr:
    """nn.conv_transpose with a constant weight and kernel == stride -> nn.conv (1x1, the
    weight re-laid out at compile time) then nn.depth_to_space; anything else stays."""
    return pointwise_form(node, node.args[0]) or node
