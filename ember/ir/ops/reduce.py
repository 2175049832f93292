"""Reductions (pattern COMM_REDUCE): ``sum mean max min prod`` over ``axes``, ``argmax
argmin`` along one ``axis`` (``topk`` is in the scan family).

``axes`` are always explicit, sorted, unique and non-negative (``common.normalize_axes``);
an empty tuple reduces nothing. 16-bit floats accumulate in float32; integer sums and
products wrap in the input dtype, integer means truncate toward zero, like onnxruntime.
Reducing an empty extent gives the identity: 0 for sum, 1 for prod, -inf / +inf (or the
integer limits) for max / min.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import (
    ALL_DTYPES,
    NUMERIC_DTYPES,
    check_dtype,
    check_normalized_axes,
    compute_dtype,
    trunc_divide,
)
from ember.ir.types import TensorType, Type

_REDUCE_ATTRS = {
    "axes": Attr("ints", doc="reduced axes: sorted, unique, non-negative"),
    "keepdims": Attr("bool", False, "keep reduced axes as size-1 dimensions"),
}


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> tuple[int, ...]:
    """The shape after reducing ``axes`` of ``shape``."""
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_type(name: str, allowed: frozenset[str]) -> Callable[[Sequence[Type], Attrs], Type]:
    def rule(types: Sequence[Type], attrs: Attrs) -> Type:
        x = check_dtype(types[0], allowed, f"input of '{name}'")
        check_normalized_axes(attrs["axes"], x.ndim, name)
        return TensorType(reduced_shape(x.shape, attrs["axes"], attrs["keepdims"]), x.dtype)

    return rule


def _identity_of(name: str, dtype: np.dtype) -> Any:
    """The value of a reduction over nothing (only max/min need one; numpy knows the rest)."""
    if dtype.kind == "b":
        return name == "min"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if name == "max" else info.max
    return -np.inf if name == "max" else np.inf


def _reduce_ref(name: str) -> Callable[[Sequence[np.ndarray], Attrs], np.ndarray]:
    def ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = xs[0]
        axes = tuple(attrs["axes"])
        keep = bool(attrs["keepdims"])
        dtype = x.dtype
        work = compute_dtype(dtype.name)
        xw = np.asarray(x, work)
        with np.errstate(all="ignore"):
            if name in ("max", "min"):
                fn = np.max if name == "max" else np.min
                out = fn(xw, axis=axes, keepdims=keep, initial=_identity_of(name, work))
            elif name == "sum":
                out = np.sum(xw, axis=axes, keepdims=keep, dtype=work)
            elif name == "prod":
                out = np.prod(xw, axis=axes, keepdims=keep, dtype=work)
            else:
                count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
                total = np.sum(xw, axis=axes, keepdims=keep, dtype=work)
                if work.kind in "iu":
                    out = trunc_divide(total, np.asarray(count, work))
                else:
                    out = total / work.type(count) if count else total * np.nan
        return np.asarray(out).astype(dtype, copy=False)

    return ref


def _arg_type(name: str) -> Callable[[Sequence[Type], Attrs], Type]:
    def rule(types: Sequence[Type], attrs: Attrs) -> Type:
        x = check_dtype(types[0], NUMERIC_DTYPES, f"input of '{name}'")
        axis = attrs["axis"]
        check_normalized_axes((axis,), x.ndim, name)
        if x.shape[axis] == 0:
            raise IRError(f"'{name}' along axis {axis} of size 0 has no result")
        return TensorType(reduced_shape(x.shape, (axis,), attrs["keepdims"]), "int64")

    return rule


def _arg_ref(name: str) -> Callable[[Sequence[np.ndarray], Attrs], np.ndarray]:
    def ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = np.asarray(xs[0], compute_dtype(xs[0].dtype.name))
        axis = attrs["axis"]
        fn = np.argmax if name == "argmax" else np.argmin
        if attrs["select_last_index"]:
            idx = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis, keepdims=True)
        else:
            idx = fn(x, axis=axis, keepdims=True)
        if not attrs["keepdims"]:
            idx = np.squeeze(idx, axis=axis)
        return np.asarray(idx, dtype=np.int64)

    return ref


def _register_all() -> None:
    for name, allowed in (
        ("sum", NUMERIC_DTYPES),
        ("mean", NUMERIC_DTYPES),
        ("prod", NUMERIC_DTYPES),
        ("max", ALL_DTYPES),
        ("min", ALL_DTYPES),
    ):
        register_op(
            OpDef(
                name,
                1,
                _reduce_type(name, allowed),
                _reduce_ref(name),
                OpPattern.COMM_REDUCE,
                _REDUCE_ATTRS,
                doc=f"{name} over axes",
            )
        )
    for name in ("argmax", "argmin"):
        register_op(
            OpDef(
                name,
                1,
                _arg_type(name),
                _arg_ref(name),
                OpPattern.COMM_REDUCE,
                {
                    "axis": Attr("int", doc="non-negative axis"),
                    "keepdims": Attr("bool", False),
                    "select_last_index": Attr("bool", False, "on ties pick the last index"),
                },
                doc=f"int64 index of the {name[3:]} along axis (first one on ties by default)",
            )
        )


_register_all()
