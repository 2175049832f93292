"""Attention helper computes: tensor_scatter (the KV-cache update of ONNX TensorScatter).

Contract: matches the numpy reference of ember/ir/ops/attention.py. Written from the
output's side: each cache position finds the update slot that lands on it (at most one,
since the update is no longer than the cache), else keeps the past value.
"""

from __future__ import annotations

from typing import Any

from ember import tir
from ember.ir.op import Attrs
from ember.ir.types import Type
from ember.ops.common import out_tensor_type, static_shape
from ember.ops.registry import register_compute
from ember.tir import PrimExpr, te


@register_compute("tensor_scatter")
def tensor_scatter(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """past with update written along axis from write_indices[b] on (circular: wrapping)."""
    past, update, write = inputs
    axis = attrs["axis"]
    size, count = static_shape(past)[axis], static_shape(update)[axis]
    ty = out_tensor_type(out_type)
    zero = tir.const(0, "int64")
    if count == 0:
        return te.compute(ty.shape, lambda *i: past[i], "tensor_scatter")

    def body(*i: Any) -> PrimExpr:
        pos = i[axis].astype("int64")
        slot = pos - write[i[0]].astype("int64")
        if attrs["mode"] == "circular":
            slot = tir.FloorMod(slot, tir.const(size, "int64"))
        hit = tir.logical_and(slot >= zero, slot < tir.const(count, "int64"))
        safe = tir.max(tir.min(slot, tir.const(count - 1, "int64")), zero).astype("int32")
        src = (*i[:axis], safe, *i[axis + 1 :])
        return tir.if_then_else(hit, update[src], past[i])

    return te.compute(ty.shape, body, "tensor_scatter")
