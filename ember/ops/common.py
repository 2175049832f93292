"""Helpers shared by op implementations: broadcasting indices, static shapes, constants."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ember.errors import CompileError
from ember.ir.types import TensorType, Type
from ember.tir import PrimExpr, te
from ember.tir import const as tir_const


def static_shape(t: te.Tensor) -> tuple[int, ...]:
    """The shape of ``t`` as Python ints (ember's shapes are static)."""
    dims = []
    for d in t.shape:
        value = getattr(d, "value", None)
        if not isinstance(value, int):
            raise CompileError(f"tensor {t.name} has a non-constant dimension {d}")
        dims.append(value)
    return tuple(dims)


def out_tensor_type(ty: Type, index: int = 0) -> TensorType:
    """The ``index``-th tensor type of an op's result type."""
    if isinstance(ty, TensorType):
        return ty
    fields = getattr(ty, "fields", ())
    field = fields[index] if index < len(fields) else None
    if not isinstance(field, TensorType):
        raise CompileError(f"expected a tensor result, got {ty}")
    return field


def broadcast_index(
    t: te.Tensor, out_index: Sequence[Any], out_ndim: int | None = None
) -> tuple[Any, ...]:
    """The index into ``t`` for output index ``out_index`` under numpy broadcasting."""
    shape = static_shape(t)
    n = len(out_index) if out_ndim is None else out_ndim
    offset = n - len(shape)
    return tuple(
        tir_const(0, "int32") if dim == 1 else out_index[offset + k] for k, dim in enumerate(shape)
    )


def load_broadcast(t: te.Tensor, out_index: Sequence[Any]) -> PrimExpr:
    """``t`` read at the broadcast of ``out_index`` (a scalar tensor reads its only element)."""
    idx = broadcast_index(t, out_index)
    return t[idx] if idx else t[()]


def scalar(value: float | int | bool, dtype: str) -> PrimExpr:
    """A typed scalar constant."""
    return tir_const(value, dtype)


def unflatten(flat: PrimExpr, shape: Sequence[int]) -> list[PrimExpr]:
    """The multi-index (int32) of the row-major linear offset ``flat`` (non-negative)."""
    out: list[PrimExpr] = []
    rest = flat
    for k in range(len(shape) - 1, -1, -1):
        d = shape[k]
        if d == 1:
            out.append(tir_const(0, "int32"))
            continue
        out.append((rest % d).astype("int32") if k > 0 else rest.astype("int32"))
        rest = rest // d
    return out[::-1]
