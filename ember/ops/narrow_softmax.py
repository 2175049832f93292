"""Softmax of float16/bfloat16 tensors computed in the narrow type, step by step.

ONNX says an op's intermediate values are in its input type, and onnx's reference
(``Softmax``, and the softmax inside ``Attention``) computes ``x - max(x)``, ``exp``, the
row sum and the quotient with numpy float16 / ml_dtypes bfloat16 arithmetic, each result
rounded to the narrow type. A float32 softmax rounded once differs from it by an ulp or
two in the probabilities, which a following matmul carries into the output beyond onnx's
tolerance. So this compute rounds where the reference does: a narrow value in ember's C
code is a float32 exactly representable in the type, and every narrow arithmetic result
and intrinsic is rounded back (``codegen/c/half.py``).

The row sum follows the reference's summation. numpy sums float16 along the last
(contiguous) axis in float32 and rounds once, but along any other axis its loop adds one
slice at a time into a float16 accumulator; ml_dtypes has no float32 loop at all. So a
float16 sum over the last axis is a float32 sum rounded once, and every other narrow sum
is a chain of narrow additions, each rounded, in index order (the reduce loop keeps that
order).
"""

from __future__ import annotations

from typing import Any

from ember import tir
from ember.ir.ops.common import normalize_axis
from ember.ops.common import scalar
from ember.ops.nn_schedule import MATERIALIZE
from ember.tir import PrimExpr, te

#: narrow types whose reference sums over the last axis accumulate in float32 (numpy's).
WIDE_SUM = frozenset({"float16"})


def _keep(index: tuple[Any, ...], axis: int) -> tuple[Any, ...]:
    return tuple(scalar(0, "int32") if k == axis else i for k, i in enumerate(index))


def narrow_softmax(x: te.Tensor, axis: int) -> te.Tensor:
    """exp(x - max) / sum(exp(x - max)) along ``axis``, each step in x's narrow dtype."""
    axis = normalize_axis(axis, len(x.shape))
    dtype = x.dtype
    shape = list(x.shape)
    row = [1 if k == axis else s for k, s in enumerate(shape)]

    def over_row(i: tuple[Any, ...], r: te.IterVar) -> tuple[Any, ...]:
        return tuple(r.var if k == axis else v for k, v in enumerate(i))

    rmax = te.reduce_axis(shape[axis], "rmax")
    peak = te.compute(row, lambda *i: te.max(x[over_row(i, rmax)], axis=rmax), "softmax_max")

    def shifted_exp(*i: Any) -> PrimExpr:
        return tir.exp(x[i] - peak[_keep(i, axis)])

    e = te.compute(shape, shifted_exp, "softmax_exp", attrs={MATERIALIZE: True})
    rsum = te.reduce_axis(shape[axis], "rsum")
    if dtype in WIDE_SUM and axis == len(shape) - 1:
        wide = te.compute(
            row,
            lambda *i: te.sum(e[over_row(i, rsum)].astype("float32"), axis=rsum),
            "softmax_sum",
        )
        total = te.compute(row, lambda *i: wide[i].astype(dtype), "softmax_total")
    else:
        total = te.compute(row, lambda *i: te.sum(e[over_row(i, rsum)], axis=rsum), "softmax_sum")
    return te.compute(shape, lambda *i: e[i] / total[_keep(i, axis)], "softmax")
