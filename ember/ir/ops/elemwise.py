"""Unary elementwise ops (pattern ELEMWISE): activations, math functions, predicates, cast.

Every op keeps the input shape. Float-only ops reject integer inputs in their type rule;
references compute 16-bit floats in float32 and round once (see ``common.float_map``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import (
    ALL_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    NUMERIC_DTYPES,
    SIGNED_DTYPES,
    check_dtype,
    float_map,
    np_dtype,
)
from ember.ir.types import TensorType, Type, canonical_dtype

Fn = Callable[[np.ndarray, Attrs], np.ndarray]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_erf_vec = np.frompyfunc(math.erf, 1, 1)


def _erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise, in double precision (numpy has no ``erf``)."""
    return np.asarray(_erf_vec(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """Overflow-free logistic function."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype)


def _gelu(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    if attrs["approximate"] == "tanh":
        return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
    return (0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))).astype(x.dtype)


def _elu(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    return np.where(x > 0, x, attrs["alpha"] * np.expm1(x)).astype(x.dtype)


def _selu(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    inner = np.where(x > 0, x, attrs["alpha"] * np.expm1(x))
    return (attrs["gamma"] * inner).astype(x.dtype)


def _hard_sigmoid(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    return np.clip(attrs["alpha"] * x + attrs["beta"], 0.0, 1.0).astype(x.dtype)


def _hard_swish(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x / 6.0 + 0.5, 0.0, 1.0)


def _leaky_relu(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    return np.where(x >= 0, x, x * attrs["alpha"]).astype(x.dtype)


#: float-only unary ops without attributes: name -> (function, doc).
_FLOAT_UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "sigmoid": (_sigmoid, "1 / (1 + exp(-x))"),
    "tanh": (np.tanh, "hyperbolic tangent"),
    "softplus": (lambda x: np.logaddexp(0.0, x), "log(1 + exp(x))"),
    "softsign": (lambda x: x / (1.0 + np.abs(x)), "x / (1 + |x|)"),
    "hard_swish": (_hard_swish, "x * max(0, min(1, x / 6 + 0.5))"),
    "erf": (_erf, "the Gauss error function"),
    "sqrt": (np.sqrt, "square root"),
    "reciprocal": (np.reciprocal, "1 / x"),
    "exp": (np.exp, "e ** x"),
    "log": (np.log, "natural logarithm"),
    "floor": (np.floor, "round toward -inf"),
    "ceil": (np.ceil, "round toward +inf"),
    "round": (np.rint, "round half to even"),
    "sin": (np.sin, "sine"),
    "cos": (np.cos, "cosine"),
    "tan": (np.tan, "tangent"),
    "asin": (np.arcsin, "inverse sine"),
    "acos": (np.arccos, "inverse cosine"),
    "atan": (np.arctan, "inverse tangent"),
    "sinh": (np.sinh, "hyperbolic sine"),
    "cosh": (np.cosh, "hyperbolic cosine"),
    "asinh": (np.arcsinh, "inverse hyperbolic sine"),
    "acosh": (np.arccosh, "inverse hyperbolic cosine"),
    "atanh": (np.arctanh, "inverse hyperbolic tangent"),
}

#: float-only unary ops with attributes: name -> (function, attribute schema, doc).
_FLOAT_UNARY_ATTRS: dict[str, tuple[Fn, dict[str, Attr], str]] = {
    "leaky_relu": (_leaky_relu, {"alpha": Attr("float", 0.01)}, "x if x >= 0 else alpha * x"),
    "elu": (_elu, {"alpha": Attr("float", 1.0)}, "x if x > 0 else alpha * (exp(x) - 1)"),
    "selu": (
        _selu,
        {
            "alpha": Attr("float", 1.67326319217681884765625),
            "gamma": Attr("float", 1.05070102214813232421875),
        },
        "gamma * (x if x > 0 else alpha * (exp(x) - 1))",
    ),
    "hard_sigmoid": (
        _hard_sigmoid,
        {"alpha": Attr("float", 0.2), "beta": Attr("float", 0.5)},
        "max(0, min(1, alpha * x + beta))",
    ),
    "gelu": (
        _gelu,
        {"approximate": Attr("str", "none", "'none' (erf) or 'tanh'")},
        "Gaussian error linear unit",
    ),
}

#: unary ops on numbers, same dtype out: name -> (function, allowed dtypes, doc).
_NUMERIC_UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], frozenset[str], str]] = {
    "relu": (lambda x: np.maximum(x, x.dtype.type(0)), NUMERIC_DTYPES, "max(x, 0)"),
    "negative": (np.negative, SIGNED_DTYPES | FLOAT_DTYPES, "-x"),
    "abs": (np.abs, NUMERIC_DTYPES, "|x|"),
    "sign": (np.sign, NUMERIC_DTYPES, "-1, 0 or 1 by the sign of x"),
    "bitwise_not": (np.invert, INT_DTYPES, "~x"),
}


def _same_type(name: str, allowed: frozenset[str]) -> Callable[[Sequence[Type], Attrs], Type]:
    def rule(types: Sequence[Type], attrs: Attrs) -> Type:
        return check_dtype(types[0], allowed, f"input of '{name}'")

    return rule


def _bool_type(name: str, allowed: frozenset[str]) -> Callable[[Sequence[Type], Attrs], Type]:
    def rule(types: Sequence[Type], attrs: Attrs) -> Type:
        tt = check_dtype(types[0], allowed, f"input of '{name}'")
        return TensorType(tt.shape, "bool")

    return rule


def _float_ref(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    return lambda xs, attrs: float_map(fn, xs[0])


def _float_attr_ref(fn: Fn) -> Callable[..., np.ndarray]:
    return lambda xs, attrs: float_map(lambda x: fn(x, attrs), xs[0])


def _plain_ref(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(fn(xs[0])).astype(xs[0].dtype, copy=False)

    return ref


def _clip_bound(value: float | None, dtype: np.dtype, low: bool) -> object:
    """A clip bound as a scalar of ``dtype`` (integer bounds clamped to the dtype range)."""
    if value is None:
        return None
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        bound = math.ceil(value) if low else math.floor(value)
        return dtype.type(min(max(bound, int(info.min)), int(info.max)))
    return value


def _clip_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    lo = _clip_bound(attrs["a_min"], x.dtype, True)
    hi = _clip_bound(attrs["a_max"], x.dtype, False)
    out = x
    if lo is not None:
        out = np.maximum(out, np.asarray(lo).astype(x.dtype))
    if hi is not None:
        out = np.minimum(out, np.asarray(hi).astype(x.dtype))
    return np.asarray(out).astype(x.dtype, copy=False)


def _isinf_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = np.asarray(xs[0], dtype=np.float32) if xs[0].dtype.itemsize == 2 else xs[0]
    pos = np.isposinf(x) if attrs["detect_positive"] else np.zeros(x.shape, bool)
    neg = np.isneginf(x) if attrs["detect_negative"] else np.zeros(x.shape, bool)
    return pos | neg


def _cast_type(types: Sequence[Type], attrs: Attrs) -> Type:
    tt = check_dtype(types[0], ALL_DTYPES, "input of 'cast'")
    return TensorType(tt.shape, canonical_dtype(attrs["dtype"]))


def _cast_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    target = np_dtype(attrs["dtype"])
    with np.errstate(all="ignore"):  # out-of-range values are undefined in ONNX
        if x.dtype.kind in "fV" and target.kind in "iu":
            return np.trunc(np.asarray(x, np.float64)).astype(target)
        return x.astype(target)


def _register_all() -> None:
    for name, (fn, doc) in _FLOAT_UNARY.items():
        register_op(
            OpDef(
                name, 1, _same_type(name, FLOAT_DTYPES), _float_ref(fn), OpPattern.ELEMWISE, doc=doc
            )
        )
    for name, (afn, schema, doc) in _FLOAT_UNARY_ATTRS.items():
        rule = _same_type(name, FLOAT_DTYPES)
        register_op(OpDef(name, 1, rule, _float_attr_ref(afn), OpPattern.ELEMWISE, schema, doc))
    for name, (nfn, allowed, doc) in _NUMERIC_UNARY.items():
        register_op(
            OpDef(name, 1, _same_type(name, allowed), _plain_ref(nfn), OpPattern.ELEMWISE, doc=doc)
        )
    register_op(
        OpDef(
            "logical_not",
            1,
            _same_type("logical_not", frozenset({"bool"})),
            lambda xs, attrs: np.logical_not(xs[0]),
            OpPattern.ELEMWISE,
            doc="boolean negation",
        )
    )
    register_op(
        OpDef(
            "isnan",
            1,
            _bool_type("isnan", FLOAT_DTYPES),
            lambda xs, attrs: np.isnan(np.asarray(xs[0], np.float32)),
            OpPattern.ELEMWISE,
            doc="true where x is NaN",
        )
    )
    register_op(
        OpDef(
            "isinf",
            1,
            _bool_type("isinf", FLOAT_DTYPES),
            _isinf_ref,
            OpPattern.ELEMWISE,
            {"detect_positive": Attr("bool", True), "detect_negative": Attr("bool", True)},
            doc="true where x is an infinity of a detected sign",
        )
    )
    register_op(
        OpDef(
            "clip",
            1,
            _same_type("clip", NUMERIC_DTYPES),
            _clip_ref,
            OpPattern.ELEMWISE,
            {
                "a_min": Attr("float", None, "lower bound, None for none"),
                "a_max": Attr("float", None, "upper bound, None for none"),
            },
            doc="min(max(x, a_min), a_max); a_min > a_max gives a_max",
        )
    )
    register_op(
        OpDef(
            "cast",
            1,
            _cast_type,
            _cast_ref,
            OpPattern.ELEMWISE,
            {"dtype": Attr("dtype", doc="target dtype, canonical name")},
            doc="convert to another dtype (floats to integers truncate toward zero)",
        )
    )


_register_all()
