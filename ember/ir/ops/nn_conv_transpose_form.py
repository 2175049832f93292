"""nn.conv_transpose whose kernel equals its stride, as a 1x1 convolution and a
depth-to-space, in either layout (the graph rewrite the nn.conv_transpose legalizer, NCHW,
and convert_layout, NHWC, share).

A 2-d transposed convolution with kernel (s, s), stride (s, s), no padding, no output
padding, dilation 1 and one group writes each output pixel from exactly one kernel tap:
``y[o, s*h + a, s*w + b] = sum_i x[i, h, w] * w[i, o, a, b]``: a 1x1 convolution with
s*s*O output channels followed by ``nn.depth_to_space``.

* NCHW: the channels in CRD order ``(o, a, b)``, depth-to-space mode CRD.
* NHWC: the channels in DCR order ``(a, b, o)``, so that each output pixel copies one
  contiguous run of O channels; when s*s*O is not a multiple of a packed block (DBNet's
  last head: 24 -> 1 channel, s = 2, 4 channels) the weight gets zero output channels up to
  the next multiple of 8 and a slice on the channel axis drops them again (a 1x1 conv that
  packs costs less than one that does not, even at twice the outputs).
"""

from __future__ import annotations

import numpy as np

from ember.ir.expr import Call, Constant, Expr, call, const
from ember.ir.ops.common import padding, spatial
from ember.ir.ops.nn_conv_weights import pack_block
from ember.ir.types import TensorType

#: the output-channel multiple a channels-last pointwise form pads its weight to.
PAD_BLOCK = 8


def kernel_is_stride(node: Call) -> int:
    """The stride ``s`` when ``node`` is a one-group 2-d transposed convolution with a
    constant float (s, s) kernel, stride (s, s), no padding or output padding and
    dilation 1; else 0."""
    w = node.args[1]
    if not isinstance(w, Constant) or np.asarray(w.data).dtype not in (np.float32, np.float64):
        return 0
    wshape = np.shape(w.data)
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


def pointwise_form(node: Call, x: Expr, layout: str = "NCHW") -> Expr | None:
    """``node`` (nn.conv_transpose, kernel == stride) on data ``x`` in ``layout`` as a 1x1
    nn.conv and nn.depth_to_space (result in ``layout``); None for any other transposed
    convolution."""
    s = kernel_is_stride(node)
    if not s:
        return None
    data = np.asarray(node.args[1].data)  # type: ignore[attr-defined]
    cin, cout = data.shape[:2]
    last = layout == "NHWC"
    # (I, O, a, b) -> CRD (O, a, b, I) or DCR (a, b, O, I), then (channels, I, 1, 1)
    order = (2, 3, 1, 0) if last else (1, 2, 3, 0)
    weight = np.ascontiguousarray(data.transpose(order)).reshape(cout * s * s, cin, 1, 1)
    channels = cout * s * s
    if last and not pack_block(channels):
        padded = -(-channels // PAD_BLOCK) * PAD_BLOCK
        weight = np.concatenate([weight, np.zeros((padded - channels, cin, 1, 1), weight.dtype)])
    name = node.name
    y: Expr = call(
        "nn.conv",
        x,
        const(weight),
        strides=(1, 1),
        padding=(0, 0, 0, 0),
        dilation=(1, 1),
        groups=1,
        data_layout=layout,
        name=f"{name}.pointwise" if name else "",
    )
    if last and isinstance(y.type, TensorType) and y.type.shape[-1] != channels:
        end = (*y.type.shape[:3], channels)
        y = call("strided_slice", y, begin=(0, 0, 0, 0), end=end, strides=(1, 1, 1, 1))
    mode = "DCR" if last else "CRD"
    return call("nn.depth_to_space", y, block_size=s, mode=mode, data_layout=layout, name=name)
