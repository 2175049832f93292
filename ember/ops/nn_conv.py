"""Convolution and dense/matmul: the out-elementwise-fusable anchors of most fused groups.

``nn.conv`` is N-d (NC[D]HW data, (O, I/groups, k...) weights); padding is a separate
inlined stage so the reduction reads a bounds-checked value.
"""

from __future__ import annotations

from typing import Any

from ember import tir
from ember.ir.op import Attrs
from ember.ir.types import Type
from ember.ops.common import out_tensor_type, scalar, static_shape
from ember.ops.registry import ScheduleContext, register_compute, register_schedule
from ember.tir import PrimExpr, te


def pad_tensor(
    x: te.Tensor, before: tuple[int, ...], after: tuple[int, ...], value: float = 0.0
) -> te.Tensor:
    """``x`` zero-padded (or ``value``-padded) on its trailing len(before) axes."""
    shape = static_shape(x)
    nsp = len(before)
    if not any(before) and not any(after):
        return x
    lead = len(shape) - nsp
    padded = list(shape[:lead]) + [shape[lead + k] + before[k] + after[k] for k in range(nsp)]

    def body(*i: Any) -> PrimExpr:
        conds = []
        src = list(i[:lead])
        for k in range(nsp):
            pos = i[lead + k] - before[k]
            if before[k]:
                conds.append(pos >= 0)
            if after[k]:
                conds.append(pos < shape[lead + k])
            src.append(pos)
        if not conds:
            return x[tuple(src)]
        return tir.if_then_else(tir.logical_and(*conds), x[tuple(src)], scalar(value, x.dtype))

    return te.compute(padded, body, "pad")


@register_compute("nn.conv")
def conv(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Direct N-d grouped convolution."""
    x, w = inputs
    ty = out_tensor_type(out_type)
    wshape = static_shape(w)
    nsp = len(wshape) - 2
    strides = tuple(attrs["strides"]) or (1,) * nsp
    dilation = tuple(attrs["dilation"]) or (1,) * nsp
    padding = tuple(attrs["padding"]) or (0,) * (2 * nsp)
    groups = int(attrs["groups"])
    out_ch, in_per_group = wshape[0], wshape[1]
    out_per_group = out_ch // groups
    xp = pad_tensor(x, padding[:nsp], padding[nsp:])
    rc = te.reduce_axis(in_per_group, "rc")
    rk = [te.reduce_axis(wshape[2 + k], f"rk{k}") for k in range(nsp)]

    def body(n: Any, o: Any, *sp: Any) -> PrimExpr:
        chan = rc.var if groups == 1 else (o // out_per_group) * in_per_group + rc.var
        src = [sp[k] * strides[k] + rk[k].var * dilation[k] for k in range(nsp)]
        prod = xp[(n, chan, *src)] * w[(o, rc.var, *(r.var for r in rk))]
        return te.sum(prod, axis=[rc, *rk])

    return te.compute(ty.shape, body, "conv")


@register_compute("nn.dense")
def dense(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """x (..., K) times w (N, K) transposed."""
    x, w = inputs
    ty = out_tensor_type(out_type)
    k = static_shape(x)[-1]
    rk = te.reduce_axis(k, "rk")

    def body(*i: Any) -> PrimExpr:
        return te.sum(x[(*i[:-1], rk.var)] * w[i[-1], rk.var], axis=rk)

    return te.compute(ty.shape, body, "dense")


def _schedule_reduction_anchor(ctx: ScheduleContext) -> None:
    """Compute the anchor per output row inside the (parallel) epilogue loop nest."""
    anchor = ctx.op_outputs[0]
    out = ctx.group_outputs[0]
    sch = ctx.sch
    out_stage = sch[out]
    axes = list(out_stage.op.axis)
    attached = False
    if len(axes) >= 2:
        outer = out_stage.fuse(*axes[:-1])
        out_stage.parallel(outer)
        if not ctx.is_group_output and static_shape(anchor) == static_shape(out):
            sch[anchor].compute_at(out_stage, outer)
            attached = True
    if len(axes) >= 1 and not out_stage.op.reduce_axis:
        out_stage.vectorize(axes[-1])
    if not attached and not ctx.is_group_output:
        anchor_axes = list(sch[anchor].op.axis)
        if len(anchor_axes) >= 2:
            sch[anchor].parallel(sch[anchor].fuse(*anchor_axes[:-1]))


register_schedule("nn.conv")(_schedule_reduction_anchor)
register_schedule("nn.dense")(_schedule_reduction_anchor)
