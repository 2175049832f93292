"""Running and selection ops along one axis: cumsum, cumprod and topk.

Contract: each compute matches the numpy reference (ember/ir/ops/scan.py, reduce.py).
The loop IR has no sequential scan or sort, so these are written as reductions:

* ``cumsum`` sums the masked prefix (O(n^2) per line) on short axes; on long ones it sums
  blocks, their exclusive prefix and the part of each block (O(n * SCAN_BLOCK));
* ``cumprod`` multiplies the masked prefix in staged chunks (O(n^2), short axes);
* ``topk`` with a small k on a long axis runs k selection rounds (each the first element,
  in sort order, after the previous pick: two passes over the axis); otherwise it ranks
  every element (how many sort before it) and gathers each rank (O(n^2)). Sort order is
  numpy's: ties by index, NaN largest.

An imperative kernel (a heap for topk, a sequential scan) would beat these on long axes.
"""

from __future__ import annotations

import math
from typing import Any

from ember import tir
from ember.ir.op import Attrs
from ember.ir.types import Type
from ember.ops.common import out_tensor_type, static_shape
from ember.ops.elemwise import compute_dtype, is_nan
from ember.ops.reduce import schedule_reduce, staged_product
from ember.ops.registry import register_compute, register_schedule
from ember.tir import PrimExpr, te
from ember.tir import dtype as dt


def _in_prefix(j: PrimExpr, i: PrimExpr, attrs: Attrs) -> PrimExpr:
    """True when position j contributes to the running value at position i."""
    if attrs["reverse"]:
        return j > i if attrs["exclusive"] else j >= i
    return j < i if attrs["exclusive"] else j <= i


def _at(idx: tuple[Any, ...], axis: int, value: Any) -> tuple[Any, ...]:
    out = list(idx)
    out[axis] = value
    return tuple(out)


#: cumsum along an axis longer than this sums in blocks of SCAN_BLOCK (O(n * block)).
SCAN_DIRECT_MAX = 256
SCAN_BLOCK = 64


@register_compute("cumsum")
def cumsum(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Running sum along axis (exclusive / reverse as asked)."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    axis = attrs["axis"]
    n = static_shape(x)[axis]
    dtype, work = ty.dtype, compute_dtype(ty.dtype)
    if n > SCAN_DIRECT_MAX:
        acc = _blocked_cumsum(x, axis, attrs, work)
    else:

        def body(*i: Any) -> PrimExpr:
            rv = te.reduce_axis(n, "j")
            val = x[_at(i, axis, rv.var)].astype(work)
            term = tir.if_then_else(_in_prefix(rv.var, i[axis], attrs), val, tir.const(0, work))
            return te.sum(term, axis=rv)

        acc = te.compute(ty.shape, body, "cumsum")
    if work == dtype:
        return acc
    return te.compute(ty.shape, lambda *i: acc[i].astype(dtype), "cumsum_cast")


def _blocked_cumsum(x: te.Tensor, axis: int, attrs: Attrs, work: str) -> te.Tensor:
    """cumsum as block totals, their exclusive prefix, and a sum within each block.

    Positions are counted in scan order ("forward"): a reversed scan reads x backwards.
    """
    shape = static_shape(x)
    n, blk = shape[axis], SCAN_BLOCK
    nb = -(-n // blk)
    bshape = tuple(nb if d == axis else s for d, s in enumerate(shape))
    zero = tir.const(0, work)

    def src(q: PrimExpr) -> PrimExpr:
        """The x index of forward position q (q < n)."""
        return n - 1 - q if attrs["reverse"] else q

    def totals(*i: Any) -> PrimExpr:
        t = te.reduce_axis(blk, "t")
        q = i[axis] * blk + t.var
        val = x[_at(i, axis, src(tir.min(q, n - 1)))].astype(work)
        return te.sum(tir.if_then_else(q < n, val, zero), axis=t)

    block_sum = te.compute(bshape, totals, "cumsum_blocks")

    def before(*i: Any) -> PrimExpr:
        c = te.reduce_axis(nb, "c")
        val = block_sum[_at(i, axis, c.var)]
        return te.sum(tir.if_then_else(c.var < i[axis], val, zero), axis=c)

    offset = te.compute(bshape, before, "cumsum_offsets")

    def within(*i: Any) -> PrimExpr:
        t = te.reduce_axis(blk, "t")
        pos = src(i[axis])  # forward position of this output
        q = pos // blk * blk + t.var
        take = q < pos if attrs["exclusive"] else q <= pos
        val = x[_at(i, axis, src(tir.min(q, n - 1)))].astype(work)
        return te.sum(tir.if_then_else(take, val, zero), axis=t)

    part = te.compute(shape, within, "cumsum_part")
    return te.compute(
        shape, lambda *i: offset[_at(i, axis, src(i[axis]) // blk)] + part[i], "cumsum"
    )


@register_compute("cumprod")
def cumprod(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Running product along axis (exclusive / reverse as asked)."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    axis = attrs["axis"]
    n = static_shape(x)[axis]
    dtype, work = ty.dtype, compute_dtype(ty.dtype)
    one = tir.const(1, work)

    def term(i: tuple[Any, ...], j: PrimExpr) -> PrimExpr:
        val = x[_at(i, axis, j)].astype(work)
        return tir.if_then_else(_in_prefix(j, i[axis], attrs), val, one)

    out = staged_product(static_shape(x), n, term, work, "cumprod")
    if work == dtype:
        return out
    return te.compute(ty.shape, lambda *i: out[i].astype(dtype), "cumprod_cast")


def _before(a: PrimExpr, b: PrimExpr, ja: PrimExpr, jb: PrimExpr, largest: bool) -> PrimExpr:
    """True when element a (at ja) sorts before element b (at jb)."""
    if dt.is_float(a.dtype):
        na, nb = is_nan(a), is_nan(b)
        if largest:
            strict = tir.logical_or(a > b, tir.logical_and(na, tir.logical_not(nb)))
        else:
            strict = tir.logical_or(a < b, tir.logical_and(nb, tir.logical_not(na)))
        same = tir.logical_or(tir.eq(a, b), tir.logical_and(na, nb))
    else:
        strict = a > b if largest else a < b
        same = tir.eq(a, b)
    return tir.logical_or(strict, tir.logical_and(same, ja < jb))


#: topk uses k selection rounds (2 reductions of the axis each) up to this k, when that is
#: less work than ranking every element against every other.
MAX_ROUNDS_K = 16


@register_compute("topk")
def topk(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> list[te.Tensor]:
    """(values, int64 indices) of the k largest/smallest along axis, ties by index."""
    x = inputs[0]
    axis, k = attrs["axis"], attrs["k"]
    n = static_shape(x)[axis]
    largest = bool(attrs["largest"])
    vty, ity = out_tensor_type(out_type, 0), out_tensor_type(out_type, 1)
    if 0 < k <= MAX_ROUNDS_K and 3 * k < n:
        indices = _topk_rounds(x, axis, k, largest, ity.shape)
    else:
        indices = _topk_ranks(x, axis, largest, ity.shape)

    def value_body(*i: Any) -> PrimExpr:
        return x[_at(i, axis, indices[i].astype("int32"))]

    values = te.compute(vty.shape, value_body, "topk_values")
    return [values, indices]


def _topk_ranks(x: te.Tensor, axis: int, largest: bool, out_shape: Any) -> te.Tensor:
    """Indices by rank: element i has rank #{j sorting before i}; O(n^2) per line."""
    shape = static_shape(x)
    n = shape[axis]
    work = compute_dtype(x.dtype)

    def rank_body(*i: Any) -> PrimExpr:
        rv = te.reduce_axis(n, "j")
        mine = x[i].astype(work)
        other = x[_at(i, axis, rv.var)].astype(work)
        earlier = _before(other, mine, rv.var, i[axis], largest)
        return te.sum(tir.if_then_else(earlier, tir.const(1, "int32"), tir.const(0, "int32")), rv)

    rank = te.compute(shape, rank_body, "topk_rank")

    def index_body(*i: Any) -> PrimExpr:
        rv = te.reduce_axis(n, "j")
        hit = tir.eq(rank[_at(i, axis, rv.var)], i[axis])
        return te.sum(tir.if_then_else(hit, rv.var.astype("int64"), tir.const(0, "int64")), rv)

    return te.compute(out_shape, index_body, "topk_indices")


def _topk_rounds(x: te.Tensor, axis: int, k: int, largest: bool, out_shape: Any) -> te.Tensor:
    """Indices by k selection rounds: round p picks the first element, in sort order, that
    sorts after round p-1's pick; 2 reductions of the axis per round."""
    shape = static_shape(x)
    n = shape[axis]
    work = compute_dtype(x.dtype)
    floats = dt.is_float(work)
    line = tuple(1 if d == axis else s for d, s in enumerate(shape))
    big = tir.const(n, "int64")
    far = tir.const(-math.inf if largest else math.inf, work) if floats else _limit(work, largest)
    picks: list[te.Tensor] = []

    def value(i: tuple[Any, ...], j: Any) -> PrimExpr:
        return x[_at(i, axis, j)].astype(work)

    prev_values: list[te.Tensor] = []
    for p in range(k):
        prev = picks[-1] if picks else None
        prev_value = prev_values[-1] if prev_values else None

        def allowed(
            i: tuple[Any, ...],
            j: Any,
            prev: te.Tensor | None = prev,
            prev_value: te.Tensor | None = prev_value,
        ) -> PrimExpr:
            if prev is None or prev_value is None:
                return tir.const(True, "bool")
            return _before(prev_value[i], value(i, j), prev[i], j.astype("int64"), largest)

        def ok(i: tuple[Any, ...], j: Any) -> PrimExpr:
            a = allowed(i, j)
            return tir.logical_and(a, tir.logical_not(is_nan(value(i, j)))) if floats else a

        def best_body(*i: Any) -> PrimExpr:
            rv = te.reduce_axis(n, "j")
            v = tir.if_then_else(ok(i, rv.var), value(i, rv.var), far)
            return te.max(v, rv, init=far) if largest else te.min(v, rv, init=far)

        best = te.compute(line, best_body, f"topk_best{p}")

        def first_body(*i: Any, best: te.Tensor = best) -> PrimExpr:
            # the first allowed index holding ``best``; with floats the first allowed NaN
            # too, encoded below 0 when it wins (NaN sorts largest: first for largest,
            # last for smallest), so one pass finds the pick
            rv = te.reduce_axis(n, "j")
            j = rv.var.astype("int64")
            hit = tir.logical_and(ok(i, rv.var), tir.eq(value(i, rv.var), best[i]))
            if not floats:
                return te.min(tir.if_then_else(hit, j, big), rv, init=big)
            nan = tir.logical_and(allowed(i, rv.var), is_nan(value(i, rv.var)))
            win, other = (nan, hit) if largest else (hit, nan)
            code = tir.if_then_else(win, j - big, tir.if_then_else(other, j, big))
            return te.min(code, rv, init=big)

        first = te.compute(line, first_body, f"topk_first{p}")
        if floats:
            pick = _materialize(line, lambda *i, f=first: _unwrap(f[i], big), f"topk_pick{p}")
        else:
            pick = first
        picks.append(pick)
        prev_values.append(
            _materialize(line, lambda *i, q=pick: value(i, q[i].astype("int32")), f"topk_v{p}")
        )

    def gather(*i: Any) -> PrimExpr:
        row = _at(i, axis, 0)
        out = picks[-1][row]
        for p in range(k - 2, -1, -1):
            out = tir.if_then_else(i[axis] <= p, picks[p][row], out)
        return out

    return te.compute(out_shape, gather, "topk_indices")


def _unwrap(code: PrimExpr, n: PrimExpr) -> PrimExpr:
    """An index found by the encoded pass: codes below 0 stand for ``code + n``."""
    return tir.if_then_else(code < tir.const(0, "int64"), code + n, code)


def _materialize(shape: Any, fn: Any, name: str) -> te.Tensor:
    """A stage computing ``fn`` that the group lowering keeps in memory instead of inlining
    (a one-step sum), so later rounds read one value instead of recomputing it."""
    return te.compute(shape, lambda *i: te.sum(fn(*i), axis=te.reduce_axis(1, "one")), name)


def _limit(dtype: str, lowest: bool) -> PrimExpr:
    """The smallest (``lowest``) or largest value of the integer ``dtype``."""
    bits = dt.bits_of(dtype)
    if dt.is_int(dtype):
        return tir.const(-(1 << (bits - 1)) if lowest else (1 << (bits - 1)) - 1, dtype)
    return tir.const(0 if lowest else (1 << bits) - 1, dtype)


for _name in ("cumsum", "cumprod", "topk"):
    register_schedule(_name)(schedule_reduce)
