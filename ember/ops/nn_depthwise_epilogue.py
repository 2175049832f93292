"""A small 3x3 depthwise tile's epilogue folded into its kernel call: ``ember_f32_dw3x3_ep``
(ember/codegen/c/f32_depthwise.py).

After ember.ops.nn_depthwise_kernel has made a tile a call, a tile of at most DW_SMALL
positions (a narrow row) whose accumulators start at +0 reads::

    ember_f32_dw3x3(acc, x, w, ..., zero=1)
    for j in range(ncols):
      for lane in vectorized(16):
        out[ooff + j * oj + lane] = let(v = acc[j * 16 + lane] + bias[boff + lane], f(v))

with ``f`` the identity, ReLU (``select(v < 0, 0, v)``) or ReLU then a ceiling
(``select(r > hi, hi, r)`` of the ReLU ``r``: ReLU6). ``fold_epilogue`` replaces the two by
one call of the epilogue kernel, which applies the same operations in the same order to the
accumulators while they are still in registers (bitwise equal): the tile's accumulators
are no longer stored to the stack and read back, the bias is loaded once per tile.
ds_cnn_kws (rows of 5, bias + ReLU), whole model, one thread, thread CPU time, AOT run
timed from C, builds before/after interleaved in one process, load 7.6: 0.0229-0.0230 ->
0.0222-0.0224 ms (0.972-0.975, three trials of 400 rounds), outputs bitwise equal;
mobilenet_v2 (three 7x7 layers fold) 0.994-1.003 and pp_lcnet (one) 0.990-1.006: level.
Other epilogues (a floor other than 0, sigmoid, a residual, none) keep the loop IR.
"""

from __future__ import annotations

import math
from typing import Any

from ember.ops.nn_conv_f32 import BLOCK
from ember.ops.nn_conv_rewrite import affine_accesses, const_extents, loop_chain
from ember.tir import simplify
from ember.tir.expr import (
    GT,
    LT,
    Add,
    BufferLoad,
    Call,
    FloatImm,
    IntImm,
    Let,
    PrimExpr,
    Select,
    Var,
)
from ember.tir.expr import const as tir_const
from ember.tir.functor import free_vars
from ember.tir.op import call_extern, cast
from ember.tir.stmt import BufferStore, Evaluate, For, ForKind, Stmt

#: the call_extern names of the kernel and of its epilogue form (ember.codegen.c.f32_depthwise
#: DEPTHWISE_KERNEL_NAME, DEPTHWISE_EPILOGUE_KERNEL_NAME; ops do not import codegen).
DEPTHWISE_KERNEL_NAME = "ember_f32_dw3x3"
DEPTHWISE_EPILOGUE_KERNEL_NAME = "ember_f32_dw3x3_ep"

#: the widest tile the epilogue kernel takes (ember.codegen.c.f32_depthwise.DW_SMALL).
DW_SMALL = 8

#: the epilogues the kernel applies (its ``kind`` argument).
IDENTITY, RELU, RELU_CEILING = 0, 1, 2


def _is_float(e: PrimExpr, value: float | None = None) -> bool:
    """Whether ``e`` is a float32 constant (equal to ``value``; +0 for 0)."""
    if not isinstance(e, FloatImm) or e.dtype != "float32":
        return False
    if value is None:
        return True
    return e.value == value and math.copysign(1.0, e.value) == math.copysign(1.0, value)


def _is_relu(e: PrimExpr, v: Var) -> bool:
    """Whether ``e`` is ``select(v < 0, 0, v)`` (+0 both times)."""
    if not isinstance(e, Select) or not isinstance(e.condition, LT):
        return False
    cond = e.condition
    return (
        cond.a is v
        and _is_float(cond.b, 0.0)
        and _is_float(e.true_value, 0.0)
        and e.false_value is v
    )


def _activation(body: PrimExpr, v: Var) -> tuple[int, float] | None:
    """(kind, ceiling) of the let body ``body`` over ``v``, None for other functions."""
    if body is v:
        return IDENTITY, 0.0
    if _is_relu(body, v):
        return RELU, 0.0
    if not isinstance(body, Select) or not isinstance(body.condition, GT):
        return None
    cond = body.condition
    relu = cond.a
    if not _is_relu(relu, v) or body.false_value != relu:
        return None
    hi = cond.b
    if not _is_float(hi) or body.true_value != hi:
        return None
    assert isinstance(hi, FloatImm)
    return RELU_CEILING, float(hi.value)


def _parts(value: PrimExpr) -> tuple[PrimExpr, tuple[int, float]] | None:
    """(the sum ``acc + bias``, (kind, ceiling)) of an epilogue's stored value."""
    if isinstance(value, Let):
        act = _activation(value.body, value.var)
        if act is None or value.var in free_vars(value.value):
            return None
        return value.value, act
    return value, (IDENTITY, 0.0)


def fold_epilogue(call: Call, epilogue: Stmt) -> Stmt | None:
    """The epilogue kernel's call doing ``call`` (an ember_f32_dw3x3 call from +0) and then
    ``epilogue``, None when the two do not have the form of the module docstring."""
    if call.op != DEPTHWISE_KERNEL_NAME or not isinstance(epilogue, For):
        return None
    args = call.args
    ncols, zero = args[5], args[16]
    if not isinstance(ncols, IntImm) or not isinstance(zero, IntImm) or zero.value != 1:
        return None
    if ncols.value > DW_SMALL:
        return None
    loops, body = loop_chain(epilogue)
    if not const_extents(loops) or len(loops) != (2 if ncols.value > 1 else 1):
        return None
    extents = [int(f.extent.value) for f in loops]  # type: ignore[attr-defined]
    if extents != [ncols.value, BLOCK][-len(loops) :] or loops[-1].kind != ForKind.VECTORIZED:
        return None
    if loops[0].kind == ForKind.PARALLEL:
        return None
    if not isinstance(body, BufferStore) or body.buffer.dtype != "float32":
        return None
    parts = _parts(body.value)
    if parts is None:
        return None
    total, (kind, hi) = parts
    if not isinstance(total, Add):
        return None
    acc, bias = total.a, total.b  # the accumulator first: the loop IR's operand order
    if not isinstance(acc, BufferLoad) or not isinstance(bias, BufferLoad):
        return None
    if acc.buffer.data is not args[0] or bias.buffer.dtype != "float32":
        return None
    if bias.buffer.data is args[0] or body.buffer.data is args[0]:
        return None
    forms = affine_accesses((body, acc, bias), loops)
    if forms is None:
        return None
    (obase, ocoef), (abase, acoef), (bbase, bcoef) = forms
    step = [BLOCK, 1] if len(loops) == 2 else [1]
    if not isinstance(abase, IntImm) or abase.value != 0 or acoef != step:
        return None
    oj = ocoef[0] if len(loops) == 2 else BLOCK
    if ocoef[-1] != 1 or bcoef[-1] != 1 or (len(loops) == 2 and bcoef[0] != 0):
        return None
    if not 0 < oj < 2**31:
        return None
    new: list[Any] = [body.buffer.data, args[1], args[2], bias.buffer.data, args[3], args[4]]
    new += [cast("int64", simplify(obase)), cast("int64", simplify(bbase)), ncols]
    new += [tir_const(oj, "int32"), *args[6:16]]
    new += [tir_const(kind, "int32"), tir_const(hi, "float32")]
    return Evaluate(call_extern("int32", DEPTHWISE_EPILOGUE_KERNEL_NAME, *new))
