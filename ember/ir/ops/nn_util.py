"""Helpers shared by the nn op family: argument checks, spatial attribute expansion,
accumulation dtypes and padding for the numpy references."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attrs
from ember.ir.types import TensorType, Type, as_tensor_type
from ember.support.dtypes import is_float, is_half


def tensor_arg(types: Sequence[Type], index: int, what: str) -> TensorType:
    """The ``index``-th input type, which must be a tensor (``what`` names it in errors)."""
    return as_tensor_type(types[index], what)


def check_same_dtype(ref: TensorType, other: TensorType, what: str) -> None:
    """Raise IRError unless ``other`` has the dtype of ``ref``."""
    if other.dtype != ref.dtype:
        raise IRError(f"{what} has dtype {other.dtype} but data has dtype {ref.dtype}")


def check_float(ty: TensorType, what: str) -> None:
    """Raise IRError unless ``ty`` is a floating point tensor."""
    if not is_float(ty.dtype):
        raise IRError(f"{what} must be a floating point tensor, got {ty.dtype}")


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in ``[0, ndim)`` (negative counts from the end); raise if out of range."""
    if not -ndim <= axis < ndim:
        raise IRError(f"{what} {axis} is out of range for a tensor of rank {ndim}")
    return axis % ndim


def spatial(attrs: Attrs, name: str, nsp: int, default: int) -> tuple[int, ...]:
    """Attribute ``name`` as one value per spatial axis; an empty value means ``default``."""
    value = tuple(attrs[name])
    if not value:
        return (default,) * nsp
    if len(value) != nsp:
        raise IRError(f"attribute '{name}' has {len(value)} values, expected {nsp} (one per axis)")
    if name in ("strides", "dilation") and any(v < 1 for v in value):
        raise IRError(f"attribute '{name}' must be positive, got {list(value)}")
    return value


def padding(attrs: Attrs, nsp: int, name: str = "padding") -> tuple[tuple[int, int], ...]:
    """The ``(begin, end)`` padding of each spatial axis from ``begin..., end...``."""
    value = tuple(attrs[name])
    if not value:
        return ((0, 0),) * nsp
    if len(value) != 2 * nsp:
        raise IRError(
            f"attribute '{name}' has {len(value)} values, expected {2 * nsp} "
            f"(begin then end for each of {nsp} spatial axes)"
        )
    return tuple((value[i], value[i + nsp]) for i in range(nsp))


def acc_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a reference computes in: float32 for half types, else ``dtype`` itself."""
    npdt = np.dtype(dtype)
    return np.dtype(np.float32) if is_half(npdt.name) else npdt


def widen(x: np.ndarray) -> np.ndarray:
    """``x`` in its accumulation dtype (no copy when it already is)."""
    return x.astype(acc_dtype(x.dtype), copy=False)


def pad_or_crop(
    x: np.ndarray, pads: Sequence[tuple[int, int]], value: float | int = 0
) -> np.ndarray:
    """Pad the trailing ``len(pads)`` axes of ``x`` (negative amounts crop instead)."""
    lead = x.ndim - len(pads)
    crop = [slice(None)] * lead
    grow = [(0, 0)] * lead
    for size, (b, e) in zip(x.shape[lead:], pads, strict=True):
        crop.append(slice(max(-b, 0), size - max(-e, 0)))
        grow.append((max(b, 0), max(e, 0)))
    x = x[tuple(crop)]
    if any(g != (0, 0) for g in grow):
        x = np.pad(x, grow, mode="constant", constant_values=value)
    return x


def broadcast_shapes(a: Sequence[int], b: Sequence[int], what: str) -> tuple[int, ...]:
    """numpy broadcasting of two shapes; raise IRError naming ``what`` if they clash."""
    out: list[int] = []
    for i in range(max(len(a), len(b))):
        da = a[len(a) - 1 - i] if i < len(a) else 1
        db = b[len(b) - 1 - i] if i < len(b) else 1
        if da != db and 1 not in (da, db):
            raise IRError(f"{what}: shapes {list(a)} and {list(b)} do not broadcast")
        out.append(db if da == 1 else da)
    return tuple(reversed(out))
