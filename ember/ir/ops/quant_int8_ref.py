"""numpy references of the whole int8 layers of ember.ir.ops.quant (bit for bit what the
kernels compute) and the layouts of their packed weights: the dense weight's panels of PANEL
columns and the conv weight's rows with their fix slots (conv_weight_rows)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.ir.op import Attrs
from ember.ir.ops.common import np_dtype, padding, quant_range, spatial
from ember.ir.ops.nn_conv_weights import conv_reference
from ember.ir.types import canonical_dtype

#: output columns per panel of the packed dense weight.
PANEL = 16


def unpack_dense_panels(panels: np.ndarray, k: int, n: int) -> np.ndarray:
    """The (K, N) weight of :func:`pack_dense_panels`."""
    np_, k4, _, _ = panels.shape
    return panels.transpose(1, 3, 0, 2).reshape(k4 * 4, np_ * PANEL)[:k, :n]


def matmul_integer_int8_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """(x + flip - (zero point + flip)) @ W in int32 (MatMulInteger of a 2-D weight)."""
    x, zp, w = xs[:3]
    n, k = int(attrs["units"]), x.shape[-1]
    acc = (_unsigned(x, attrs) - _unsigned(zp, attrs).reshape(())) @ unpack_dense_panels(
        np.asarray(w, np.int64), k, n
    )
    return acc.astype(np.int32)


#: bytes per fix slot after the K columns of packed int8 conv rows: an int8 value, 0, its
#: column (little-endian uint16); the kernel adds it back (ember/transform/qdq_int8.py).
FIX_SLOT = 4


def conv_weight_rows(w: np.ndarray, m: int, k: int) -> np.ndarray:
    """The (m, k) int64 weight of packed int8 conv rows, their fix slots added back."""
    b = np.asarray(w).view(np.uint8)[:m]
    k4 = (k + 3) // 4 * 4
    out = b[:, :k4].view(np.int8).astype(np.int64)
    for r, j in zip(*np.nonzero(b[:, k4::FIX_SLOT]), strict=True):
        v, _, lo, hi = (int(t) for t in b[r, k4 + FIX_SLOT * j : k4 + FIX_SLOT * (j + 1)])
        out[r, lo | hi << 8] += v - 256 * (v >= 128)
    return out[:, :k]


def conv_integer_int8_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """int32 conv(x - zero point (padded with it), w) (ConvInteger, ungrouped)."""
    x, zp, w = xs[:3]
    c, (kh, kw), m = x.shape[1], spatial(attrs, "kernel", 2, 1), int(attrs["channels"])
    wi = conv_weight_rows(w, m, c * kh * kw).reshape(m, c, kh, kw)
    shifted = _unsigned(x, attrs) - _unsigned(zp, attrs).reshape(())
    strides, dilation = spatial(attrs, "strides", 2, 1), spatial(attrs, "dilation", 2, 1)
    return conv_reference(shifted, wi, strides, padding(attrs, 2), dilation, 1).astype(np.int32)


def _requantize(acc: np.ndarray, mult: np.ndarray, attrs: Attrs) -> np.ndarray:
    dtype = canonical_dtype(attrs["dtype"])
    lo, hi = quant_range(dtype)
    v = acc.astype(np.float32) * mult.astype(np.float32)
    if attrs["relu"]:
        v = np.maximum(v, np.float32(0))
    v = np.clip(np.rint(v) + np.float32(attrs["y_zero_point"]), lo, hi)
    return v.astype(np_dtype(dtype))


def _unsigned(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    return np.asarray(x, np.int64) + (128 if attrs["flip"] else 0)


def conv_int8_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """conv(x + flip padded with the zero point, w) + bias, requantized."""
    x, w, bias, mult = xs
    c, (kh, kw), m = x.shape[1], spatial(attrs, "kernel", 2, 1), int(attrs["channels"])
    wi = conv_weight_rows(w, m, c * kh * kw)
    zx = int(attrs["x_zero_point"])
    shifted = _unsigned(x, attrs) - zx
    acc = conv_reference(
        shifted,
        wi.reshape(m, c, kh, kw),
        spatial(attrs, "strides", 2, 1),
        padding(attrs, 2),
        spatial(attrs, "dilation", 2, 1),
        1,
    )
    acc = acc + (zx * wi.sum(axis=1) + np.asarray(bias[:m], np.int64)).reshape(m, 1, 1)
    return _requantize(acc, np.asarray(mult[:m]).reshape(m, 1, 1), attrs)


def dwconv_int8_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """depthwise conv(x - zero point, w) + bias, requantized."""
    x, w, bias, mult = xs
    c, (kh, kw) = x.shape[1], spatial(attrs, "kernel", 2, 1)
    wi = np.asarray(w, np.int64)[:, : kh * kw].reshape(c, 1, kh, kw)
    shifted = np.asarray(x, np.int64) - int(attrs["x_zero_point"])
    acc = conv_reference(
        shifted,
        wi,
        spatial(attrs, "strides", 2, 1),
        padding(attrs, 2),
        spatial(attrs, "dilation", 2, 1),
        c,
    )
    acc = acc + np.asarray(bias[:c], np.int64).reshape(c, 1, 1)
    return _requantize(acc, np.asarray(mult[:c]).reshape(c, 1, 1), attrs)


def dense_int8_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """(x + flip) @ W + bias, requantized (the zero point is folded into the bias)."""
    x, w, bias, mult = xs
    n, k = int(attrs["units"]), x.shape[-1]
    acc = _unsigned(x, attrs) @ unpack_dense_panels(np.asarray(w, np.int64), k, n)
    return _requantize(acc + np.asarray(bias[:n], np.int64), np.asarray(mult[:n]), attrs)
