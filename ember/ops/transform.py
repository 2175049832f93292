"""Layout and data-movement ops: reshape, transpose, concatenate, split, strided_slice,
broadcast_to, tile and nn.pad (constant, edge, reflect, wrap).

Contract: every compute is a pure index map from output to input positions (pattern
INJECTIVE, so each one inlines into its neighbours); the values are copied bit for bit.
Attributes arrive normalised by the graph-IR type rules (ember/ir/ops/transform.py):
explicit shapes, non-negative axes and clamped slice bounds. Index arithmetic uses floor
division of non-negative values, which C prints as plain ``/`` and ``%``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import tir
from ember.ir.op import Attrs
from ember.ir.ops.common import np_dtype
from ember.ir.types import Type
from ember.ops.common import broadcast_index, out_tensor_type, static_shape, unflatten
from ember.ops.elemwise import as_dtype
from ember.ops.registry import register_compute
from ember.tir import PrimExpr, te


def _load(t: te.Tensor, idx: Sequence[Any]) -> PrimExpr:
    return t[tuple(idx)] if idx else t[()]


def flat_index(idx: Sequence[Any], shape: Sequence[int], dtype: str = "int64") -> PrimExpr:
    """The row-major linear offset of ``idx`` in a tensor of ``shape``, as ``dtype``."""
    flat: PrimExpr = tir.const(0, dtype)
    for i, d in zip(idx, shape, strict=True):
        flat = flat * d + tir.convert(i).astype(dtype)
    return flat


def index_dtype(shape: Sequence[int]) -> str:
    """int32 when every linear offset into ``shape`` fits it, else int64."""
    return "int32" if math.prod(shape) < 2**31 else "int64"


@register_compute("reshape")
def reshape(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Same elements in row-major order, another shape."""
    x = inputs[0]
    in_shape = static_shape(x)
    out_shape = tuple(out_tensor_type(out_type).shape)
    if in_shape == out_shape:
        return te.compute(out_shape, lambda *i: _load(x, i), "reshape")
    head = _common_prefix(in_shape, out_shape)
    tail = _common_prefix(in_shape[head:][::-1], out_shape[head:][::-1])
    in_mid = in_shape[head : len(in_shape) - tail]
    out_mid = out_shape[head : len(out_shape) - tail]
    dtype = index_dtype(in_shape)

    def body(*i: Any) -> PrimExpr:
        mid = i[head : len(i) - tail]
        flat = flat_index(mid, out_mid, dtype)
        return _load(x, [*i[:head], *unflatten(flat, in_mid), *i[len(i) - tail :]])

    return te.compute(out_shape, body, "reshape")


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading dims ``a`` and ``b`` share, leaving at least one dim of each."""
    n = 0
    while n < min(len(a), len(b)) - 1 and a[n] == b[n]:
        n += 1
    return n


@register_compute("transpose")
def transpose(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Output axis k is input axis axes[k]."""
    x = inputs[0]
    axes = list(attrs["axes"])
    ty = out_tensor_type(out_type)

    def body(*i: Any) -> PrimExpr:
        src: list[Any] = [None] * len(axes)
        for k, a in enumerate(axes):
            src[a] = i[k]
        return _load(x, src)

    return te.compute(ty.shape, body, "transpose")


@register_compute("concatenate")
def concatenate(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Join the inputs along axis: a balanced tree of selects on the axis index (depth
    log2 of the input count, so hundreds of inputs stay shallow)."""
    axis = attrs["axis"]
    ty = out_tensor_type(out_type)
    parts = [(t, static_shape(t)[axis]) for t in inputs]
    parts = [(t, n) for t, n in parts if n > 0] or parts[:1]

    def body(*i: Any) -> PrimExpr:
        offsets = []
        start = 0
        for _, n in parts:
            offsets.append(start)
            start += n

        def pick(lo: int, hi: int) -> PrimExpr:  # parts[lo:hi] as a balanced tree of selects
            if hi - lo > 1:
                mid = (lo + hi) // 2
                return tir.if_then_else(i[axis] < offsets[mid], pick(lo, mid), pick(mid, hi))
            idx = list(i)
            idx[axis] = i[axis] - offsets[lo] if offsets[lo] else i[axis]
            return as_dtype(_load(parts[lo][0], idx), ty.dtype)  # bool constants are uint8

        return pick(0, len(parts))

    return te.compute(ty.shape, body, "concatenate")


@register_compute("split")
def split(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> list[te.Tensor]:
    """Consecutive parts of x along axis, one tensor per part."""
    x = inputs[0]
    axis = attrs["axis"]
    outs = []
    start = 0
    for k, size in enumerate(attrs["sizes"]):
        ty = out_tensor_type(out_type, k)
        outs.append(te.compute(ty.shape, _shifted(x, axis, start), f"split{k}"))
        start += size
    return outs


def _shifted(x: te.Tensor, axis: int, start: int) -> Any:
    def body(*i: Any) -> PrimExpr:
        idx = list(i)
        idx[axis] = i[axis] + start if start else i[axis]
        return _load(x, idx)

    return body


@register_compute("strided_slice")
def strided_slice(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """out[i] = x[begin + i * stride] on every axis (negative strides walk backwards)."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    begin, strides = attrs["begin"], attrs["strides"]

    def body(*i: Any) -> PrimExpr:
        idx = []
        for k, v in enumerate(i):
            b, s = begin[k], strides[k]
            e = v if s == 1 else v * s
            idx.append(e + b if b else e)
        return _load(x, idx)

    return te.compute(ty.shape, body, "strided_slice")


@register_compute("broadcast_to")
def broadcast_to(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Repeat size-1 (or missing leading) axes up to the output shape."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    return te.compute(ty.shape, lambda *i: _load(x, broadcast_index(x, i)), "broadcast_to")


@register_compute("tile")
def tile(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """out[i] = x[i % shape] on every axis."""
    x = inputs[0]
    shape = static_shape(x)
    ty = out_tensor_type(out_type)
    reps = attrs["reps"]

    def body(*i: Any) -> PrimExpr:
        idx = []
        for v, d, r in zip(i, shape, reps, strict=True):
            if d == 1:
                idx.append(tir.const(0, "int32"))
            else:
                idx.append(v if r == 1 else v % d)
        return _load(x, idx)

    return te.compute(ty.shape, body, "tile")


def _pad_index(v: PrimExpr, before: int, after: int, dim: int, mode: str) -> PrimExpr:
    """The source index of output index ``v`` on one padded axis (edge/reflect/wrap)."""
    pos = v - before if before else v
    zero = tir.const(0, "int32")
    if mode == "edge":
        return tir.max(tir.min(pos, dim - 1), 0)
    if mode == "wrap":
        if before <= dim and after <= dim:  # one wrap at most: no modulo
            low = tir.if_then_else(pos < zero, pos + dim, pos) if before else pos
            return tir.if_then_else(pos >= dim, pos - dim, low) if after else low
        return pos % dim
    # reflect without repeating the edge; the type rule keeps both pads below dim
    if dim == 1:
        return zero
    low = tir.if_then_else(pos < zero, zero - pos, pos) if before else pos
    return tir.if_then_else(pos >= dim, 2 * (dim - 1) - pos, low) if after else low


@register_compute("nn.pad")
def pad(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Pad every axis with a constant, the edge value, a reflection or a wrap-around."""
    x = inputs[0]
    shape = static_shape(x)
    n = len(shape)
    width = attrs["pad_width"]
    before, after = width[:n], width[n:]
    mode = attrs["pad_mode"]
    ty = out_tensor_type(out_type)
    value = tir.const(_pad_value(attrs["pad_value"], x.dtype), x.dtype)

    def body(*i: Any) -> PrimExpr:
        conds = []
        idx: list[PrimExpr] = []
        for k, v in enumerate(i):
            b, a, d = before[k], after[k], shape[k]
            if not b and not a:
                idx.append(v)
            elif mode == "constant":
                pos = v - b if b else v
                if b:
                    conds.append(pos >= 0)
                if a:
                    conds.append(pos < d)
                idx.append(pos)
            else:
                idx.append(_pad_index(v, b, a, d, mode))
        if not conds:
            return _load(x, idx)
        return tir.if_then_else(tir.logical_and(*conds), _load(x, idx), value)

    return te.compute(ty.shape, body, "pad")


def _pad_value(value: float, dtype: str) -> float | int | bool:
    """The pad value as the reference casts it to the data dtype."""
    with np.errstate(all="ignore"):
        out = np.asarray(value).astype(np_dtype(dtype))
    return out.item() if dtype != "bfloat16" else float(out)
