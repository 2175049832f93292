"""Indexing ops: ``take`` (ONNX Gather), ``gather_elements``, ``gather_nd``, ``one_hot`` and
``trilu`` (pattern INJECTIVE), and the scatters (pattern OPAQUE): ``scatter_elements`` and
``scatter_nd`` write ``updates`` into a copy of ``data`` at ``indices``, replacing or
combining with ``reduction`` (none, add, mul, max, min). With ``none``, repeated indices
keep the last update (ONNX leaves that case undefined).

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


def wrap_indices(indices: np.ndarray, dim: int, op: str) -> np.ndarray:
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
    return np.take(data, wrap_indices(indices, data.shape[axis], "take"), axis=axis)


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
    idx = wrap_indices(indices, data.shape[axis], "gather_elements")
    window = tuple(slice(0, n) if a != axis else slice(None) for a, n in enumerate(idx.shape))
    return np.take_along_axis(data[window], idx, axis=axis)


def _gather_nd_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = check_dtype(types[0], ALL_DTYPES, "data of 'gather_nd'")
    idx = check_dtype(types[1], INDEX_DTYPES, "indices of 'gather_nd'")
    b = attrs["batch_dims"]
    if idx.ndim < 1 or not 0 <= b < min(data.ndim, idx.ndim):
        raise IRError(f"batch_dims {b} needs data {data} and indices {idx} of larger rank")
    if data.shape[:b] != idx.shape[:b]:
        raise IRError(f"the first {b} dims of data {data.shape} and indices {idx.shape} differ")
    m = idx.shape[-1]
    if m > data.ndim - b:
        raise IRError(f"indices address {m} axes, but data {data} has {data.ndim - b} after batch")
    return TensorType(idx.shape[:-1] + data.shape[b + m :], data.dtype)


def _gather_nd_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, indices = xs
    b = attrs["batch_dims"]
    m = indices.shape[-1]
    batch = int(np.prod(data.shape[:b], dtype=np.int64))
    flat_data = data.reshape((batch,) + data.shape[b:])
    flat_idx = np.asarray(indices, np.int64).reshape((batch, -1, m))
    rows = []
    for i in range(batch):
        cols = [wrap_indices(flat_idx[i, :, j], data.shape[b + j], "gather_nd") for j in range(m)]
        rows.append(flat_data[i][tuple(cols)])
    out = np.stack(rows) if rows else np.zeros((0,), data.dtype)
    return out.reshape(indices.shape[:-1] + data.shape[b + m :])


def _one_hot_type(types: Sequence[Type], attrs: Attrs) -> Type:
    idx = check_dtype(types[0], INDEX_DTYPES, "indices of 'one_hot'")
    on = check_dtype(types[1], ALL_DTYPES, "on_value of 'one_hot'")
    off = check_dtype(types[2], ALL_DTYPES, "off_value of 'one_hot'")
    if on.shape != () or off.shape != () or on.dtype != off.dtype:
        raise IRError(f"on_value {on} and off_value {off} must be scalars of one dtype")
    axis = attrs["axis"]
    check_normalized_axes((axis,), idx.ndim + 1, "one_hot")
    shape = idx.shape[:axis] + (attrs["depth"],) + idx.shape[axis:]
    return TensorType(shape, on.dtype)


def _one_hot_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    indices, on, off = xs
    depth, axis = attrs["depth"], attrs["axis"]
    idx = np.asarray(indices, np.int64)
    idx = np.where(idx < 0, idx + depth, idx)
    classes = np.arange(depth).reshape((depth,) + (1,) * (idx.ndim - axis))
    hit = np.expand_dims(idx, axis) == classes
    return np.where(hit, on, off).astype(on.dtype)


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
            "gather_nd",
            2,
            _gather_nd_type,
            _gather_nd_ref,
            OpPattern.INJECTIVE,
            {"batch_dims": Attr("int", 0, "leading axes shared by data and indices")},
            doc="slices of data addressed by the last axis of indices (ONNX GatherND)",
        )
    )
    register_op(
        OpDef(
            "one_hot",
            3,
            _one_hot_type,
            _one_hot_ref,
            OpPattern.INJECTIVE,
            {"depth": Attr("int"), "axis": Attr("int", doc="non-negative axis of the output")},
            doc="on_value where the new axis equals the index (negatives wrap), else off_value",
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
