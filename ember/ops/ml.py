"""Computes of the classical ML and text-feature ops: tree_ensemble and tfidf_vectorizer.

Contract: each matches the numpy reference of ember/ir/ops/ml.py.

* ``tree_ensemble`` is hand-written loop IR (``te.extern``): per sample and tree, a walk
  of at most ``depth`` steps over the node table (a set-membership node scans its
  members), then the leaf's weight aggregated into its target;
* ``tfidf_vectorizer`` counts, per row and output column, the matches of the column's
  n-grams at every start and skip as one reduction (O(columns * n-grams per column *
  skips * row length * n)); a trie walk per start would beat it on large pools.
"""

from __future__ import annotations

import math
from typing import Any

from ember import tir
from ember.errors import CompileError
from ember.ir.op import Attrs
from ember.ir.ops.ml import (
    FALSE_NEXT,
    FEATURE,
    FIRST_MEMBER,
    MEMBER_COUNT,
    MISSING_TRUE,
    MODE,
    TRUE_NEXT,
)
from ember.ir.types import Type
from ember.ops.common import out_tensor_type, static_shape
from ember.ops.elemwise import is_nan
from ember.ops.reduce import schedule_reduce
from ember.ops.registry import register_compute, register_schedule
from ember.support.dtypes import dtype_info
from ember.tir import AssertStmt, Buffer, LetStmt, PrimExpr, Stmt, te


def _goes_true(mode: PrimExpr, v: PrimExpr, split: PrimExpr, member: PrimExpr) -> PrimExpr:
    """The branch condition of a node of ``mode`` (``member``: v is one of its members)."""
    tests = (v <= split, v < split, v >= split, v > split, tir.eq(v, split), tir.ne(v, split))
    out = member
    for code in range(len(tests) - 1, -1, -1):
        out = tir.if_then_else(tir.eq(mode, code), tests[code], out)
    return out


def _walks(
    ins: list[tir.Buffer], outs: list[tir.Buffer], attrs: Attrs, max_members: int
) -> tir.Stmt:
    """The loop IR of tree_ensemble: every sample walks every tree to a leaf."""
    x, ints, splits, members, roots, targets, weights = ins
    out = outs[0]
    samples, n_trees = static_shape_of(x)[0], static_shape_of(roots)[0]
    n_targets, dtype = static_shape_of(out)[1], out.dtype
    aggregate = attrs["aggregate"]
    big = tir.const(3.4028234663852886e38 if dtype == "float32" else 1.7976931348623157e308, dtype)
    init = {"min": big, "max": -big}.get(aggregate, tir.const(0, dtype))
    ib = tir.IRBuilder()
    with ib.for_range(0, samples, "n", kind=tir.ForKind.PARALLEL) as n:
        with ib.for_range(0, n_targets, "t") as t:
            ib.emit(tir.store(out, init, n, t))
        node = ib.allocate("int32", (1,), "node")
        hit = ib.allocate("int32", (1,), "hit")
        with ib.for_range(0, n_trees, "tree") as tree:
            node[0] = roots[tree]
            with ib.for_range(0, attrs["depth"], "step"), ib.if_scope(node[0] >= 0):
                k = node[0]
                v = x[n, ints[k, FEATURE]]
                hit[0] = tir.const(0, "int32")
                with ib.for_range(0, max_members, "m") as m:
                    inside = m < ints[k, MEMBER_COUNT]
                    at = tir.min(ints[k, FIRST_MEMBER] + m, max_members - 1)
                    with ib.if_scope(tir.logical_and(inside, tir.eq(members[at], v))):
                        hit[0] = tir.const(1, "int32")
                cond = _goes_true(ints[k, MODE], v, splits[k], tir.ne(hit[0], 0))
                missing = tir.logical_and(tir.ne(ints[k, MISSING_TRUE], 0), is_nan(v))
                cond = tir.logical_or(cond, missing)
                node[0] = tir.if_then_else(cond, ints[k, TRUE_NEXT], ints[k, FALSE_NEXT])
            leaf = -node[0] - 1
            target, weight = targets[leaf], weights[leaf]
            old = out[n, target]
            if aggregate == "min":
                new = tir.min(old, weight)
            elif aggregate == "max":
                new = tir.max(old, weight)
            else:
                new = old + weight
            ib.emit(tir.store(out, new, n, target))
        if aggregate == "average":
            with ib.for_range(0, n_targets, "t") as t:
                ib.emit(tir.store(out, out[n, t] / tir.const(max(n_trees, 1), dtype), n, t))
        elif aggregate in ("min", "max"):  # a target no leaf reached is 0, as onnxruntime
            with ib.for_range(0, n_targets, "t") as t:
                unset = tir.eq(out[n, t], init)
                ib.emit(
                    tir.store(out, tir.if_then_else(unset, tir.const(0, dtype), out[n, t]), n, t)
                )
    return ib.get()


def static_shape_of(buf: tir.Buffer) -> tuple[int, ...]:
    """The constant shape of a buffer."""
    shape = buf.const_shape()
    if shape is None:
        raise CompileError(f"buffer {buf.name} has a symbolic shape; ember needs static shapes")
    return shape


def _in_memory(t: te.Tensor) -> te.Tensor:
    """``t`` as a stage the group lowering keeps in memory (an extern reads buffers): a
    computed tensor (a scalar-sized constant of the group) becomes a one-step sum."""
    if isinstance(t.op, te.PlaceholderOp):
        return t
    one = te.reduce_axis(1, "one")
    return te.compute(t.shape, lambda *i: te.sum(t[i], axis=one), f"{t.name}_buf")


@register_compute("tree_ensemble")
def tree_ensemble(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """(N, n_targets): each tree's leaf weight aggregated into its target."""
    ty = out_tensor_type(out_type)
    max_members = max(static_shape(inputs[3])[0], 1)

    def body(ins: list[tir.Buffer], outs: list[tir.Buffer]) -> tir.Stmt:
        return _walks(ins, outs, attrs, max_members)

    tables = [_in_memory(t) for t in inputs]
    out = te.extern(ty.shape, tables, body, name="tree_ensemble", dtype=ty.dtype)
    return out if isinstance(out, te.Tensor) else out[0]


@register_compute("tfidf_vectorizer")
def tfidf_vectorizer(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """n-gram counts per row and output column, weighted by mode."""
    x, pool, lengths, weights = inputs
    size = static_shape(x)[-1]
    _, grams, longest = static_shape(pool)
    ty = out_tensor_type(out_type)
    one, zero = tir.const(1, "int32"), tir.const(0, "int32")

    def count(*i: Any) -> PrimExpr:
        o, lead = i[-1], i[:-1]
        rk = te.reduce_axis(grams, "k")
        rd = te.reduce_axis(attrs["max_skip"] + 1, "d")
        rp = te.reduce_axis(size, "p")
        n = lengths[o, rk.var]
        step = rd.var + 1
        ok = tir.logical_and(n > 0, tir.logical_or(tir.eq(rd.var, 0), n >= 2))
        ok = tir.logical_and(ok, rp.var + (n - 1) * step < size)
        for j in range(longest):
            pos = tir.min(rp.var + j * step, size - 1)
            token = x[(*lead, pos)].astype("int64")
            ok = tir.logical_and(ok, tir.logical_or(n <= j, tir.eq(token, pool[o, rk.var, j])))
        return te.sum(tir.if_then_else(ok, one, zero), axis=[rk, rd, rp])

    counts = te.compute(ty.shape, count, "tfidf_counts")

    def weigh(*i: Any) -> PrimExpr:
        c = counts[i].astype("float32")
        w = weights[i[-1]]
        if attrs["mode"] == "IDF":
            return tir.if_then_else(c > tir.const(0.0, "float32"), w, tir.const(0.0, "float32"))
        if attrs["mode"] == "TFIDF":
            return c * w
        return c

    return te.compute(ty.shape, weigh, "tfidf_vectorizer")


register_schedule("tfidf_vectorizer")(schedule_reduce)


@register_compute("label_encode_string")
def label_encode_string(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """One call of ``ember_str_label_encode`` (the C runtime): a binary search per element
    over the keys, sorted at import."""
    x, keys, values = inputs
    ty = out_tensor_type(out_type)
    count, n_keys = math.prod(static_shape(x)), math.prod(static_shape(keys))
    width = dtype_info(ty.dtype).itemsize

    def body(ins: list[Buffer], outs: list[Buffer]) -> Stmt:
        # values and out as void* (untyped handles): one prototype for every value dtype
        values_ptr, out_ptr = tir.Var("label_values", "handle"), tir.Var("label_out", "handle")
        args = [ins[0].data, tir.const(count, "int64"), ins[1].data, tir.const(n_keys, "int64")]
        args += [values_ptr, tir.const(width, "int64"), out_ptr]
        status = tir.call_extern("int32", "ember_str_label_encode", *args)
        check = AssertStmt(tir.eq(status, 0), "label encoding failed", tir.seq())
        return LetStmt(values_ptr, ins[2].data, LetStmt(out_ptr, outs[0].data, check))

    out = te.extern(ty.shape, [x, keys, values], body, "label_encode", dtype=ty.dtype)
    assert isinstance(out, te.Tensor)
    return out
