"""ONNX handlers for signal processing: DFT and STFT, by decomposition into matrix
products, and MelWeightMatrix, a constant.

A DFT of length L along one axis is two products with constant (L, K) cosine and sine
matrices, so it compiles to the existing matmul kernels: with ``a = sign * 2 pi t k / L``,
``Y_re = re @ cos(a) - im @ sin(a)`` and ``Y_im = re @ sin(a) + im @ cos(a)`` (scaled by
1/L when inverse), accumulated in float64. ``onesided`` keeps the first L//2+1
frequencies; an inverse onesided DFT rebuilds the real signal from its half spectrum
(Hermitian weights 1 or 2). STFT gathers its frames with a constant index matrix, scales
them by the window and takes the DFT of each frame.
"""

from __future__ import annotations

import numpy as np

from ember.frontend.onnx import common, fft
from ember.frontend.onnx.context import ConvertContext, NodeView, onnx_elem_dtype
from ember.frontend.onnx.registry import FLOAT_TYPES, onnx_op
from ember.ir.expr import Constant, Expr, call
from ember.ir.ops.common import np_dtype


def _axis(ctx: ConvertContext, node: NodeView, rank: int) -> int:
    """The signal axis (not the trailing real/complex one), non-negative."""
    if node.opset >= 20:
        value = node.input(2)
        axis = -2 if value is None else int(ctx.require_const(value, "axis").reshape(-1)[0])
    else:
        axis = int(node.attr("axis", 1))
    if not -rank <= axis < rank - 1 and axis != -1:
        ctx.fail(node, f"axis {axis} is out of range for an input of rank {rank}")
    axis %= rank
    if axis == rank - 1:
        ctx.fail(node, "axis must not be the last (real/imaginary) axis")
    return axis


def _component(x: Expr, shape: tuple[int, ...], index: int) -> Expr:
    """Real (0) or imaginary (1) part: the trailing axis sliced away."""
    begin = [0] * len(shape)
    end = list(shape)
    begin[-1], end[-1] = index, index + 1
    part = call("strided_slice", x, begin=begin, end=end, strides=[1] * len(shape))
    return call("reshape", part, newshape=shape[:-1])


def _resize_last(x: Expr, shape: tuple[int, ...], length: int) -> Expr:
    """``x`` truncated or zero-padded along its last axis to ``length``."""
    n = shape[-1]
    if length == n:
        return x
    if length < n:
        end = [*shape[:-1], length]
        return call("strided_slice", x, begin=[0] * len(shape), end=end, strides=[1] * len(shape))
    pads = [0] * (2 * len(shape))
    pads[2 * len(shape) - 1] = length - n
    return call("nn.pad", x, pad_width=pads, pad_value=0.0)


def _resize_both(
    re: Expr, im: Expr | None, shape: tuple[int, ...], length: int
) -> tuple[Expr, Expr | None]:
    """Both parts (the imaginary one may be absent) resized along their last axis."""
    return _resize_last(re, shape, length), None if im is None else _resize_last(im, shape, length)


def _matrices(
    rows: int, cols: int, length: int, sign: float, scale: np.ndarray, dtype: str
) -> tuple[Constant, Constant]:
    """cos and sin of ``sign * 2 pi r c / length`` for r < rows, c < cols, times ``scale``
    (broadcast over rows)."""
    r = np.arange(rows, dtype=np.float64)[:, None]
    c = np.arange(cols, dtype=np.float64)[None, :]
    angle = sign * 2.0 * np.pi * ((r * c) % length) / length
    cos = (np.cos(angle) * scale).astype(dtype)
    sin = (np.sin(angle) * scale).astype(dtype)
    return Constant(cos), Constant(sin)


@onnx_op("DFT", since=17, dtypes=FLOAT_TYPES)
def dft(ctx: ConvertContext, node: NodeView) -> Expr:
    """DFT along one axis of a real (..., 1) or complex (..., 2) signal."""
    x = common.arg(ctx, node, 0, "input")
    shape = common.ttype(x).shape
    if len(shape) < 2 or shape[-1] not in (1, 2):
        ctx.fail(node, f"input must end in a real (1) or complex (2) axis, got {shape}")
    axis = _axis(ctx, node, len(shape))
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    length_expr = node.input(1)
    length = None
    if length_expr is not None:
        length = int(ctx.require_const(length_expr, "dft_length").reshape(-1)[0])
    return dft_along(x, axis, inverse, onesided, length)


def dft_along(x: Expr, axis: int, inverse: bool, onesided: bool, length: int | None) -> Expr:
    """The DFT of ``x`` (..., 1 or 2) along ``axis``: pocketfft's float32 passes where
    fft.py has them, else matrix products (module docstring)."""
    xt = common.ttype(x)
    shape, rank, dtype = xt.shape, xt.ndim, xt.dtype
    perm = [i for i in range(rank - 1) if i != axis] + [axis, rank - 1]
    moved = call("transpose", x, axes=perm) if perm != list(range(rank)) else x
    mshape = tuple(shape[i] for i in perm)
    n = mshape[-2]
    total = length if length is not None else n
    # numpy's float32 inverse c2c is pocketfft's passes (forward transforms of real input
    # take another path there, which the float64 products match within tolerance)
    if dtype == "float32" and inverse and not onesided and fft.factors(total) is not None:
        y = _pocketfft(moved, mshape, total, inverse, onesided)
    else:
        y = _matrix_dft(moved, mshape, dtype, inverse, onesided, length)
    inverse_perm = [perm.index(i) for i in range(rank)]
    if inverse_perm != list(range(rank)):
        y = call("transpose", y, axes=inverse_perm)
    return y


def _pocketfft(
    moved: Expr, mshape: tuple[int, ...], total: int, inverse: bool, onesided: bool
) -> Expr:
    """The float32 DFT of ``moved`` (..., n, 1 or 2) along axis -2 by fft.py's passes."""
    lead = mshape[:-2]
    m = int(np.prod(lead, dtype=np.int64))
    parts = []
    for k in range(mshape[-1]):
        part = _resize_last(_component(moved, mshape, k), mshape[:-1], total)
        parts.append(call("reshape", part, newshape=(m, total)))
    if len(parts) == 1:
        parts.append(call("broadcast_to", Constant(np.zeros((), np.float32)), shape=(m, total)))
    re, im = fft.fft(parts[0], parts[1], m, total, inverse)
    out_len = total // 2 + 1 if onesided else total
    cols = []
    for p in (re, im):
        if out_len != total:
            p = call("strided_slice", p, begin=[0, 0], end=[m, out_len], strides=[1, 1])
        cols.append(call("reshape", p, newshape=(*lead, out_len, 1)))
    return call("concatenate", *cols, axis=len(lead) + 1)


def _matrix_dft(
    moved: Expr,
    mshape: tuple[int, ...],
    dtype: str,
    inverse: bool,
    onesided: bool,
    length: int | None,
) -> Expr:
    """The DFT of ``moved`` (..., n, 1 or 2) along axis -2 as float64 matrix products."""
    n = mshape[-2]
    wide = "float64"  # accumulate in double: the sums cancel to near zero (inverse DFTs)
    re: Expr = call("cast", _component(moved, mshape, 0), dtype=wide)
    im: Expr | None = None
    if mshape[-1] == 2:
        im = call("cast", _component(moved, mshape, 1), dtype=wide)
    sign = 1.0 if inverse else -1.0
    if inverse and onesided:  # half spectrum -> real signal of length L
        total = length if length is not None else 2 * (n - 1)
        half = total // 2 + 1
        re, im = _resize_both(re, im, mshape[:-1], half)
        weights = np.full((half, 1), 2.0)
        weights[0] = 1.0
        if total % 2 == 0:
            weights[-1] = 1.0
        cos, sin = _matrices(half, total, total, sign, weights / total, wide)
        parts = [_combine(re, im, cos, sin, real=True)]
        out_len, channels = total, 1
    else:
        total = length if length is not None else n
        re, im = _resize_both(re, im, mshape[:-1], total)
        out_len = total // 2 + 1 if onesided else total
        scale = np.full((total, 1), 1.0 / total if inverse else 1.0)
        cos, sin = _matrices(total, out_len, total, sign, scale, wide)
        parts = [_combine(re, im, cos, sin, real=True), _combine(re, im, cos, sin, real=False)]
        channels = 2
    lead = mshape[:-2]
    cols = [
        call("reshape", call("cast", p, dtype=dtype), newshape=(*lead, out_len, 1)) for p in parts
    ]
    return cols[0] if channels == 1 else call("concatenate", *cols, axis=len(lead) + 1)


def _combine(re: Expr, im: Expr | None, cos: Constant, sin: Constant, real: bool) -> Expr:
    """The real (re@cos - im@sin) or imaginary (re@sin + im@cos) part of the product."""
    first = call("nn.matmul", re, cos if real else sin)
    if im is None:
        return first
    second = call("nn.matmul", im, sin if real else cos)
    return call("subtract" if real else "add", first, second)


@onnx_op("STFT", since=17, dtypes=FLOAT_TYPES)
def stft(ctx: ConvertContext, node: NodeView) -> Expr:
    """STFT: frames gathered by a constant index matrix, windowed, then a DFT per frame."""
    x = common.arg(ctx, node, 0, "signal")
    shape = common.ttype(x).shape
    if len(shape) != 3 or shape[-1] not in (1, 2):
        ctx.fail(node, f"signal must be (batch, length, 1 or 2), got {shape}")
    step = int(ctx.require_const(node.input(1), "frame_step").reshape(-1)[0])
    window = node.input(2)
    length_expr = node.input(3)
    if length_expr is not None:
        frame = int(ctx.require_const(length_expr, "frame_length").reshape(-1)[0])
    elif window is not None:
        frame = common.ttype(window).shape[0]
    else:
        frame = shape[1]
    if step < 1 or not 1 <= frame <= shape[1]:
        ctx.fail(node, f"frame_step {step} / frame_length {frame} do not fit length {shape[1]}")
    if window is not None and common.ttype(window).shape != (frame,):
        ctx.fail(node, f"window {common.ttype(window)} must hold frame_length = {frame} values")
    frames = 1 + (shape[1] - frame) // step
    index = np.arange(frames)[:, None] * step + np.arange(frame)[None, :]
    framed = call("take", x, Constant(index.astype(np.int64)), axis=1)  # (B, F, T, C)
    if window is not None:
        weights = call("reshape", window, newshape=(frame, 1))
        framed = call("multiply", framed, call("cast", weights, dtype=common.ttype(x).dtype))
    return dft_along(framed, 2, False, bool(node.attr("onesided", 1)), frame)


@onnx_op("MelWeightMatrix", since=17)
def mel_weight_matrix(ctx: ConvertContext, node: NodeView) -> Expr:
    """MelWeightMatrix: a constant (dft_length // 2 + 1, num_mel_bins) matrix of triangular
    filters; every input must be static."""
    names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")
    values = [ctx.require_const(node.input(i), name).reshape(-1)[0] for i, name in enumerate(names)]
    bins, length, rate = (int(v) for v in values[:3])
    matrix = mel_matrix(bins, length, rate, values[3], values[4])
    dtype = np_dtype(onnx_elem_dtype(int(node.attr("output_datatype", 1)), ctx.where(node)))
    return Constant(matrix.astype(dtype))


def mel_matrix(bins: int, length: int, rate: int, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """The triangular mel filters of the ONNX definition (edges in whole spectrogram bins)."""
    to_mel = 2595.0 / np.log(10.0)
    low_mel = to_mel * np.log1p(low / 700)
    high_mel = to_mel * np.log1p(high / 700)
    step = (high_mel - low_mel) / (bins + 2)
    hertz = 700 * np.expm1((np.arange(bins + 2) * step + low_mel) / to_mel)
    edges = (((length + 1) * hertz) // rate).astype(int)
    out = np.zeros((length // 2 + 1, bins))
    for i in range(bins):
        left, center, right = edges[i], edges[i + 1], edges[i + 2]
        if center == left:
            out[center, i] = 1.0
        else:
            for j in range(left, center + 1):
                out[j, i] = (j - left) / (center - left)
        for j in range(center, right):
            out[j, i] = (right - j) / (right - center)
    return out
