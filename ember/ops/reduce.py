"""Reductions: sum, mean, max, min, prod over axes; argmax/argmin along one axis.

Contract: each compute matches the numpy reference of ember/ir/ops/reduce.py. 16-bit
floats accumulate in float32; integer sums and products wrap in the input dtype; integer
means truncate toward zero; an empty reduction gives the identity (0, 1, -inf/+inf or the
integer limits), an empty mean NaN (0 for integers). Float max/min propagate NaN like
numpy (a second, cheap reduction counts the NaNs). argmax/argmin return the first index
of the extreme value (the last with ``select_last_index``), or of the first (last) NaN;
over a last axis of ARG_LANES or more, in one vectorised pass per row (:func:`_arg_rows`).

The loop IR reduces with sum/max/min only, so ``prod`` multiplies ``CHUNK`` elements per
step in an unrolled expression, each step materialised as its own stage (see
:func:`staged_product`). Float sums over a long last axis keep SUM_LANES interleaved
partial sums (TVM's rfactor) so the C compiler vectorises them.

Schedule (:func:`schedule_reduce`, also used by scan and scatter ops): every output and
materialised reduction runs at root, data loops fused and parallel when there is enough
work, reduce loops innermost when the input's last axis is reduced (contiguous reads),
else outside a vectorised last data loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ember import tir
from ember.ir.op import Attrs
from ember.ir.types import Type
from ember.ops.common import out_tensor_type, static_shape, unflatten
from ember.ops.elemwise import as_dtype, compute_dtype, is_nan
from ember.ops.nn_schedule import (
    MATERIALIZE,
    MIN_PARALLEL_WORK,
    MIN_VECTOR_EXTENT,
    reduction_stages,
)
from ember.ops.registry import ScheduleContext, register_compute, register_schedule
from ember.tir import PrimExpr, te
from ember.tir import dtype as dt

#: elements multiplied per materialised step of a product.
CHUNK = 16

Term = Callable[[tuple[Any, ...], PrimExpr], PrimExpr]


def input_index(
    out_idx: Sequence[Any], red: Sequence[Any], ndim: int, axes: Sequence[int], keepdims: bool
) -> list[Any]:
    """The input index of output index ``out_idx`` and reduced-axis indices ``red``."""
    idx: list[Any] = []
    o = 0
    r = 0
    for d in range(ndim):
        if d in axes:
            idx.append(red[r])
            r += 1
            if keepdims:
                o += 1
        else:
            idx.append(out_idx[o])
            o += 1
    return idx


def _load(t: te.Tensor, idx: Sequence[Any]) -> PrimExpr:
    return t[tuple(idx)] if idx else t[()]


def _reduce(
    x: te.Tensor,
    attrs: Attrs | dict[str, Any],
    out_shape: Sequence[Any],
    combiner: str,
    source: Callable[[PrimExpr], PrimExpr],
    name: str,
    init: PrimExpr | None = None,
    lanes: bool = False,
) -> te.Tensor:
    """``combiner`` of ``source(x[...])`` over attrs' axes, shaped ``out_shape``; with
    ``lanes`` (see _use_lanes), in SUM_LANES partial results (_lane_reduce)."""
    shape = static_shape(x)
    axes, keep = list(attrs["axes"]), bool(attrs["keepdims"])
    reducer = {"sum": te.sum, "max": te.max, "min": te.min}[combiner]
    if lanes:
        return _lane_reduce(x, attrs, out_shape, reducer, source, name)

    def body(*i: Any) -> PrimExpr:
        rvs = [te.reduce_axis(shape[a], f"r{k}") for k, a in enumerate(axes)]
        val = source(_load(x, input_index(i, rvs, len(shape), axes, keep)))
        return reducer(val, axis=rvs, init=init)

    return te.compute(out_shape, body, name, attrs=reduce_order(len(shape), axes))


def reduce_order(ndim: int, axes: Sequence[int]) -> dict[str, Any]:
    """Stage attrs for :func:`schedule_reduce`: reduce loops innermost when the input's last
    axis is reduced (contiguous reads), else outside the vectorised last data loop."""
    return {"reduce_inner": ndim - 1 in axes}


def _count(x: te.Tensor, axes: Sequence[int]) -> int:
    shape = static_shape(x)
    return math.prod(shape[a] for a in axes)


def _identity_copy(x: te.Tensor, out_shape: Sequence[Any], dtype: str, name: str) -> te.Tensor:
    return te.compute(out_shape, lambda *i: _load(x, i).astype(dtype), name)


def _sum_like(name: str) -> None:
    def compute(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
        x = inputs[0]
        ty = out_tensor_type(out_type)
        dtype, work = ty.dtype, compute_dtype(ty.dtype)
        if not attrs["axes"]:
            return _identity_copy(x, ty.shape, dtype, name)
        lanes = _use_lanes(x, attrs["axes"], work)
        acc = _reduce(x, attrs, ty.shape, "sum", lambda v: v.astype(work), name, lanes=lanes)
        if name == "sum":
            return acc if work == dtype else _identity_copy(acc, ty.shape, dtype, "sum_cast")
        count = _count(x, attrs["axes"])

        def mean(*i: Any) -> PrimExpr:
            total = _load(acc, i)
            if dt.is_float(work):
                if count == 0:
                    return tir.const(math.nan, dtype)
                return (total / tir.const(count, work)).astype(dtype)
            if count == 0:
                return tir.const(0, dtype)
            return tir.truncdiv(total, tir.const(count, work)).astype(dtype)

        return te.compute(ty.shape, mean, "mean")

    register_compute(name)(compute)


#: float sums over a long last axis accumulate this many interleaved partial sums, so the
#: C compiler can vectorise the reduction loop: 16 (one AVX-512 vector, two AVX2 ones:
#: independent chains) instead of 8, one thread: ReduceSum over 768 of 256 rows 9.8 -> 5.7
#: us, ReduceMean over H and W of 1x256x56x56 46 -> 33 (onnxruntime 14, 52).
SUM_LANES = 16


def _use_lanes(x: te.Tensor, axes: Sequence[int], work: str) -> bool:
    """Whether a float sum over ``axes`` runs in SUM_LANES partial sums: the axes are the
    trailing ones (contiguous: ReduceMean over H and W of NCHW, PyTorch's ``mean((2, 3))``)
    and span at least 3 x SUM_LANES elements (SE blocks' 7 x 7: 49). Axes of extent 1 do
    not count (MeanVarianceNormalization's mean over N, H and W of a batch of one)."""
    shape = static_shape(x)
    inner = _lane_axes(shape, axes)
    n = math.prod(shape[a] for a in inner)
    return dt.is_float(work) and bool(inner) and n >= 3 * SUM_LANES


def _lane_axes(shape: Sequence[int], axes: Sequence[int]) -> list[int]:
    """The reduced axes of extent over 1 when they are the trailing axes, else []."""
    big = sorted(int(a) for a in axes if shape[a] > 1)
    return big if big == list(range(len(shape) - len(big), len(shape))) else []


def _lane_reduce(
    x: te.Tensor,
    attrs: Attrs | dict[str, Any],
    out_shape: Sequence[Any],
    reducer: Callable[..., PrimExpr],
    source: Callable[[PrimExpr], PrimExpr],
    name: str,
) -> te.Tensor:
    """The reduction over the trailing axes as SUM_LANES strided partial results over their
    flattened extent (a vectorisable stage) and then the reduction of the lanes (TVM's
    rfactor). A sum over 56 x 56 ran as one scalar chain per channel: ReduceMean of
    1x256x56x56 over H and W 367 -> 47 us at one thread (onnxruntime 52)."""
    shape = static_shape(x)
    ndim, keep = len(shape), bool(attrs["keepdims"])
    axes = sorted(int(a) for a in attrs["axes"])
    big = _lane_axes(shape, axes)
    inner = [shape[a] for a in big]
    whole, tail = divmod(math.prod(inner), SUM_LANES)
    zero = tir.const(0, "int32")

    def at(flat: PrimExpr) -> list[PrimExpr]:
        """The index of every reduced axis at ``flat`` in the big axes (0 on the others)."""
        pos = dict(zip(big, unflatten(flat, inner), strict=True))
        return [pos.get(a, zero) for a in axes]

    def part(*il: Any) -> PrimExpr:
        i, lane = il[:-1], il[-1]
        q = te.reduce_axis(whole, "q")
        pos = at(q.var * SUM_LANES + lane)
        return reducer(source(_load(x, input_index(i, pos, ndim, axes, keep))), axis=q)

    partial = te.compute(
        (*out_shape, SUM_LANES), part, name + "_lanes", attrs={"reduce_inner": False}
    )

    def total(*i: Any) -> PrimExpr:  # the lanes, then the last n % SUM_LANES elements
        lane = te.reduce_axis(SUM_LANES + tail, "lane")
        if not tail:
            return reducer(partial[(*i, lane.var)], axis=lane)
        pos = at(whole * SUM_LANES + lane.var - SUM_LANES)
        rest = source(_load(x, input_index(i, pos, ndim, axes, keep)))
        last = tir.const(SUM_LANES - 1, "int32")
        early = partial[(*i, tir.min(lane.var, last))]
        return reducer(tir.if_then_else(lane.var < SUM_LANES, early, rest), axis=lane)

    return te.compute(out_shape, total, name, attrs={"reduce_inner": True})


def _extreme(name: str) -> None:
    def compute(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
        x = inputs[0]
        ty = out_tensor_type(out_type)
        dtype = ty.dtype
        if not attrs["axes"]:
            return _identity_copy(x, ty.shape, dtype, name)
        if dtype == "bool":  # any / all over 0/1 bytes
            init = tir.const(0 if name == "max" else 1, "uint8")
            acc = _reduce(x, attrs, ty.shape, name, lambda v: v.astype("uint8"), name, init)
            return te.compute(ty.shape, lambda *i: as_dtype(_load(acc, i), "bool"), name + "_b")
        work = compute_dtype(dtype)
        lanes = _use_lanes(x, attrs["axes"], work)
        acc = _reduce(x, attrs, ty.shape, name, lambda v: v.astype(work), name, lanes=lanes)
        if not dt.is_float(dtype):
            return acc
        zero = tir.const(0, "int32")
        nans = _reduce(  # a NaN count: an integer sum, which the C compiler vectorises
            x,
            attrs,
            ty.shape,
            "sum",
            lambda v: tir.if_then_else(is_nan(v), tir.const(1, "int32"), zero),
            name + "_nan",
        )

        def body(*i: Any) -> PrimExpr:
            nan = tir.const(math.nan, work)
            return tir.if_then_else(_load(nans, i) > 0, nan, _load(acc, i)).astype(dtype)

        return te.compute(ty.shape, body, name + "_out")

    register_compute(name)(compute)


def staged_product(
    out_shape: Sequence[int], count: int, term: Term, dtype: str, name: str
) -> te.Tensor:
    """out[i] = term(i, 0) * ... * term(i, count - 1), ``CHUNK`` factors per stage.

    Each intermediate stage is a one-step sum reduction so the group lowering keeps it
    materialised instead of inlining an expression with ``count`` factors.
    """
    one = tir.const(1, dtype)
    if count <= CHUNK:

        def body(*i: Any) -> PrimExpr:
            out = one
            for r in range(count):
                t = term(i, tir.const(r, "int32"))
                out = t if r == 0 else out * t
            return out

        return te.compute(tuple(out_shape), body, name)
    chunks = -(-count // CHUNK)

    def part(*ic: Any) -> PrimExpr:
        i, c = ic[:-1], ic[-1]
        out: PrimExpr | None = None
        for j in range(CHUNK):
            r = c * CHUNK + j
            if (chunks - 1) * CHUNK + j < count:
                t = term(i, r)
            else:
                t = tir.if_then_else(r < count, term(i, tir.min(r, count - 1)), one)
            out = t if out is None else out * t
        assert out is not None
        return te.sum(out, axis=te.reduce_axis(1, "one"))

    partial = te.compute((*out_shape, chunks), part, name + "_part")
    return staged_product(out_shape, chunks, lambda i, r: partial[(*i, r)], dtype, name)


@register_compute("prod")
def prod(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """The product over axes (integers wrap)."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    dtype, work = ty.dtype, compute_dtype(ty.dtype)
    shape = static_shape(x)
    axes, keep = list(attrs["axes"]), bool(attrs["keepdims"])
    rdims = [shape[a] for a in axes]

    def term(i: tuple[Any, ...], r: PrimExpr) -> PrimExpr:
        red = unflatten(r, rdims) if rdims else []
        return _load(x, input_index(i, red, len(shape), axes, keep)).astype(work)

    out = staged_product(ty.shape, math.prod(rdims), term, work, "prod")
    return out if work == dtype else _identity_copy(out, ty.shape, dtype, "prod_cast")


def _arg(name: str) -> None:
    def compute(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
        x = inputs[0]
        ty = out_tensor_type(out_type)
        shape = static_shape(x)
        axis, keep = attrs["axis"], bool(attrs["keepdims"])
        n = shape[axis]
        work = compute_dtype(x.dtype)
        last = bool(attrs["select_last_index"])
        if axis == len(shape) - 1 and ARG_LANES <= n < 2**31 and x.dtype != "bool":
            return _arg_rows(x, ty.shape, name, last)
        red_attrs = {"axes": (axis,), "keepdims": keep}
        combiner = "max" if name == "argmax" else "min"
        best = _reduce(x, red_attrs, ty.shape, combiner, lambda v: v.astype(work), name + "_v")

        def code(*i: Any) -> PrimExpr:
            rv = te.reduce_axis(n, "r")
            v = _load(x, input_index(i, [rv], len(shape), [axis], keep)).astype(work)
            r = rv.var.astype("int64")
            hit = tir.eq(v, _load(best, i))
            big = tir.const(n, "int64")
            if last:
                enc = tir.if_then_else(hit, r, tir.const(-1, "int64"))
                if dt.is_float(work):
                    enc = tir.if_then_else(is_nan(v), r + big, enc)
                return te.max(enc, axis=rv, init=tir.const(-1, "int64"))
            enc = tir.if_then_else(hit, r, big)
            if dt.is_float(work):
                enc = tir.if_then_else(is_nan(v), r - big, enc)
            return te.min(enc, axis=rv, init=big)

        found = te.compute(ty.shape, code, name + "_i", attrs=reduce_order(len(shape), [axis]))
        n64 = tir.const(n, "int64")

        def fix(*i: Any) -> PrimExpr:
            e = _load(found, i)
            if last:
                return tir.if_then_else(e >= n64, e - n64, e)
            return tir.if_then_else(e < tir.const(0, "int64"), e + n64, e)

        return te.compute(ty.shape, fix, name)

    register_compute(name)(compute)


#: argmax/argmin over a last axis at least this long keep this many running (value,
#: index) pairs per row (_arg_rows); 16 lanes were 11.8 us on 64x1000, 32 and 64 7.5.
ARG_LANES = 32


def _arg_rows(x: te.Tensor, out_shape: Sequence[Any], name: str, last: bool) -> te.Tensor:
    """argmax/argmin over the last axis in one pass, row by row (loop IR): ARG_LANES
    running best values and their indices (a vectorised loop), folded in halvings, then the
    row's last ``n % ARG_LANES`` elements one by one. The te form reduced the row twice
    (its extreme, then the first index holding it), each a scalar chain: ArgMax over the
    last axis of 64x1000 74 -> 7.4 us at one thread (onnxruntime 42)."""
    if not isinstance(x.op, te.PlaceholderOp):  # a fused producer: the kernel reads memory
        src = x
        x = te.compute(src.shape, lambda *i: src[i], name + "_in", attrs={MATERIALIZE: True})
    shape = static_shape(x)
    out_dims = tuple(int(d) for d in out_shape)

    def build(ins: list[tir.Buffer], outs: list[tir.Buffer]) -> tir.Stmt:
        return _arg_rows_body(ins[0], outs[0], shape, out_dims, name == "argmax", last)

    out = te.extern(tuple(out_shape), [x], build, name=name, dtype="int64")
    assert isinstance(out, te.Tensor)
    return out


def _arg_rows_body(
    x: tir.Buffer,
    out: tir.Buffer,
    shape: tuple[int, ...],
    out_dims: tuple[int, ...],
    largest: bool,
    last: bool,
) -> tir.Stmt:
    ib = tir.IRBuilder()
    y = ib.buffer(out)
    lead, n = shape[:-1], shape[-1]
    rows, lanes = math.prod(lead), ARG_LANES
    work = compute_dtype(x.dtype)
    floats = dt.is_float(work)

    def beats(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        """a is strictly more extreme than b (a NaN beats any number)."""
        strict = a > b if largest else a < b
        if not floats:
            return strict
        return tir.logical_or(strict, tir.logical_and(is_nan(a), tir.logical_not(is_nan(b))))

    def same(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        eq = tir.eq(a, b)
        return tir.logical_or(eq, tir.logical_and(is_nan(a), is_nan(b))) if floats else eq

    def later(v: PrimExpr, best: PrimExpr) -> PrimExpr:
        """Whether v, after best in the row, replaces it."""
        return tir.logical_or(beats(v, best), same(v, best)) if last else beats(v, best)

    kind = (
        tir.ForKind.PARALLEL if rows > 1 and rows * n >= MIN_PARALLEL_WORK else tir.ForKind.SERIAL
    )
    vector = tir.ForKind.VECTORIZED
    with ib.for_range(0, rows, "row", kind=kind) as r:
        idx = unflatten(r, lead)
        best = ib.allocate(work, (lanes,), "best")
        at = ib.allocate("int32", (lanes,), "at")
        with ib.for_range(0, lanes, "l", kind=vector) as lane:
            best[lane] = x[(*idx, lane)].astype(work)
            at[lane] = lane
        with ib.for_range(1, n // lanes, "j") as j, ib.for_range(0, lanes, "l", vector) as lane:
            v = ib.let("v", x[(*idx, j * lanes + lane)].astype(work))
            take = ib.let("take", later(v, best[lane]))  # once: 2x faster than in each select
            at[lane] = tir.if_then_else(take, j * lanes + lane, at[lane])
            best[lane] = tir.if_then_else(take, v, best[lane])
        half = lanes // 2
        while half:  # fold: the more extreme of two lanes, the tie to the earlier (later) index
            with ib.for_range(0, half, "l", kind=vector) as lane:
                a, b = best[lane], best[lane + half]
                i_a, i_b = at[lane], at[lane + half]
                order = i_b > i_a if last else i_b < i_a
                take = ib.let(
                    "take", tir.logical_or(beats(b, a), tir.logical_and(same(b, a), order))
                )
                at[lane] = tir.if_then_else(take, i_b, i_a)
                best[lane] = tir.if_then_else(take, b, a)
            half //= 2
        with ib.for_range(n - n % lanes, n, "t") as t:
            v = ib.let("v", x[(*idx, t)].astype(work))
            take = ib.let("take", later(v, best[0]))
            at[0] = tir.if_then_else(take, t, at[0])
            best[0] = tir.if_then_else(take, v, best[0])
        y[tuple(unflatten(r, out_dims))] = at[0].astype("int64")
    return ib.get()


for _name in ("sum", "mean"):
    _sum_like(_name)
for _name in ("max", "min"):
    _extreme(_name)
for _name in ("argmax", "argmin"):
    _arg(_name)


def _extent(iv: te.IterVar) -> int:
    return int(getattr(iv.extent, "value", 1))


def _size(ivs: Sequence[te.IterVar]) -> int:
    return math.prod(_extent(iv) for iv in ivs)


def schedule_stage(stage: te.Stage) -> None:
    """One stage of a reduction group: data loops fused and parallel when there is enough
    work; reduce loops innermost (``reduce_inner``, the default) or outside the vectorised
    last data loop; elementwise stages vectorise their last loop."""
    op = stage.op
    if not isinstance(op, te.ComputeOp) or not op.axis:
        return
    axes, red = list(op.axis), list(op.reduce_axis)
    work = _size(axes) * max(1, _size(red))
    if not red or not op.attrs.get("reduce_inner", True):
        lead, last = axes[:-1], axes[-1]
        if lead:
            outer = stage.fuse(*lead) if len(lead) > 1 else lead[0]
            if work >= MIN_PARALLEL_WORK and _extent(outer) > 1:
                stage.parallel(outer)
        if red:
            stage.reorder(*red, last)
        if _extent(last) >= MIN_VECTOR_EXTENT:
            stage.vectorize(last)
        return
    outer = stage.fuse(*axes) if len(axes) > 1 else axes[0]
    if work >= MIN_PARALLEL_WORK and _extent(outer) > 1:
        stage.parallel(outer)


def schedule_reduce(ctx: ScheduleContext) -> None:
    """Schedule of a reduction-anchored group: every output and every materialised
    reduction stage is scheduled at root by :func:`schedule_stage`."""
    outputs = list(ctx.group_outputs)
    for t in outputs:
        schedule_stage(ctx.sch[t])
    for stage in reduction_stages(ctx.sch, outputs):
        schedule_stage(stage)


for _name in ("sum", "mean", "max", "min", "prod", "argmax", "argmin"):
    register_schedule(_name)(schedule_reduce)
