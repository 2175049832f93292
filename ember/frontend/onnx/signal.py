"""ONNX handlers for signal processing: DFT, by decomposition into matrix products.

A DFT of length L along one axis is two products with constant (L, K) cosine and sine
matrices, so it compiles to the existing matmul kernels: with ``a = sign * 2 pi t k / L``,
``Y_re = re @ cos(a) - im @ sin(a)`` and ``Y_im = re @ sin(a) + im @ cos(a)`` (scaled by
1/L when inverse), accumulated in float64. ``onesided`` keeps the first L//2+1
frequencies; an inverse onesided DFT rebuilds the real signal from its half spectrum
(Hermitian weights 1 or 2).
"""

from __future__ import annotations

import numpy as np

from ember.frontend.onnx import common
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import FLOAT_TYPES, onnx_op
from ember.ir.expr import Constant, Expr, call


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
    xt = common.ttype(x)
    shape, rank, dtype = xt.shape, xt.ndim, xt.dtype
    if rank < 2 or shape[-1] not in (1, 2):
        ctx.fail(node, f"input must end in a real (1) or complex (2) axis, got {shape}")
    axis = _axis(ctx, node, rank)
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    length_expr = node.input(1)
    length = None
    if length_expr is not None:
        length = int(ctx.require_const(length_expr, "dft_length").reshape(-1)[0])
    perm = [i for i in range(rank - 1) if i != axis] + [axis, rank - 1]
    moved = call("transpose", x, axes=perm) if perm != list(range(rank)) else x
    mshape = tuple(shape[i] for i in perm)
    n = mshape[-2]
    wide = "float64"  # accumulate in double: the sums cancel to near zero (inverse DFTs)
    re: Expr = call("cast", _component(moved, mshape, 0), dtype=wide)
    im: Expr | None = None
    if shape[-1] == 2:
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
    y = cols[0] if channels == 1 else call("concatenate", *cols, axis=len(lead) + 1)
    inverse_perm = [perm.index(i) for i in range(rank)]
    if inverse_perm != list(range(rank)):
        y = call("transpose", y, axes=inverse_perm)
    return y


def _combine(re: Expr, im: Expr | None, cos: Constant, sin: Constant, real: bool) -> Expr:
    """The real (re@cos - im@sin) or imaginary (re@sin + im@cos) part of the product."""
    first = call("nn.matmul", re, cos if real else sin)
    if im is None:
        return first
    second = call("nn.matmul", im, sin if real else cos)
    return call("subtract" if real else "add", first, second)
