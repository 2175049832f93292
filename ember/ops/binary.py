"""Broadcasting binary ops: arithmetic, comparisons, logic, bitwise, mod, power, prelu and
the ternary ``where``.

Contract: operands broadcast like numpy; each compute matches the numpy reference of
ember/ir/ops/binary.py. Integer ``divide`` truncates toward zero and integer division or
modulo by zero gives 0 (never a trap); ``maximum``/``minimum`` propagate NaN like numpy;
16-bit floats are computed in float32. Bitwise ops, which the loop IR has no node for,
are built from arithmetic on the unsigned view of the operands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember import tir
from ember.ir.op import Attrs
from ember.ir.types import Type
from ember.ops.common import load_broadcast, out_tensor_type
from ember.ops.elemwise import as_dtype, compute_dtype, is_nan
from ember.ops.registry import register_compute
from ember.tir import PrimExpr, te
from ember.tir import dtype as dt

BinaryFn = Callable[[PrimExpr, PrimExpr], PrimExpr]


def _zero(x: PrimExpr) -> PrimExpr:
    return tir.const(0, x.dtype)


def maximum(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """max(a, b); for floats a NaN on either side gives NaN (numpy's maximum)."""
    if not dt.is_float(a.dtype):
        return tir.max(a, b)
    return tir.if_then_else(tir.logical_or(a < b, is_nan(b)), b, a)


def minimum(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """min(a, b); for floats a NaN on either side gives NaN (numpy's minimum)."""
    if not dt.is_float(a.dtype):
        return tir.min(a, b)
    return tir.if_then_else(tir.logical_or(a > b, is_nan(b)), b, a)


def _safe_divisor(b: PrimExpr) -> PrimExpr:
    return tir.if_then_else(tir.eq(b, _zero(b)), tir.const(1, b.dtype), b)


def divide(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """a / b; integers truncate toward zero and division by zero gives 0."""
    if dt.is_float(a.dtype):
        return a / b
    q = tir.truncdiv(a, _safe_divisor(b))
    return tir.if_then_else(tir.eq(b, _zero(b)), _zero(a), q)


def _int_mod(a: PrimExpr, b: PrimExpr, fmod: bool) -> PrimExpr:
    safe = _safe_divisor(b)
    if fmod or dt.is_uint(a.dtype):
        r = tir.truncmod(a, safe)
    else:  # the sign of b, like Python's %; written with C's % (no helper call)
        t = tir.truncmod(a, safe)
        fix = tir.logical_and(tir.ne(t, _zero(t)), tir.ne(t < _zero(t), safe < _zero(safe)))
        r = tir.if_then_else(fix, t + safe, t)
    return tir.if_then_else(tir.eq(b, _zero(b)), _zero(a), r)


def _unsigned(dtype: str) -> str:
    return "bool" if dtype == "bool" else f"uint{dt.bits_of(dtype)}"


def _bitwise(kind: str) -> BinaryFn:
    """and/or/xor of two integers, bit by bit on their unsigned views."""

    def fn(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        dtype = a.dtype
        udt = _unsigned(dtype)
        ua, ub = tir.cast(udt, a), tir.cast(udt, b)
        total: PrimExpr = tir.const(0, udt)
        for k in range(dt.bits_of(dtype)):
            p = tir.const(1 << k, udt)
            two = tir.const(2, udt)
            ba = tir.truncmod(tir.truncdiv(ua, p), two)
            bb = tir.truncmod(tir.truncdiv(ub, p), two)
            if kind == "and":
                bit = ba * bb
            elif kind == "or":
                bit = ba + bb - ba * bb
            else:
                bit = tir.truncmod(ba + bb, two)
            total = total + bit * p
        return tir.cast(dtype, total)

    return fn


def _pow2(b: PrimExpr, udt: str) -> PrimExpr:
    """2 ** b as an unsigned integer of ``udt`` (b < bits of udt)."""
    return tir.cast(
        udt, tir.cast("uint64", tir.pow(tir.const(2.0, "float64"), b.astype("float64")))
    )


def _shift(left: bool) -> BinaryFn:
    """a << b or a >> b like numpy: arithmetic right shifts of signed values, and a shift
    by a negative amount or by the bit width or more gives 0 (-1 for negative a >> b)."""

    def fn(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        bits = dt.bits_of(a.dtype)
        in_range = b < tir.const(bits, b.dtype)
        if not dt.is_uint(b.dtype):
            in_range = tir.logical_and(b >= _zero(b), in_range)
        small = tir.if_then_else(in_range, b, _zero(b))
        if not left and dt.is_int(a.dtype):  # floor(a / 2**b), the sign fills in
            fill = tir.if_then_else(a < _zero(a), tir.const(-1, a.dtype), _zero(a))
            fits = tir.logical_and(in_range, b < tir.const(bits - 1, b.dtype))
            wide = "int64"
            q = tir.cast(wide, a) // tir.cast(wide, _pow2(small, "uint64"))
            return tir.if_then_else(fits, tir.cast(a.dtype, q), fill)
        udt = _unsigned(a.dtype)
        ua = tir.cast(udt, a)
        p = _pow2(small, udt)
        shifted = ua * p if left else tir.truncdiv(ua, p)
        return tir.cast(a.dtype, tir.if_then_else(in_range, shifted, tir.const(0, udt)))

    return fn


def _prelu(x: PrimExpr, s: PrimExpr) -> PrimExpr:
    return tir.if_then_else(x < _zero(x), x * s, x)


#: arithmetic ops computed in the compute dtype of their inputs.
ARITH: dict[str, BinaryFn] = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": divide,
    "maximum": maximum,
    "minimum": minimum,
    "prelu": _prelu,
    "bitwise_and": _bitwise("and"),
    "bitwise_or": _bitwise("or"),
    "bitwise_xor": _bitwise("xor"),
    "left_shift": _shift(True),
    "right_shift": _shift(False),
}

#: comparisons, returning bool.
COMPARE: dict[str, BinaryFn] = {
    "equal": tir.eq,
    "not_equal": tir.ne,
    "less": lambda a, b: a < b,
    "less_equal": lambda a, b: a <= b,
    "greater": lambda a, b: a > b,
    "greater_equal": lambda a, b: a >= b,
}

#: logic ops on bools.
LOGIC: dict[str, BinaryFn] = {
    "logical_and": lambda a, b: tir.logical_and(a, b),
    "logical_or": lambda a, b: tir.logical_or(a, b),
    "logical_xor": tir.ne,
}


def _broadcast_compute(
    out_type: Type,
    inputs: list[te.Tensor],
    dtypes: list[str],
    body: Callable[[list[PrimExpr]], PrimExpr],
    name: str,
) -> te.Tensor:
    """out[i] = body(inputs at the broadcast of i, each converted to its dtype)."""
    ty = out_tensor_type(out_type)

    def fn(*i: Any) -> PrimExpr:
        vals = [as_dtype(load_broadcast(t, i), d) for t, d in zip(inputs, dtypes, strict=True)]
        return body(vals).astype(ty.dtype)

    return te.compute(ty.shape, fn, name)


def _arith_compute(name: str, fn: BinaryFn) -> None:
    def compute(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
        dtype = out_tensor_type(out_type).dtype
        work = compute_dtype(dtype)

        def body(v: list[PrimExpr]) -> PrimExpr:
            return fn(v[0].astype(work), v[1].astype(work))

        return _broadcast_compute(out_type, inputs, [dtype, dtype], body, name)

    register_compute(name)(compute)


def _compare_compute(name: str, fn: BinaryFn) -> None:
    def compute(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
        dtype = inputs[0].dtype if inputs[0].dtype == inputs[1].dtype else "bool"
        if dtype == "uint8" and "bool" in (inputs[0].dtype, inputs[1].dtype):
            dtype = "bool"
        work = compute_dtype(dtype)

        def body(v: list[PrimExpr]) -> PrimExpr:
            return fn(v[0].astype(work), v[1].astype(work))

        return _broadcast_compute(out_type, inputs, [dtype, dtype], body, name)

    register_compute(name)(compute)


def _logic_compute(name: str, fn: BinaryFn) -> None:
    def compute(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
        return _broadcast_compute(
            out_type, inputs, ["bool", "bool"], lambda v: fn(v[0], v[1]), name
        )

    register_compute(name)(compute)


for _name, _fn in ARITH.items():
    _arith_compute(_name, _fn)
for _cname, _cfn in COMPARE.items():
    _compare_compute(_cname, _cfn)
for _lname, _lfn in LOGIC.items():
    _logic_compute(_lname, _lfn)


@register_compute("mod")
def mod(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Remainder: C fmod (sign of a) with fmod=True, else the sign of b; integer x mod 0
    is 0."""
    dtype = out_tensor_type(out_type).dtype
    work = compute_dtype(dtype)

    def body(v: list[PrimExpr]) -> PrimExpr:
        a, b = v[0].astype(work), v[1].astype(work)
        if not dt.is_float(work):
            return _int_mod(a, b, bool(attrs["fmod"]))
        r = tir.truncmod(a, b)  # Mod of floats is C fmod: the sign of a
        if attrs["fmod"]:
            return r
        zero = _zero(r)
        fix = tir.logical_and(tir.ne(r, zero), tir.ne(r < zero, b < zero))
        return tir.if_then_else(fix, r + b, r)  # numpy's mod: the sign of b

    return _broadcast_compute(out_type, inputs, [dtype, dtype], body, "mod")


@register_compute("power")
def power(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """a ** b with the base's dtype; integer powers go through double precision."""
    dtype = out_tensor_type(out_type).dtype
    exp_dtype = inputs[1].dtype

    def body(v: list[PrimExpr]) -> PrimExpr:
        a, b = v
        if dt.is_float(dtype):
            work = compute_dtype(dtype)
            if dt.is_float(exp_dtype) and dt.bits_of(compute_dtype(exp_dtype)) > dt.bits_of(work):
                work = compute_dtype(exp_dtype)
            return tir.pow(a.astype(work), b.astype(work))
        return tir.pow(a.astype("float64"), b.astype("float64"))

    return _broadcast_compute(out_type, inputs, [dtype, exp_dtype], body, "power")


@register_compute("where")
def where(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """x where cond else y."""
    dtype = out_tensor_type(out_type).dtype
    return _broadcast_compute(
        out_type,
        inputs,
        ["bool", dtype, dtype],
        lambda v: tir.if_then_else(v[0], v[1], v[2]),
        "where",
    )
