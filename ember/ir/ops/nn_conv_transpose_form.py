"""nn.conv_transpose as one convolution, a depth-to-space and a crop (the phase
decomposition), in either layout (the graph rewrite the nn.conv_transpose legalizer, NCHW,
and convert_layout, NHWC, share).

A 2-d transposed convolution with stride s writes output row ``s*q + a - pad`` from the
kernel rows ``a + s*t`` only: per output phase ``(a, b)`` it is an ordinary convolution
of the input with the flipped sub-kernel of those taps (m x m, m = ceil(kernel / s), the
kernel zero-padded to s*m). All s*s phases are one m x m convolution with s*s*O output
channels, padded m - 1 on every side; ``nn.depth_to_space`` interleaves the phases into
the full product and a ``strided_slice`` drops the padding (phase_form). Kernel == stride
(DBNet's and U-Net's 2x2 stride-2 heads) is the 1x1 case with no crop. The convolution
legalizes further into a packed, register-tiled one: a 4x4 stride-2 deconvolution of
32x32x128 to 64 channels took 14.0 ms through the generic transposed compute (onnxruntime
1.37), 1.45-1.51 as phases (one thread, the layout transposes of a lone op included).

* NCHW: the channels in CRD order ``(o, a, b)``, depth-to-space mode CRD.
* NHWC: the channels in DCR order ``(a, b, o)``, so that each output pixel copies one
  contiguous run of O channels; when s*s*O is not a multiple of a packed block (DBNet's
  last head: 24 -> 1 channel, s = 2, 4 channels) the weight gets zero output channels up to
  the next multiple of 8 and a slice on the channel axis drops them again (a convolution
  that packs costs less than one that does not, even at twice the outputs).
"""

from __future__ import annotations

import numpy as np

from ember.ir.expr import Call, Constant, Expr, call, const
from ember.ir.ops.common import padding, spatial
from ember.ir.ops.nn_conv_weights import pack_block
from ember.ir.types import TensorType

#: the output-channel multiple a channels-last pointwise form pads its weight to.
PAD_BLOCK = 8


def phase_taps(node: Call) -> tuple[int, int] | None:
    """``(s, m)`` when ``node`` is a one-group 2-d transposed convolution with a constant
    float weight, equal strides s >= 2, dilation 1 and each axis's kernel at most s * m
    (m: its taps per phase, the kernel rounded up to a multiple of s), its output padding
    no more than its end padding (the output then lies inside the full product); else
    None."""
    w = node.args[1]
    if not isinstance(w, Constant) or np.asarray(w.data).dtype not in (np.float32, np.float64):
        return None
    wshape = np.shape(w.data)
    if len(wshape) != 4 or int(node.attrs["groups"]) != 1:
        return None
    sh, sw = spatial(node.attrs, "strides", 2, 1)
    if sh != sw or sh < 2 or spatial(node.attrs, "dilation", 2, 1) != (1, 1):
        return None
    pads = padding(node.attrs, 2)
    extra = spatial(node.attrs, "output_padding", 2, 0)
    if any(e > end for e, (_, end) in zip(extra, pads, strict=True)):
        return None
    m = max(-(-int(k) // sh) for k in wshape[2:])
    if m > MAX_PHASE_TAPS:
        return None
    return sh, m


#: the most taps per phase along an axis (a kernel of up to stride x this): 4x4 stride-2
#: deconvolutions (DCGAN, FCN heads) have 2, 3x3 stride-2 ones (decoders) 2 after padding.
MAX_PHASE_TAPS = 4


def kernel_is_stride(node: Call) -> int:
    """The stride ``s`` when ``node`` takes phase_form with one tap per phase and no padding
    (kernel == stride: a 1x1 convolution and a depth-to-space); else 0."""
    taps = phase_taps(node)
    if taps is None or taps[1] != 1:
        return 0
    kernel = tuple(int(k) for k in np.shape(node.args[1].data)[2:])  # type: ignore[attr-defined]
    if kernel != (taps[0], taps[0]) or any(b or e for b, e in padding(node.attrs, 2)):
        return 0
    return taps[0]


def pointwise_form(node: Call, x: Expr, layout: str = "NCHW") -> Expr | None:
    """``node`` (nn.conv_transpose) on data ``x`` in ``layout`` as phase_form's convolution
    and nn.depth_to_space (result in ``layout``); None for any transposed convolution
    phase_taps does not take."""
    return phase_form(node, x, layout)


def phase_form(node: Call, x: Expr, layout: str = "NCHW") -> Expr | None:
    """``node`` (an nn.conv_transpose phase_taps takes: stride s, m taps per phase) on data
    ``x`` in ``layout`` as one m x m nn.conv with s*s*O output channels, padded m - 1 on
    every side, then nn.depth_to_space and a crop (result in ``layout``).

    Phase ``(a, b)`` of the output (its rows ``s*q + a`` and columns ``s*r + b`` before the
    crop) sums ``x[i, q - m + 1 + u, r - m + 1 + v] * w[i, o, a + s*(m-1-u), b + s*(m-1-v)]``
    over the kernel taps that land on it (the kernel zero-padded to s*m taps): a
    convolution with the flipped sub-kernels, all phases one convolution of s*s*O
    channels; the depth-to-space interleaves them into the full transposed product
    ((H - 1)*s + s*m rows), and the crop keeps the rows from the begin padding on."""
    taps = phase_taps(node)
    if taps is None:
        return None
    s, m = taps
    data = np.asarray(node.args[1].data)  # type: ignore[attr-defined]
    cin, cout, kh, kw = data.shape
    full = np.zeros((cin, cout, s * m, s * m), data.dtype)
    full[:, :, :kh, :kw] = data
    # (I, O, a + s*t, b + s*t') -> (I, O, a, b, t, t'), taps flipped: t = m - 1 - u
    phases = full.reshape(cin, cout, m, s, m, s).transpose(0, 1, 3, 5, 2, 4)[..., ::-1, ::-1]
    last = layout == "NHWC"
    # output channels CRD (O, a, b) or DCR (a, b, O), then (I, u, v)
    moved = phases.transpose((2, 3, 1, 0, 4, 5) if last else (1, 2, 3, 0, 4, 5))
    weight = np.ascontiguousarray(moved).reshape(cout * s * s, cin, m, m)
    channels = cout * s * s
    if last and not pack_block(channels):
        padded = -(-channels // PAD_BLOCK) * PAD_BLOCK
        zeros = np.zeros((padded - channels, cin, m, m), weight.dtype)
        weight = np.concatenate([weight, zeros])
    name = node.name
    y: Expr = call(
        "nn.conv",
        x,
        const(weight),
        strides=(1, 1),
        padding=(m - 1, m - 1, m - 1, m - 1),
        dilation=(1, 1),
        groups=1,
        data_layout=layout,
        name=f"{name}.phases" if name else "",
    )
    if last and isinstance(y.type, TensorType) and y.type.shape[-1] != channels:
        end = (*y.type.shape[:3], channels)
        y = call("strided_slice", y, begin=(0, 0, 0, 0), end=end, strides=(1, 1, 1, 1))
    mode = "DCR" if last else "CRD"
    space = call("nn.depth_to_space", y, block_size=s, mode=mode, data_layout=layout)
    out = node.type
    if not isinstance(out, TensorType) or not isinstance(space.type, TensorType):
        return None
    (top, _), (left, _) = padding(node.attrs, 2)
    have = [int(d) for d in space.type.shape]
    n, c, h, w = (int(d) for d in out.shape)  # node's own (NCHW) result
    want = [n, h, w, c] if last else [n, c, h, w]
    axes = (1, 2) if last else (2, 3)
    if have == want and not top and not left:
        return call("nn.depth_to_space", y, block_size=s, mode=mode, data_layout=layout, name=name)
    begin = [0, 0, 0, 0]
    begin[axes[0]], begin[axes[1]] = top, left
    stop = list(want)
    stop[axes[0]] += top
    stop[axes[1]] += left
    if any(e > h for e, h in zip(stop, have, strict=True)):
        return None
    return call("strided_slice", space, begin=begin, end=stop, strides=(1, 1, 1, 1), name=name)
