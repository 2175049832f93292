"""Unary elementwise ops: activations, math functions, predicates, clip and cast.

Contract: each compute matches the numpy reference of the graph-IR op (ember/ir/ops/
elemwise.py) elementwise, same output dtype. 16-bit floats are computed in float32 and
rounded once, like the references (the C backend refuses them with a CompileError anyway).
NaN propagates wherever numpy propagates it: relu, clip and friends are written as
``select(x < lo, lo, x)`` so a NaN input falls through unchanged.

Unary ops are a table from the graph-IR op name to a function of one scalar expression
(and the attributes). Every math function is a loop-IR intrinsic (tan, the inverse and
hyperbolic trig functions included), so the C backend calls the float32 libm function
(vectorized through libmvec where available) and the interpreter needs no externs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ember import tir
from ember.ir.op import Attrs
from ember.ir.ops.common import np_dtype
from ember.ir.types import Type
from ember.ops.common import out_tensor_type, scalar
from ember.ops.registry import register_compute
from ember.support.dtypes import is_half
from ember.tir import PrimExpr, te
from ember.tir import dtype as dt

UnaryFn = Callable[[PrimExpr, Attrs], PrimExpr]

#: Python versions of the libm functions the ops reach through call_extern, for the
#: interpreter's ``externs``. Empty: every math function is an intrinsic now.
LIBM_EXTERNS: dict[str, Callable[..., Any]] = {}


def compute_dtype(dtype: str) -> str:
    """The dtype a float op computes in: float32 for 16-bit floats, else ``dtype``."""
    return "float32" if is_half(dtype) else dtype


def as_dtype(e: PrimExpr, dtype: str) -> PrimExpr:
    """``e`` as ``dtype``; a bool stored as uint8 (scalar constants) becomes ``e != 0``."""
    if e.dtype == dtype:
        return e
    if dtype == "bool":
        return tir.ne(e, tir.const(0, e.dtype))
    return tir.cast(dtype, e)


def is_nan(x: PrimExpr) -> PrimExpr:
    """True where the float ``x`` is NaN (``x != x``)."""
    return tir.ne(x, x)


def _const(x: PrimExpr, value: float) -> PrimExpr:
    return scalar(value, x.dtype)


def _relu(x: PrimExpr, attrs: Attrs) -> PrimExpr:
    return tir.if_then_else(x < _const(x, 0), _const(x, 0), x)


def _leaky_relu(x: PrimExpr, attrs: Attrs) -> PrimExpr:
    return tir.if_then_else(x >= _const(x, 0), x, x * _const(x, attrs["alpha"]))


def _elu(x: PrimExpr, attrs: Attrs) -> PrimExpr:
    return tir.if_then_else(x > _const(x, 0), x, _const(x, attrs["alpha"]) * tir.expm1(x))


def _selu(x: PrimExpr, attrs: Attrs) -> PrimExpr:
    inner = tir.if_then_else(x > _const(x, 0), x, _const(x, attrs["alpha"]) * tir.expm1(x))
    return _const(x, attrs["gamma"]) * inner


def clamp(x: PrimExpr, lo: PrimExpr | None, hi: PrimExpr | None) -> PrimExpr:
    """min(max(x, lo), hi) with NaN propagating like numpy's maximum/minimum."""
    out = x
    if lo is not None:
        out = tir.if_then_else(out < lo, lo, out)
    if hi is not None:
        out = tir.if_then_else(out > hi, hi, out)
    return out


def _hard_sigmoid(x: PrimExpr, attrs: Attrs) -> PrimExpr:
    y = _const(x, attrs["alpha"]) * x + _const(x, attrs["beta"])
    return clamp(y, _const(x, 0), _const(x, 1))


#: HardSwish's slope (ONNX: alpha = 1/6), multiplied: a division by 6 was a vector divide in
#: every conv epilogue (pp_lcnet's 1x1 16->32 at 112x112, one thread: 0.92x the time).
HARD_SWISH_SCALE = 1.0 / 6.0


def _hard_swish(x: PrimExpr, attrs: Attrs) -> PrimExpr:
    slope = x * _const(x, HARD_SWISH_SCALE) + _const(x, 0.5)
    return x * clamp(slope, _const(x, 0), _const(x, 1))


def _softplus(x: PrimExpr, attrs: Attrs) -> PrimExpr:
    # log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), no overflow
    return _relu(x, attrs) + tir.log1p(tir.exp(_const(x, 0) - tir.abs(x)))


def _gelu(x: PrimExpr, attrs: Attrs) -> PrimExpr:
    half = _const(x, 0.5)
    one = _const(x, 1)
    if attrs["approximate"] == "tanh":
        inner = _const(x, math.sqrt(2.0 / math.pi)) * (x + _const(x, 0.044715) * x * x * x)
        return half * x * (one + tir.tanh(inner))
    return half * x * (one + tir.erf(x * _const(x, 1.0 / math.sqrt(2.0))))


def _sign(x: PrimExpr, attrs: Attrs) -> PrimExpr:
    zero = _const(x, 0)
    if dt.is_uint(x.dtype):
        return tir.if_then_else(x > zero, _const(x, 1), zero)
    rest = x * zero if dt.is_float(x.dtype) else zero  # 0 stays 0, NaN stays NaN
    return tir.if_then_else(x > zero, _const(x, 1), tir.if_then_else(x < zero, _const(x, -1), rest))


def _bitwise_not(x: PrimExpr, attrs: Attrs) -> PrimExpr:
    if dt.is_uint(x.dtype):
        return tir.const((1 << dt.bits_of(x.dtype)) - 1, x.dtype) - x
    return _const(x, -1) - x  # two's complement: ~x == -x - 1


def _intrin(name: str) -> UnaryFn:
    fn = getattr(tir, name)
    return lambda x, attrs: fn(x)  # type: ignore[no-any-return]


#: float-only unary ops; the argument is already in the compute dtype.
FLOAT_UNARY: dict[str, UnaryFn] = {
    "sigmoid": _intrin("sigmoid"),
    "tanh": _intrin("tanh"),
    "softplus": _softplus,
    "softsign": lambda x, attrs: x / (_const(x, 1) + tir.abs(x)),
    "hard_swish": _hard_swish,
    "erf": _intrin("erf"),
    "sqrt": _intrin("sqrt"),
    "reciprocal": lambda x, attrs: _const(x, 1) / x,
    "exp": _intrin("exp"),
    "log": _intrin("log"),
    "floor": _intrin("floor"),
    "ceil": _intrin("ceil"),
    "round": _intrin("round"),  # rint: half to even
    "sin": _intrin("sin"),
    "cos": _intrin("cos"),
    "tan": _intrin("tan"),
    "asin": _intrin("asin"),
    "acos": _intrin("acos"),
    "atan": _intrin("atan"),
    "sinh": _intrin("sinh"),
    "cosh": _intrin("cosh"),
    "asinh": _intrin("asinh"),
    "acosh": _intrin("acosh"),
    "atanh": _intrin("atanh"),
    "leaky_relu": _leaky_relu,
    "elu": _elu,
    "selu": _selu,
    "hard_sigmoid": _hard_sigmoid,
    "gelu": _gelu,
}

#: unary ops on any numeric dtype, computed in the input dtype.
NUMERIC_UNARY: dict[str, UnaryFn] = {
    "relu": _relu,
    "negative": lambda x, attrs: _const(x, 0) - x,
    "abs": lambda x, attrs: x if dt.is_uint(x.dtype) else tir.abs(x),
    "sign": _sign,
    "bitwise_not": _bitwise_not,
}


def _elementwise(x: te.Tensor, out_type: Type, name: str, fn: Callable[[PrimExpr], PrimExpr]):
    ty = out_tensor_type(out_type)
    # "T_<op>" stage names (the C backend also reserves libm names such as tan)
    return te.compute(ty.shape, lambda *i: fn(x[i] if i else x[()]), f"T_{name}")


def _float_compute(name: str, fn: UnaryFn) -> None:
    def compute(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
        x = inputs[0]
        dtype = out_tensor_type(out_type).dtype
        work = compute_dtype(dtype)
        return _elementwise(
            x, out_type, name, lambda v: fn(as_dtype(v, dtype).astype(work), attrs).astype(dtype)
        )

    register_compute(name)(compute)


def _numeric_compute(name: str, fn: UnaryFn) -> None:
    def compute(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
        dtype = out_tensor_type(out_type).dtype
        work = compute_dtype(dtype)
        return _elementwise(
            inputs[0],
            out_type,
            name,
            lambda v: fn(as_dtype(v, dtype).astype(work), attrs).astype(dtype),
        )

    register_compute(name)(compute)


for _name, _fn in FLOAT_UNARY.items():
    _float_compute(_name, _fn)
for _nname, _nfn in NUMERIC_UNARY.items():
    _numeric_compute(_nname, _nfn)


@register_compute("logical_not")
def logical_not(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """not x on bools."""
    return _elementwise(
        inputs[0], out_type, "logical_not", lambda v: tir.logical_not(as_dtype(v, "bool"))
    )


@register_compute("isnan")
def isnan(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """True where x is NaN."""
    return _elementwise(inputs[0], out_type, "isnan", is_nan)


@register_compute("isinf")
def isinf(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """True where x is an infinity of a detected sign."""

    def fn(v: PrimExpr) -> PrimExpr:
        v = v.astype(compute_dtype(v.dtype))
        conds = []
        if attrs["detect_positive"]:
            conds.append(tir.eq(v, _const(v, math.inf)))
        if attrs["detect_negative"]:
            conds.append(tir.eq(v, _const(v, -math.inf)))
        return tir.logical_or(*conds) if conds else tir.const(False, "bool")

    return _elementwise(inputs[0], out_type, "isinf", fn)


def clip_bounds(attrs: Attrs, dtype: str) -> tuple[PrimExpr | None, PrimExpr | None]:
    """The clip bounds as constants of ``dtype`` (integer bounds rounded inward, clamped)."""
    lo, hi = attrs["a_min"], attrs["a_max"]
    if dt.is_integral(dtype):
        bits = dt.bits_of(dtype)
        low, high = ((-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dt.is_int(dtype)
                     else (0, (1 << bits) - 1))  # fmt: skip
        lo_c = None if lo is None else tir.const(min(max(math.ceil(lo), low), high), dtype)
        hi_c = None if hi is None else tir.const(min(max(math.floor(hi), low), high), dtype)
        return lo_c, hi_c
    work = compute_dtype(dtype)
    lo_c = None if lo is None else tir.const(_round_to(lo, dtype), work)
    hi_c = None if hi is None else tir.const(_round_to(hi, dtype), work)
    return lo_c, hi_c


def _round_to(value: float, dtype: str) -> float:
    """``value`` rounded to ``dtype`` (the reference casts its bounds to the input dtype)."""

    return float(np.asarray(value).astype(np_dtype(dtype)))


@register_compute("clip")
def clip(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """min(max(x, a_min), a_max), NaN propagating."""
    dtype = out_tensor_type(out_type).dtype
    lo, hi = clip_bounds(attrs, dtype)
    work = compute_dtype(dtype)
    return _elementwise(
        inputs[0], out_type, "clip", lambda v: clamp(v.astype(work), lo, hi).astype(dtype)
    )


@register_compute("cast")
def cast(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Convert to another dtype: floats to integers truncate, anything to bool is ``!= 0``."""
    x = inputs[0]
    target = out_tensor_type(out_type).dtype

    def fn(v: PrimExpr) -> PrimExpr:
        if dt.is_integral(target) and is_half(v.dtype):
            v = v.astype("float32")
        return as_dtype(v, target)

    return _elementwise(x, out_type, "cast", fn)
