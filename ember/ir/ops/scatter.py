"""Scatter ops (pattern OPAQUE): ``scatter_elements`` and ``scatter_nd`` write ``updates``
into a copy of ``data`` at ``indices``, replacing or combining with ``reduction``
(none, add, mul, max, min). With ``none``, repeated indices keep the last update (ONNX
leaves that case undefined).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import ALL_DTYPES, INDEX_DTYPES, check_dtype, check_normalized_axes
from ember.ir.ops.index import wrap_indices
from ember.ir.types import Type

REDUCTIONS = ("none", "add", "mul", "max", "min")
_UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _check_reduction(attrs: Attrs) -> None:
    if attrs["reduction"] not in REDUCTIONS:
        raise IRError(
            f"reduction {attrs['reduction']!r} is unknown; known: {', '.join(REDUCTIONS)}"
        )


def _scatter_elements_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = check_dtype(types[0], ALL_DTYPES, "data of 'scatter_elements'")
    idx = check_dtype(types[1], INDEX_DTYPES, "indices of 'scatter_elements'")
    upd = check_dtype(types[2], ALL_DTYPES, "updates of 'scatter_elements'")
    _check_reduction(attrs)
    check_normalized_axes((attrs["axis"],), data.ndim, "scatter_elements")
    if upd.shape != idx.shape or upd.dtype != data.dtype or idx.ndim != data.ndim:
        raise IRError(
            f"updates {upd} must have the indices' shape {idx.shape}, the data's dtype "
            f"{data.dtype}, and the data's rank {data.ndim}"
        )
    return data


def _apply(out: np.ndarray, where: tuple[np.ndarray, ...], upd: np.ndarray, how: str) -> None:
    """Write ``upd`` into ``out`` at ``where`` (advanced index), combining with ``how``."""
    if how == "none":
        out[where] = upd
    else:
        _UFUNC[how].at(out, where, upd)


def _scatter_elements_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, indices, updates = xs
    axis = attrs["axis"]
    out = data.copy()
    idx = wrap_indices(indices, data.shape[axis], "scatter_elements")
    grid: list[np.ndarray] = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    _apply(out, tuple(np.broadcast_arrays(*grid)), updates, attrs["reduction"])
    return out


def _scatter_nd_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = check_dtype(types[0], ALL_DTYPES, "data of 'scatter_nd'")
    idx = check_dtype(types[1], INDEX_DTYPES, "indices of 'scatter_nd'")
    upd = check_dtype(types[2], ALL_DTYPES, "updates of 'scatter_nd'")
    _check_reduction(attrs)
    if idx.ndim < 1 or idx.shape[-1] > data.ndim:
        raise IRError(f"indices {idx} must address at most the {data.ndim} axes of the data")
    want = idx.shape[:-1] + data.shape[idx.shape[-1] :]
    if upd.shape != want or upd.dtype != data.dtype:
        raise IRError(f"updates {upd} must have shape {want} and dtype {data.dtype}")
    return data


def _scatter_nd_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, indices, updates = xs
    out = data.copy()
    k = indices.shape[-1]
    idx = np.asarray(indices, np.int64).reshape(-1, k)
    cols = tuple(wrap_indices(idx[:, j], data.shape[j], "scatter_nd") for j in range(k))
    upd = updates.reshape((idx.shape[0],) + data.shape[k:])
    _apply(out, cols, upd, attrs["reduction"])
    return out


def _register_all() -> None:
    reduction = Attr("str", "none", "none, add, mul, max or min")
    register_op(
        OpDef(
            "scatter_elements",
            3,
            _scatter_elements_type,
            _scatter_elements_ref,
            OpPattern.OPAQUE,
            {"axis": Attr("int", 0, "non-negative axis"), "reduction": reduction},
            doc="out = data; out[..indices[i]..] = updates[i] along axis (ONNX ScatterElements)",
        )
    )
    register_op(
        OpDef(
            "scatter_nd",
            3,
            _scatter_nd_type,
            _scatter_nd_ref,
            OpPattern.OPAQUE,
            {"reduction": reduction},
            doc="out = data; out[indices[i]] = updates[i] for index tuples (ONNX ScatterND)",
        )
    )


_register_all()
