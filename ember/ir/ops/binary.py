"""Broadcasting binary ops (pattern BROADCAST): arithmetic, comparisons, logic, ``prelu``
and the ternary ``where``.

Inputs broadcast like numpy/ONNX (multidirectional). Arithmetic needs equal input dtypes
(``power`` alone allows a different exponent dtype and returns the base's); comparisons
return bool; logic ops take bool. Integer ``divide`` truncates toward zero like C and
onnxruntime, not toward -inf like numpy's ``//``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import (
    ALL_DTYPES,
    INT_DTYPES,
    NUMERIC_DTYPES,
    broadcast_shapes,
    check_dtype,
    check_same_dtype,
    compute_dtype,
    trunc_divide,
)
from ember.ir.types import TensorType, Type

Binary = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _binary_type(
    name: str, allowed: frozenset[str], out_dtype: str | None
) -> Callable[[Sequence[Type], Attrs], Type]:
    """Type rule: both inputs in ``allowed`` with one dtype, shapes broadcast."""

    def rule(types: Sequence[Type], attrs: Attrs) -> Type:
        a = check_dtype(types[0], allowed, f"lhs of '{name}'")
        b = check_dtype(types[1], allowed, f"rhs of '{name}'")
        dtype = check_same_dtype([a, b], f"both inputs of '{name}'")
        shape = broadcast_shapes(a.shape, b.shape)
        return TensorType(shape, out_dtype or dtype)

    return rule


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return trunc_divide(a, b)
    return np.divide(a, b)


def _arith_ref(fn: Binary) -> Callable[[Sequence[np.ndarray], Attrs], np.ndarray]:
    """Reference computing 16-bit floats in float32 and casting back to the input dtype."""

    def ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        dtype = xs[0].dtype
        work = compute_dtype(dtype.name)
        with np.errstate(all="ignore"):
            out = fn(np.asarray(xs[0], work), np.asarray(xs[1], work))
        return np.asarray(out).astype(dtype, copy=False)

    return ref


def _compare_ref(fn: Binary) -> Callable[[Sequence[np.ndarray], Attrs], np.ndarray]:
    def ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        work = compute_dtype(xs[0].dtype.name)
        return np.asarray(fn(np.asarray(xs[0], work), np.asarray(xs[1], work)), dtype=bool)

    return ref


def _logic_ref(fn: Binary) -> Callable[[Sequence[np.ndarray], Attrs], np.ndarray]:
    return lambda xs, attrs: np.asarray(fn(xs[0], xs[1]), dtype=bool)


_ARITH: dict[str, tuple[Binary, str]] = {
    "add": (np.add, "a + b"),
    "subtract": (np.subtract, "a - b"),
    "multiply": (np.multiply, "a * b"),
    "divide": (_divide, "a / b (integers truncate toward zero)"),
    "maximum": (np.maximum, "elementwise max (NaN propagates)"),
    "minimum": (np.minimum, "elementwise min (NaN propagates)"),
}

_COMPARE: dict[str, tuple[Binary, str]] = {
    "equal": (np.equal, "a == b"),
    "not_equal": (np.not_equal, "a != b"),
    "less": (np.less, "a < b"),
    "less_equal": (np.less_equal, "a <= b"),
    "greater": (np.greater, "a > b"),
    "greater_equal": (np.greater_equal, "a >= b"),
}

_LOGIC: dict[str, tuple[Binary, str]] = {
    "logical_and": (np.logical_and, "a and b"),
    "logical_or": (np.logical_or, "a or b"),
    "logical_xor": (np.logical_xor, "a xor b"),
}


_BITWISE: dict[str, tuple[Binary, str]] = {
    "bitwise_and": (np.bitwise_and, "a & b"),
    "bitwise_or": (np.bitwise_or, "a | b"),
    "bitwise_xor": (np.bitwise_xor, "a ^ b"),
    "left_shift": (np.left_shift, "a << b"),
    "right_shift": (np.right_shift, "a >> b (logical for unsigned)"),
}


def _mod_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    a, b = xs
    if a.dtype.kind in "iu":
        safe = np.where(b == 0, np.ones_like(b), b)
        out = np.fmod(a, safe) if attrs["fmod"] else np.mod(a, safe)
        return np.where(b == 0, np.zeros_like(out), out).astype(a.dtype)
    return _arith_ref(np.fmod if attrs["fmod"] else np.mod)(xs, attrs)


def _power_type(types: Sequence[Type], attrs: Attrs) -> Type:
    a = check_dtype(types[0], NUMERIC_DTYPES, "base of 'power'")
    b = check_dtype(types[1], NUMERIC_DTYPES, "exponent of 'power'")
    return TensorType(broadcast_shapes(a.shape, b.shape), a.dtype)


def _power_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    a, b = xs
    dtype = a.dtype
    with np.errstate(all="ignore"):
        if dtype.kind in "iu" and b.dtype.kind in "iu" and not np.any(b < 0):
            out = np.power(a, b.astype(dtype))
        elif dtype.kind in "iu":
            out = np.power(a.astype(np.float64), b.astype(np.float64))
        else:
            work = np.result_type(compute_dtype(dtype.name), compute_dtype(b.dtype.name))
            out = np.power(a.astype(work), b.astype(work))
    return np.asarray(out).astype(dtype, copy=False)


def _prelu_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], NUMERIC_DTYPES, "data of 'prelu'")
    s = check_dtype(types[1], NUMERIC_DTYPES, "slope of 'prelu'")
    check_same_dtype([x, s], "data and slope of 'prelu'")
    if broadcast_shapes(x.shape, s.shape) != x.shape:
        raise IRError(f"slope of shape {s.shape} must broadcast to the data shape {x.shape}")
    return x


def _prelu_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return _arith_ref(lambda x, s: np.where(x < 0, x * s, x))(xs, attrs)


def _where_type(types: Sequence[Type], attrs: Attrs) -> Type:
    c = check_dtype(types[0], frozenset({"bool"}), "condition of 'where'")
    x = check_dtype(types[1], ALL_DTYPES, "true branch of 'where'")
    y = check_dtype(types[2], ALL_DTYPES, "false branch of 'where'")
    dtype = check_same_dtype([x, y], "both branches of 'where'")
    return TensorType(broadcast_shapes(c.shape, x.shape, y.shape), dtype)


def _register_all() -> None:
    for name, (fn, doc) in _ARITH.items():
        rule = _binary_type(name, NUMERIC_DTYPES, None)
        register_op(OpDef(name, 2, rule, _arith_ref(fn), OpPattern.BROADCAST, doc=doc))
    for name, (fn, doc) in _COMPARE.items():
        rule = _binary_type(name, ALL_DTYPES, "bool")
        register_op(OpDef(name, 2, rule, _compare_ref(fn), OpPattern.BROADCAST, doc=doc))
    for name, (fn, doc) in _LOGIC.items():
        rule = _binary_type(name, frozenset({"bool"}), "bool")
        register_op(OpDef(name, 2, rule, _logic_ref(fn), OpPattern.BROADCAST, doc=doc))
    for name, (fn, doc) in _BITWISE.items():
        rule = _binary_type(name, INT_DTYPES, None)
        register_op(OpDef(name, 2, rule, _arith_ref(fn), OpPattern.BROADCAST, doc=doc))
    register_op(
        OpDef(
            "mod",
            2,
            _binary_type("mod", NUMERIC_DTYPES, None),
            _mod_ref,
            OpPattern.BROADCAST,
            {"fmod": Attr("bool", False, "C fmod (sign of a) instead of floor mod (sign of b)")},
            doc="remainder of a / b; integer division by zero gives 0",
        )
    )
    register_op(
        OpDef(
            "power",
            2,
            _power_type,
            _power_ref,
            OpPattern.BROADCAST,
            doc="a ** b; the exponent may have another dtype, the result has the base's",
        )
    )
    register_op(
        OpDef(
            "prelu",
            2,
            _prelu_type,
            _prelu_ref,
            OpPattern.BROADCAST,
            doc="x if x >= 0 else slope * x; slope broadcasts to x",
        )
    )
    register_op(
        OpDef(
            "where",
            3,
            _where_type,
            lambda xs, attrs: np.where(xs[0], xs[1], xs[2]),
            OpPattern.BROADCAST,
            doc="x where cond else y, all three broadcast",
        )
    )


_register_all()
