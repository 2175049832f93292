"""nn.conv_transpose whose kernel equals its stride: a 1x1 convolution and a depth-to-space.

A 2-d transposed convolution with kernel (s, s), stride (s, s), no padding, no output
padding, dilation 1 and one group (DBNet's and U-Net's 2x2 stride-2 upsampling heads)
writes each output pixel from exactly one kernel tap: ``y[o, s*h + a, s*w + b] =
sum_i x[i, h, w] * w[i, o, a, b]``. It is therefore a 1x1 convolution with s*s*O output
channels, ``(o, a, b)`` in CRD order, followed by ``nn.depth_to_space`` in CRD mode. The
1x1 convolution legalizes further into a packed, register-tiled ``nn.conv_packed``
(flattened over positions), the depth-to-space is a copy fused with the bias and
activation that follow. Measured single thread on DBNet's head (24 -> 24 channels, 80x80
-> 160x160): the upsampled-input convolution 12.9 ms, this form about 1 ms.
"""

from __future__ import annotations

import numpy as np

from ember.ir.expr import Call, Constant, Expr, call, const
from ember.ir.ops.common import padding, spatial


def _kernel_is_stride(node: Call, wshape: tuple[int, ...]) -> int:
    """The stride ``s`` when ``node`` is a one-group 2-d transposed convolution with an
    (s, s) kernel, stride (s, s), no padding or output padding and dilation 1; else 0."""
    if len(wshape) != 4 or int(node.attrs["groups"]) != 1:
        return 0
    strides = spatial(node.attrs, "strides", 2, 1)
    kernel = tuple(int(k) for k in wshape[2:])
    if kernel != strides or kernel[0] != kernel[1] or kernel[0] < 2:
        return 0
    if spatial(node.attrs, "dilation", 2, 1) != (1, 1):
        return 0
    if any(b or e for b, e in padding(node.attrs, 2)):
        return 0
    if any(spatial(node.attrs, "output_padding", 2, 0)):
        return 0
    return kernel[0]


def conv_transpose_to_pointwise(node: Call) -> Expr:
    """nn.conv_transpose with a constant weight and kernel == stride -> nn.conv (1x1, the
    weight re-laid out at compile time) then nn.depth_to_space; anything else stays."""
    x, w = node.args
    if not isinstance(w, Constant):
        return node
    data = np.asarray(w.data)
    if data.dtype not in (np.float32, np.float64):
        return node
    s = _kernel_is_stride(node, data.shape)
    if not s:
        return node
    cin, cout = data.shape[:2]
    # (I, O, a, b) -> (O, a, b, I) -> (O*s*s, I, 1, 1): output channel (o*s + a)*s + b
    pointwise = np.ascontiguousarray(data.transpose(1, 2, 3, 0)).reshape(cout * s * s, cin, 1, 1)
    name = node.name
    y = call(
        "nn.conv",
        x,
        const(pointwise),
        strides=(1, 1),
        padding=(0, 0, 0, 0),
        dilation=(1, 1),
        groups=1,
        name=f"{name}.pointwise" if name else "",
    )
    return call("nn.depth_to_space", y, block_size=s, mode="CRD", name=name)
