"""Attention helpers: ``tensor_scatter`` (pattern INJECTIVE), the KV-cache update of ONNX
TensorScatter.

``tensor_scatter(past, update, write_indices)`` is ``past`` with, for every batch row ``b``,
the ``update`` slices written along ``axis`` from position ``write_indices[b]`` on; with
``mode="circular"`` the position wraps modulo the cache length. ``write_indices`` is int32
or int64 of shape ``(batch,)``. Positions past the cache end in linear mode are dropped
(ONNX leaves them undefined).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import ALL_DTYPES, INDEX_DTYPES, check_data_dtype, check_dtype
from ember.ir.types import Type

#: the write modes of tensor_scatter.
SCATTER_MODES = ("linear", "circular")


def _tensor_scatter_type(types: Sequence[Type], attrs: Attrs) -> Type:
    past = check_dtype(types[0], ALL_DTYPES, "past cache of 'tensor_scatter'")
    update = check_dtype(types[1], ALL_DTYPES, "update of 'tensor_scatter'")
    check_data_dtype(past, update, "update of 'tensor_scatter'")
    idx = check_dtype(types[2], INDEX_DTYPES, "write_indices of 'tensor_scatter'")
    axis = attrs["axis"]
    if attrs["mode"] not in SCATTER_MODES:
        raise IRError(f"tensor_scatter mode '{attrs['mode']}' is not one of {SCATTER_MODES}")
    if past.ndim < 2 or not 1 <= axis < past.ndim:
        raise IRError(
            f"tensor_scatter: axis {axis} must be in [1, {past.ndim}) (axis 0 is the batch) "
            f"for a cache of shape {past.shape}"
        )
    bad = [
        d
        for d, (p, u) in enumerate(zip(past.shape, update.shape, strict=False))
        if (p != u if d != axis else u > p)
    ]
    if update.ndim != past.ndim or bad:
        raise IRError(
            f"tensor_scatter: update {update.shape} must match the cache {past.shape} except "
            f"along axis {axis}, where it may be shorter"
        )
    if idx.shape != (past.shape[0],):
        raise IRError(f"tensor_scatter: write_indices {idx.shape} must be ({past.shape[0]},)")
    return past


def _tensor_scatter_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    past, update, write = xs
    axis = attrs["axis"]
    size, count = past.shape[axis], update.shape[axis]
    out = past.copy()
    for b in range(past.shape[0]):
        for k in range(count):
            pos = int(write[b]) + k
            if attrs["mode"] == "circular":
                pos %= size
            if not 0 <= pos < size:
                continue
            dst = (b,) + (slice(None),) * (axis - 1) + (pos,)
            src = (b,) + (slice(None),) * (axis - 1) + (k,)
            out[dst] = update[src]
    return out


register_op(
    OpDef(
        "tensor_scatter",
        3,
        _tensor_scatter_type,
        _tensor_scatter_ref,
        OpPattern.INJECTIVE,
        {
            "axis": Attr("int", doc="the sequence axis (>= 1)"),
            "mode": Attr("str", "linear", "linear or circular (positions wrap)"),
        },
        doc="the cache with each batch row's update written from its write index on",
    )
)
