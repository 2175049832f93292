"""Cumulative ops (pattern OPAQUE, like TVM): ``cumsum`` and ``cumprod`` along one axis,
optionally exclusive (the current element left out) and/or in reverse order.

16-bit floats accumulate in float32; integers wrap in their own dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import NUMERIC_DTYPES, check_dtype, check_normalized_axes, compute_dtype
from ember.ir.types import Type


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


_register_all()
