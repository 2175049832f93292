"""The whole-layer int8 kernels of fuse_qdq: a matched QDQ chain as one ``quantized_*_int8``
call (8-bit in, 8-bit out), with the weight packed and the zero-point corrections folded
into the bias at build time.

Taken when the weight suits ``vpmaddubsw`` (no int16 saturation of its pair sums with
unsigned data: ``ember.ir.ops.quant.fits_maddubs``, true for the 7-bit weights onnxruntime's
quantizer writes with ``reduce_range``), the data and output are int8/uint8, and the layer is
a 2-D convolution (ungrouped or depthwise), a dense (Gemm) or a matmul by a 2-D weight;
otherwise fuse_qdq keeps its int32 path, which is exact for any weight. Int8 data is made
unsigned (``x + 128``, the zero point moved with it), so::

    sum_k (x_k - zx) * w_k = sum_k xu_k * w_k - zxu * sum_k w_k

and ``bias - zxu * sum_k w_k`` is a constant per output channel.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ember.ir.expr import Call, Constant, Expr, call
from ember.ir.ops.quant_int8_ref import FIX_SLOT, PANEL

#: the largest sum of one sign's weights in a pair group: 255 * 128 fits int16.
PAIR_GROUP_LIMIT = 32767 // 255
#: the largest column a fix slot holds (uint16).
MAX_FIX_COLUMN = 0xFFFF

_I32 = np.iinfo(np.int32)


#: rows of the conv weight handled per register tile.
ROW_BLOCK = 4


def _up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def fits_maddubs(w: np.ndarray) -> bool:
    """Whether int8 weight ``w`` ((rows, K), K paired as (0, 1), (2, 3), ...) never saturates
    the int16 pair sums of ``vpmaddubsw`` with unsigned 8-bit data."""
    wi = np.asarray(w, np.int64)
    if wi.min(initial=0) < -128 or wi.max(initial=0) > 127:
        return False
    k = wi.shape[-1]
    a = np.abs(np.pad(wi, [(0, 0)] * (wi.ndim - 1) + [(0, k % 2)]))
    return bool(np.all(255 * (a[..., 0::2] + a[..., 1::2]) <= 32767))


def split_pair_groups(rows: np.ndarray) -> list[list[tuple[int, int]]]:
    """Move weights out of ``rows`` (int64, (M, K) with K a multiple of 4; changed in place)
    until every pair group fits int16, and return each row's moved ``(column, value)``.

    The conv tile adds the ``vpmaddubsw`` results of two consecutive 4-column steps in int16
    before widening them, so each int16 lane sums the products of a group of 4 weights
    (columns ``8s + 2t + (0, 1, 4, 5)``, t = 0, 1) with unsigned bytes: exact while the
    group's positive weights and its negative ones each sum to at most ``PAIR_GROUP_LIMIT``
    in magnitude. Groups over it give up their largest weights of that sign, which the tile
    adds back one by one after its loop (a few per row at most with He-normal weights:
    about one row in five has one)."""
    m, k = rows.shape
    steps = k // 8
    g = rows[:, : 8 * steps].reshape(m, steps, 2, 2, 2).transpose(0, 1, 3, 2, 4)
    g = g.reshape(m, steps, 2, 4)
    over = (np.clip(g, 0, None).sum(-1) > PAIR_GROUP_LIMIT) | (
        np.clip(-g, 0, None).sum(-1) > PAIR_GROUP_LIMIT
    )
    fixes: list[list[tuple[int, int]]] = [[] for _ in range(m)]
    for r, s, t in zip(*np.nonzero(over), strict=True):
        cols = [8 * int(s) + 2 * int(t) + d for d in (0, 1, 4, 5)]
        for sign in (1, -1):
            while sum(max(sign * int(rows[r, c]), 0) for c in cols) > PAIR_GROUP_LIMIT:
                c = max(cols, key=lambda c: sign * int(rows[r, c]))
                fixes[r].append((c, int(rows[r, c])))
                rows[r, c] = 0
    return fixes


def fix_slot(column: int, value: int) -> np.ndarray:
    """The 4 bytes of one fix slot: the int8 value, 0, the column as little-endian uint16."""
    return np.array([value & 0xFF, 0, column & 0xFF, column >> 8], np.uint8)


def pack_conv_rows(w: np.ndarray) -> np.ndarray | None:
    """(M, C, *k) weight -> int8 rows (M up to a multiple of 4) of K values (up to a multiple
    of 4) whose pair groups fit int16 (``split_pair_groups``), then the moved weights as
    4-byte fix slots (``FIX_SLOT``), as many per row as the row that needs most."""
    m = w.shape[0]
    flat = np.asarray(w, np.int64).reshape(m, -1)
    k = _up(flat.shape[1], 4)
    if k > MAX_FIX_COLUMN + 1:
        return None
    rows = np.zeros((_up(m, ROW_BLOCK), k), np.int64)
    rows[:m, : flat.shape[1]] = flat
    fixes = split_pair_groups(rows)
    slots = max((len(f) for f in fixes), default=0)
    out = np.zeros((rows.shape[0], k + FIX_SLOT * slots), np.uint8)
    out[:, :k] = rows.astype(np.int8).view(np.uint8)
    for r, row_fixes in enumerate(fixes):
        for j, (kk, v) in enumerate(row_fixes):
            out[r, k + FIX_SLOT * j : k + FIX_SLOT * (j + 1)] = fix_slot(kk, v)
    return out.view(np.int8)


def pack_dense_panels(w_kn: np.ndarray) -> np.ndarray:
    """(K, N) weight -> int8 panels (N/16, K/4, 16, 4): 4 consecutive K values per lane."""
    k, n = w_kn.shape
    full = np.zeros((_up(k, 4), _up(n, PANEL)), np.int8)
    full[:k, :n] = w_kn
    return np.ascontiguousarray(
        full.reshape(_up(k, 4) // 4, 4, _up(n, PANEL) // PANEL, PANEL).transpose(2, 0, 3, 1)
    )


def pack_dw_taps(w: np.ndarray) -> np.ndarray:
    """(C, 1, *k) weight -> int16 (C, taps up to an even count)."""
    c = w.shape[0]
    flat = np.asarray(w, np.int64).reshape(c, -1)
    out = np.zeros((c, _up(flat.shape[1], 2)), np.int16)
    out[:, : flat.shape[1]] = flat
    return out


def _per_channel(values: np.ndarray | None, n: int, dtype: type) -> np.ndarray | None:
    """``values`` (one, or one per output channel) as a flat array of ``n``, else None."""
    flat = np.zeros(1, dtype) if values is None else np.asarray(values).reshape(-1)
    if flat.size not in (1, n):
        return None
    return np.broadcast_to(flat, (n,)).astype(dtype)


def _folded_bias(bias: np.ndarray, zxu: int, sums: np.ndarray, pad: int) -> np.ndarray | None:
    """int32 ``bias - zxu * sums``, zero-padded to ``pad`` entries; None if it overflows."""
    out = np.asarray(bias, np.int64) - zxu * np.asarray(sums, np.int64)
    if out.size and (out.min() < _I32.min or out.max() > _I32.max):
        return None
    return np.pad(out, (0, pad - out.size)).astype(np.int32)


def int8_layer(
    linear: Call,
    xq: Expr,
    zx: int,
    wi: np.ndarray,
    bias: np.ndarray | None,
    mult: np.ndarray,
    relu: bool,
    zy: int,
    dtype: str,
) -> Expr | None:
    """The int8 kernel call of ``linear`` on quantized data ``xq`` (zero point ``zx``) and
    integer weight ``wi`` (its zero point subtracted), or None when none applies."""
    x_dtype = xq.tensor_type.dtype
    if x_dtype not in ("int8", "uint8") or dtype not in ("int8", "uint8"):
        return None
    flip = x_dtype == "int8"
    common: dict[str, Any] = {"relu": relu, "y_zero_point": zy, "dtype": dtype}
    common["name"] = linear.name
    op = linear.op.name  # type: ignore[union-attr]
    if op == "nn.conv":
        return _conv(linear.attrs, xq, zx, flip, wi, bias, mult, common)
    if op == "nn.dense" and wi.ndim == 2:
        w_kn = wi.T
    elif op == "nn.matmul" and wi.ndim == 2 and xq.tensor_type.ndim >= 1:
        w_kn = wi
    else:
        return None
    k, n = w_kn.shape
    if not fits_maddubs(w_kn.T):
        return None
    b, m = _per_channel(bias, n, np.int64), _per_channel(mult, n, np.float32)
    zxu = zx + 128 if flip else zx
    pad = (n + 15) // 16 * 16
    folded = None if b is None else _folded_bias(b, zxu, w_kn.sum(axis=0, dtype=np.int64), pad)
    if folded is None or m is None:
        return None
    w = Constant(pack_dense_panels(w_kn))
    mp = Constant(np.pad(m, (0, pad - n)).astype(np.float32))
    return call(
        "quantized_dense_int8", xq, w, Constant(folded), mp, units=n, flip=flip,
        x_zero_point=zxu, **common,
    )  # fmt: skip


def _conv(
    conv: Mapping[str, Any],
    xq: Expr,
    zx: int,
    flip: bool,
    wi: np.ndarray,
    bias: np.ndarray | None,
    mult: np.ndarray,
    common: dict[str, Any],
) -> Expr | None:
    if wi.ndim == 3 and xq.tensor_type.ndim == 3:  # 1-D (wav2vec2): height 1
        n, c, length = (int(d) for d in xq.tensor_type.shape)
        x2 = call("reshape", xq, newshape=(n, c, 1, length))
        out = _conv(_height_one(conv), x2, zx, flip, wi[:, :, None], bias, mult, common)
        if out is None:
            return None
        shape = out.tensor_type.shape
        return call("reshape", out, newshape=(shape[0], shape[1], shape[3]))
    if wi.ndim != 4 or xq.tensor_type.ndim != 4:
        return None
    groups, channels = int(conv["groups"]), int(wi.shape[0])
    b, m = _per_channel(bias, channels, np.int64), _per_channel(mult, channels, np.float32)
    if b is None or m is None:
        return None
    attrs = {k: conv[k] for k in ("strides", "padding", "dilation")}
    attrs.update(kernel=tuple(int(d) for d in wi.shape[2:]), channels=channels, **common)
    if groups == 1:
        rows = pack_conv_rows(wi) if fits_maddubs(wi.reshape(channels, -1)) else None
        if rows is None:
            return None
        zxu = zx + 128 if flip else zx
        sums = wi.reshape(channels, -1).sum(axis=1, dtype=np.int64)
        folded = _folded_bias(b, zxu, sums, channels)
        if folded is None:
            return None
        return call(
            "quantized_conv_int8", xq, Constant(rows), Constant(folded), Constant(m),
            flip=flip, x_zero_point=zxu, **attrs,
        )  # fmt: skip
    depthwise = groups == channels == xq.tensor_type.shape[1] and wi.shape[1] == 1
    if not depthwise and wi.shape[1] >= GROUP_MIN_CHANNELS:
        return _grouped(conv, xq, zx, flip, wi, b, m, common)
    if not depthwise or np.abs(wi).max(initial=0) > 32767:
        return None
    folded = _folded_bias(b, 0, np.zeros(channels, np.int64), channels)
    if folded is None:
        return None
    return call(
        "quantized_dwconv_int8", xq, Constant(pack_dw_taps(wi)), Constant(folded),
        Constant(m), x_zero_point=zx, **attrs,
    )  # fmt: skip


#: input channels a group needs to run as an int8 kernel of its own (ShuffleNet's 1x1
#: layers of 4 groups have 34-136; narrower groups keep the int32 path).
GROUP_MIN_CHANNELS = 16


def _grouped(
    conv: Mapping[str, Any],
    xq: Expr,
    zx: int,
    flip: bool,
    wi: np.ndarray,
    bias: np.ndarray,
    mult: np.ndarray,
    common: dict[str, Any],
) -> Expr | None:
    """A grouped convolution as one ungrouped int8 kernel a group, on its slice of the
    channels, the outputs concatenated (each output channel requantizes on its own)."""
    groups = int(conv["groups"])
    per_out = wi.shape[0] // groups
    outs = []
    for g, part in enumerate(channel_groups(xq, groups)):
        rows = slice(g * per_out, (g + 1) * per_out)
        name = f"{common['name']}_g{g}"
        out = _conv(dict(conv) | {"groups": 1}, part, zx, flip, wi[rows], bias[rows], mult[rows],
                    common | {"name": name})  # fmt: skip
        if out is None:
            return None
        outs.append(out)
    return call("concatenate", *outs, axis=1)


def channel_groups(x: Expr, groups: int) -> list[Expr]:
    """NCHW ``x``'s channels in ``groups`` equal slices (a grouped convolution's inputs)."""
    n, c, h, w = (int(d) for d in x.tensor_type.shape)
    per = c // groups
    return [
        call(
            "strided_slice",
            x,
            begin=[0, g * per, 0, 0],
            end=[n, (g + 1) * per, h, w],
            strides=[1, 1, 1, 1],
        )  # fmt: skip
        for g in range(groups)
    ]


def _height_one(conv: Mapping[str, Any]) -> dict[str, Any]:
    """A 1-D convolution's attributes as a 2-D one's on a height of 1."""
    (stride,), (dil,) = conv["strides"] or (1,), conv["dilation"] or (1,)
    pads = tuple(conv["padding"]) or (0, 0)
    return {"strides": (1, stride), "dilation": (1, dil), "padding": (0, pads[0], 0, pads[1]),
            "groups": conv["groups"]}  # fmt: skip


def int8_pool(pool: Expr, xq: Expr) -> bool:
    """Whether max pool ``pool`` of quantized data ``xq`` runs as ``quantized_max_pool_int8``
    (8-bit, 2-D NCHW, floor mode)."""
    x = xq.tensor_type
    floor = isinstance(pool, Call) and not pool.attrs["ceil_mode"]
    return floor and x.ndim == 4 and x.dtype in ("int8", "uint8")
