"""Ops that run along one axis (pattern OPAQUE, like TVM): ``cumsum`` and ``cumprod``,
optionally exclusive (the current element left out) and/or in reverse order, and ``topk``
(two outputs: values and int64 indices, ties by index).

16-bit floats accumulate in float32; integers wrap in their own dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import NUMERIC_DTYPES, check_dtype, check_normalized_axes, compute_dtype
from ember.ir.types import TensorType, TupleType, Type


def _scan_type(name: str) -> Callable[[Sequence[Type], Attrs], Type]:
    def rule(types: Sequence[Type], attrs: Attrs) -> Type:
        x = check_dtype(types[0], NUMERIC_DTYPES, f"input of '{name}'")
        check_normalized_axes((attrs["axis"],), x.ndim, name)
        return x

    return rule


def _scan_ref(name: str) -> Callable[[Sequence[np.ndarray], Attrs], np.ndarray]:
    ufunc = np.add if name == "cumsum" else np.multiply

    def ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = xs[0]
        axis = attrs["axis"]
        work = np.asarray(x, compute_dtype(x.dtype.name))
        if attrs["reverse"]:
            work = np.flip(work, axis)
        with np.errstate(all="ignore"):
            out = ufunc.accumulate(work, axis=axis, dtype=work.dtype)
            if attrs["exclusive"]:
                identity = np.full_like(np.take(out, [0], axis=axis), ufunc.identity)
                rest = np.take(out, np.arange(out.shape[axis] - 1), axis=axis)
                out = np.concatenate([identity, rest], axis=axis)
        if attrs["reverse"]:
            out = np.flip(out, axis)
        return np.ascontiguousarray(out).astype(x.dtype, copy=False)

    return ref


def _topk_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], NUMERIC_DTYPES, "input of 'topk'")
    axis = attrs["axis"]
    check_normalized_axes((axis,), x.ndim, "topk")
    k = attrs["k"]
    if not 0 <= k <= x.shape[axis]:
        raise IRError(f"k={k} is outside [0, {x.shape[axis]}] for axis {axis} of {x}")
    shape = tuple(k if i == axis else d for i, d in enumerate(x.shape))
    return TupleType((TensorType(shape, x.dtype), TensorType(shape, "int64")))


def _topk_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, np.ndarray]:
    x = xs[0]
    axis, k = attrs["axis"], attrs["k"]
    n = x.shape[axis]
    work = np.asarray(x, compute_dtype(x.dtype.name))
    if attrs["largest"]:
        # descending, ties by ascending index: stable ascending sort of the reversed axis
        order = np.argsort(np.flip(work, axis), axis=axis, kind="stable")
        idx = n - 1 - np.flip(order, axis)
    else:
        idx = np.argsort(work, axis=axis, kind="stable")
    idx = np.take(idx, np.arange(k), axis=axis).astype(np.int64)
    return np.take_along_axis(x, idx, axis=axis), idx


def _register_all() -> None:
    for name, what in (("cumsum", "sum"), ("cumprod", "product")):
        register_op(
            OpDef(
                name,
                1,
                _scan_type(name),
                _scan_ref(name),
                OpPattern.OPAQUE,
                {
                    "axis": Attr("int", doc="non-negative axis"),
                    "exclusive": Attr("bool", False, "leave the current element out"),
                    "reverse": Attr("bool", False, "accumulate from the end"),
                },
                doc=f"running {what} along axis",
            )
        )
    register_op(
        OpDef(
            "topk",
            1,
            _topk_type,
            _topk_ref,
            OpPattern.OPAQUE,
            {
                "k": Attr("int"),
                "axis": Attr("int", doc="non-negative axis"),
                "largest": Attr("bool", True),
                "sorted": Attr("bool", True, "results are always sorted; kept for ONNX"),
            },
            doc="(values, int64 indices) of the k largest/smallest along axis, ties by index",
        )
    )


_register_all()
