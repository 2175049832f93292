"""Indexing ops (pattern INJECTIVE): ``take`` (ONNX Gather), ``gather_elements`` and
``trilu``.

Index tensors are int32 or int64; a negative index counts from the end of its axis, as in
ONNX. An index outside ``[-dim, dim)`` makes the reference raise IRError (it is undefined
behaviour in ONNX and compiled code does not check it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import ALL_DTYPES, INDEX_DTYPES, check_dtype, check_normalized_axes
from ember.ir.types import TensorType, Type


def _wrap_indices(indices: np.ndarray, dim: int, op: str) -> np.ndarray:
    """Indices mapped into ``[0, dim)``; IRError naming the first bad one."""
    idx = np.asarray(indices, dtype=np.int64)
    bad = (idx < -dim) | (idx >= dim)
    if np.any(bad):
        first = int(idx[bad].flat[0])
        raise IRError(f"'{op}': index {first} is out of range for an axis of size {dim}")
    return np.where(idx < 0, idx + dim, idx)


def _take_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = check_dtype(types[0], ALL_DTYPES, "data of 'take'")
    idx = check_dtype(types[1], INDEX_DTYPES, "indices of 'take'")
    axis = attrs["axis"]
    check_normalized_axes((axis,), data.ndim, "take")
    shape = data.shape[:axis] + idx.shape + data.shape[axis + 1 :]
    return TensorType(shape, data.dtype)


def _take_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, indices = xs
    axis = attrs["axis"]
    return np.take(data, _wrap_indices(indices, data.shape[axis], "take"), axis=axis)


def _gather_elements_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = check_dtype(types[0], ALL_DTYPES, "data of 'gather_elements'")
    idx = check_dtype(types[1], INDEX_DTYPES, "indices of 'gather_elements'")
    axis = attrs["axis"]
    check_normalized_axes((axis,), data.ndim, "gather_elements")
    if idx.ndim != data.ndim:
        raise IRError(f"indices of rank {idx.ndim} must have the data's rank {data.ndim}")
    for a, (i, d) in enumerate(zip(idx.shape, data.shape, strict=True)):
        if a != axis and i > d:
            raise IRError(f"indices dimension {a} is {i}, larger than the data's {d}")
    return TensorType(idx.shape, data.dtype)


def _gather_elements_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, indices = xs
    axis = attrs["axis"]
    idx = _wrap_indices(indices, data.shape[axis], "gather_elements")
    window = tuple(slice(0, n) if a != axis else slice(None) for a, n in enumerate(idx.shape))
    return np.take_along_axis(data[window], idx, axis=axis)


def _trilu_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], ALL_DTYPES, "input of 'trilu'")
    if x.ndim < 2:
        raise IRError(f"'trilu' needs a rank >= 2 input, got {x}")
    return x


def _trilu_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    rows, cols = x.shape[-2:]
    k = attrs["k"]
    keep = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    mask = keep >= k if attrs["upper"] else keep <= k
    return np.where(mask, x, np.zeros((), x.dtype))


def _register_all() -> None:
    register_op(
        OpDef(
            "take",
            2,
            _take_type,
            _take_ref,
            OpPattern.INJECTIVE,
            {"axis": Attr("int", 0, "non-negative axis of data")},
            doc="gather slices of data along axis at the given indices (ONNX Gather)",
        )
    )
    register_op(
        OpDef(
            "gather_elements",
            2,
            _gather_elements_type,
            _gather_elements_ref,
            OpPattern.INJECTIVE,
            {"axis": Attr("int", 0, "non-negative axis")},
            doc="out[..i..] = data[..indices[..i..]..] along axis (ONNX GatherElements)",
        )
    )
    register_op(
        OpDef(
            "trilu",
            1,
            _trilu_type,
            _trilu_ref,
            OpPattern.INJECTIVE,
            {"upper": Attr("bool", True), "k": Attr("int", 0, "diagonal offset")},
            doc="keep the upper (or lower) triangle of the last two axes, zero the rest",
        )
    )


_register_all()
