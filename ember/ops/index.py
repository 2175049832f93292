"""Indexing ops: take (ONNX Gather), gather_elements, gather_nd, one_hot, trilu and the
scatters (scatter_elements, scatter_nd).

Contract: each compute matches the numpy reference of ember/ir/ops/index.py and
scatter.py for in-range indices; a negative index counts from the end of its axis. Indices
outside ``[-dim, dim)`` fail the kernel at run time (``tir.index_check``).

The scatters run as loop-IR kernels that copy the data and store each update at its
index (ember.ops.index_scatter); bool data, and SCATTER_KERNELS off, take the te computes
here, written from the output's side: each output element searches the updates that land
on it (a reduction over the scattered axis for scatter_elements, over all update rows for
scatter_nd). Repeated indices with ``reduction="none"`` keep the last update, like the
reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ember import tir
from ember.ir.op import Attrs
from ember.ir.types import Type
from ember.ops.binary import maximum, minimum
from ember.ops.common import out_tensor_type, static_shape, unflatten
from ember.ops.index_scatter import (
    scatter_elements_kernel,
    scatter_kernel_fits,
    scatter_nd_kernel,
)
from ember.ops.reduce import schedule_reduce, staged_product
from ember.ops.registry import register_compute, register_schedule
from ember.ops.transform import flat_index
from ember.tir import PrimExpr, te
from ember.tir import dtype as dt

#: whether scatters run as store kernels (ember.ops.index_scatter) rather than the te
#: computes that search the updates from every output element.
SCATTER_KERNELS = True


def wrap(index: PrimExpr, dim: int) -> PrimExpr:
    """A possibly negative index into an axis of size ``dim``, checked at run time (int64)."""
    return tir.index_check(index, dim, "an index")


def _load(t: te.Tensor, idx: Sequence[Any]) -> PrimExpr:
    return t[tuple(idx)] if idx else t[()]


@register_compute("take")
def take(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Slices of data along axis at the given indices (ONNX Gather)."""
    data, indices = inputs
    axis = attrs["axis"]
    dim = static_shape(data)[axis]
    q = len(indices.shape)
    ty = out_tensor_type(out_type)

    def body(*i: Any) -> PrimExpr:
        what = f"Gather (take) indices along axis {axis}"
        pos = tir.index_check(_load(indices, i[axis : axis + q]), dim, what)
        return _load(data, [*i[:axis], pos, *i[axis + q :]])

    return te.compute(ty.shape, body, "take")


@register_compute("gather_elements")
def gather_elements(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """out[i] = data[i with axis replaced by indices[i]] (ONNX GatherElements)."""
    data, indices = inputs
    axis = attrs["axis"]
    dim = static_shape(data)[axis]
    ty = out_tensor_type(out_type)

    def body(*i: Any) -> PrimExpr:
        src = list(i)
        src[axis] = tir.index_check(indices[i], dim, f"GatherElements indices, axis {axis}")
        return data[tuple(src)]

    return te.compute(ty.shape, body, "gather_elements")


@register_compute("gather_nd")
def gather_nd(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """out[..] = data[batch.., indices[.., 0], .., indices[.., m-1], rest..] (ONNX GatherND)."""
    data, indices = inputs
    b = attrs["batch_dims"]
    dshape, ishape = static_shape(data), static_shape(indices)
    m = ishape[-1]
    q = len(ishape) - 1
    ty = out_tensor_type(out_type)

    def body(*i: Any) -> PrimExpr:
        cols = [
            tir.index_check(indices[(*i[:q], j)], dshape[b + j], f"GatherND indices, column {j}")
            for j in range(m)
        ]
        return _load(data, [*i[:b], *cols, *i[q:]])

    return te.compute(ty.shape, body, "gather_nd")


@register_compute("one_hot")
def one_hot(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """on_value where the class along axis equals the (wrapped) index, else off_value."""
    indices, on, off = inputs
    depth, axis = attrs["depth"], attrs["axis"]
    ty = out_tensor_type(out_type)

    def body(*i: Any) -> PrimExpr:
        idx = _load(indices, [*i[:axis], *i[axis + 1 :]]).astype("int64")
        idx = tir.if_then_else(idx < tir.const(0, "int64"), idx + depth, idx)
        hit = tir.eq(idx, i[axis].astype("int64"))
        return tir.if_then_else(hit, on[()], off[()]).astype(ty.dtype)

    return te.compute(ty.shape, body, "one_hot")


@register_compute("trilu")
def trilu(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Keep the upper (or lower) triangle of the last two axes, zero the rest."""
    x = inputs[0]
    k = attrs["k"]
    ty = out_tensor_type(out_type)
    zero = tir.const(0, x.dtype)

    def body(*i: Any) -> PrimExpr:
        diff = i[-1] - i[-2]
        keep = diff >= k if attrs["upper"] else diff <= k
        return tir.if_then_else(keep, x[i], zero)

    return te.compute(ty.shape, body, "trilu")


def _lowest(dtype: str, largest: bool) -> PrimExpr:
    """The identity of max (``largest``) or min over ``dtype``."""
    if dt.is_float(dtype):
        return tir.const(-math.inf if largest else math.inf, dtype)
    if dtype == "bool":
        return tir.const(not largest, "bool")
    bits = dt.bits_of(dtype)
    lo, hi = ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dt.is_int(dtype)
              else (0, (1 << bits) - 1))  # fmt: skip
    return tir.const(lo if largest else hi, dtype)


Match = Callable[[tuple[Any, ...], list[Any]], PrimExpr]
Update = Callable[[tuple[Any, ...], list[Any]], PrimExpr]


def _scatter(
    data: te.Tensor,
    red_shape: Sequence[int],
    match: Match,
    update: Update,
    valid: Callable[[tuple[Any, ...]], PrimExpr | None],
    how: str,
    name: str,
) -> te.Tensor:
    """out[p] = data[p] combined (``how``) with every update u where ``match(p, u)``."""
    shape = static_shape(data)
    dtype = data.dtype
    count = math.prod(red_shape)

    def red_axes() -> list[te.IterVar]:
        return [te.reduce_axis(n, f"u{k}") for k, n in enumerate(red_shape)]

    if how == "none":

        def last(*p: Any) -> PrimExpr:
            rvs = red_axes()
            u = [rv.var for rv in rvs]
            hit = match(p, u)
            code = tir.if_then_else(hit, flat_index(u, red_shape), tir.const(-1, "int64"))
            return te.max(code, axis=rvs, init=tir.const(-1, "int64"))

        found = te.compute(shape, last, name + "_last")

        def pick(*p: Any) -> PrimExpr:
            f = found[p]
            u = unflatten(tir.max(f, tir.const(0, "int64")), red_shape)
            return tir.if_then_else(f >= tir.const(0, "int64"), update(p, u), data[p])

        return te.compute(shape, pick, name)
    if how == "mul":

        def term(p: tuple[Any, ...], r: PrimExpr) -> PrimExpr:
            u = unflatten(r, red_shape)
            return tir.if_then_else(match(p, u), update(p, u), tir.const(1, dtype))

        prod = staged_product(shape, count, term, dtype, name + "_prod")
        return te.compute(shape, lambda *p: data[p] * prod[p], name)
    combiner = {"add": te.sum, "max": te.max, "min": te.min}[how]
    neutral = tir.const(0, dtype) if how == "add" else _lowest(dtype, how == "max")

    def combine(*p: Any) -> PrimExpr:
        rvs = red_axes()
        u = [rv.var for rv in rvs]
        return combiner(tir.if_then_else(match(p, u), update(p, u), neutral), axis=rvs)

    acc = te.compute(shape, combine, name + "_acc")
    merge = {"add": lambda a, b: a + b, "max": maximum, "min": minimum}[how]

    def out(*p: Any) -> PrimExpr:
        cond = valid(p)
        merged = merge(data[p], acc[p])
        return merged if cond is None else tir.if_then_else(cond, merged, data[p])

    return te.compute(shape, out, name)


@register_compute("scatter_elements")
def scatter_elements(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """out = data; out[..indices[u]..] = updates[u] along axis (ONNX ScatterElements)."""
    data, indices, updates = inputs
    axis = attrs["axis"]
    if SCATTER_KERNELS and scatter_kernel_fits(data):
        return scatter_elements_kernel(data, indices, updates, axis, attrs["reduction"])
    dshape, ishape = static_shape(data), static_shape(indices)
    dim = dshape[axis]

    def inside(p: tuple[Any, ...]) -> PrimExpr | None:
        conds = [p[d] < n for d, n in enumerate(ishape) if d != axis and n < dshape[d]]
        return tir.logical_and(*conds) if conds else None

    def at(p: tuple[Any, ...], u: list[Any]) -> tuple[Any, ...]:
        src = list(p)
        src[axis] = u[0]
        return tuple(tir.min(v, n - 1) if n < dshape[d] and d != axis else v
                     for d, (v, n) in enumerate(zip(src, ishape, strict=True)))  # fmt: skip

    def match(p: tuple[Any, ...], u: list[Any]) -> PrimExpr:
        pos = tir.index_check(indices[at(p, u)], dim, f"ScatterElements indices, axis {axis}")
        hit = tir.eq(pos, p[axis])
        cond = inside(p)
        return hit if cond is None else tir.logical_and(cond, hit)

    return _scatter(
        data,
        (ishape[axis],),
        match,
        lambda p, u: updates[at(p, u)],
        inside,
        attrs["reduction"],
        "scatter_elements",
    )


@register_compute("scatter_nd")
def scatter_nd(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """out = data; out[indices[u]] = updates[u] for index tuples (ONNX ScatterND)."""
    data, indices, updates = inputs
    if SCATTER_KERNELS and scatter_kernel_fits(data):
        return scatter_nd_kernel(data, indices, updates, attrs["reduction"])
    dshape, ishape = static_shape(data), static_shape(indices)
    k = ishape[-1]
    rows = ishape[:-1]
    single = not rows  # one index tuple: search a dummy axis of one row

    def row(u: list[Any]) -> list[Any]:
        return [] if single else u

    def match(p: tuple[Any, ...], u: list[Any]) -> PrimExpr:
        what = "ScatterND indices, column {}"
        conds = [
            tir.eq(tir.index_check(indices[(*row(u), j)], dshape[j], what.format(j)), p[j])
            for j in range(k)
        ]
        return tir.logical_and(*conds) if conds else tir.const(True, "bool")

    return _scatter(
        data,
        (1,) if single else rows,
        match,
        lambda p, u: _load(updates, [*row(u), *p[k:]]),
        lambda p: None,
        attrs["reduction"],
        "scatter_nd",
    )


for _name in ("scatter_elements", "scatter_nd"):
    register_schedule(_name)(schedule_reduce)
