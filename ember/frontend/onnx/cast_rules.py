"""ONNX's conversion rules where they differ from the IR ``cast``, as graph IR.

The IR ``cast`` converts as ml_dtypes does (round to nearest even; an integer keeps its low
bits, so casts into int4/int2 wrap; float4_e2m1fn saturates at +-6). ONNX's Cast adds:

* into a float8 with ``saturate`` (the default): finite values beyond the format's largest
  and infinities become that largest, NaN stays NaN (a ``clip`` before the cast);
* into float8_e8m0fnu: ``round_mode`` (``up``, the default, ``down`` or ``nearest``) and
  ``saturate`` on the float32 exponent, the sign ignored, as onnx's
  ``numpy_helper.to_float8e8m0``: computed here on the float32 bits (``bitcast``, shifts,
  masks), then the exact power of two (or NaN) cast into the type.

Everything is elementwise, so it fuses into one compiled kernel with its neighbours.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ember.frontend.onnx.common import ttype
from ember.ir.expr import Constant, Expr, call
from ember.ir.ops.common import np_dtype

#: the float8 types ONNX's ``saturate`` clips into their range.
SATURATING: frozenset[str] = frozenset(
    {"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"}
)
#: the rounding modes of a cast into float8_e8m0fnu.
E8M0_ROUND_MODES: tuple[str, ...] = ("up", "down", "nearest")


def _dtype(x: Expr) -> str:
    return ttype(x).dtype


def _u32(value: int) -> Constant:
    return Constant(np.asarray(value, np.uint32))


def onnx_cast(
    x: Expr, dtype: str, saturate: bool = True, round_mode: str = "up", name: str = ""
) -> Expr:
    """``x`` cast to ``dtype`` by ONNX's rules (Cast, CastLike, the float QuantizeLinear)."""
    src = _dtype(x)
    if src == dtype:
        return x
    if dtype == "float8_e8m0fnu" and np_dtype(src).kind in "fV":
        return call("cast", e8m0_value(x, saturate, round_mode), dtype=dtype, name=name)
    if saturate and dtype in SATURATING and np_dtype(src).kind in "fV":
        top = float(ml_dtypes.finfo(np_dtype(dtype)).max)
        x = call("clip", x, a_min=-top, a_max=top, name=name)
    return call("cast", x, dtype=dtype, name=name)


def e8m0_value(x: Expr, saturate: bool, round_mode: str) -> Expr:
    """The float32 value (a power of two, or NaN) ONNX's cast of the float ``x`` into
    float8_e8m0fnu gives: the float32 exponent of ``|x|``, rounded by ``round_mode`` from
    the mantissa bits, kept at 254 (2**127) when ``saturate`` (else 255: NaN); NaN and
    infinities are NaN, zero is 2**-127."""
    if _dtype(x) != "float32":
        x = call("cast", x, dtype="float32")
    bits = call("bitcast", x, dtype="uint32")
    exp = call("bitwise_and", call("right_shift", bits, _u32(23)), _u32(0xFF))

    def has(mask: int) -> Expr:
        return call("not_equal", call("bitwise_and", bits, _u32(mask)), _u32(0))

    if round_mode == "up":
        up: Expr | None = has(0x7FFFFF)
    elif round_mode == "nearest":
        lsb = call("greater", exp, _u32(0))
        rest = call("logical_or", call("logical_or", has(0x200000), has(0x1FFFFF)), lsb)
        up = call("logical_and", has(0x400000), rest)
    else:
        up = None
    if up is not None and saturate:
        up = call("logical_and", up, call("not_equal", exp, _u32(254)))
    code = exp if up is None else call("add", exp, call("cast", up, dtype="uint32"))
    power = call("bitcast", call("left_shift", code, _u32(23)), dtype="float32")
    tiny = Constant(np.asarray(2.0**-127, np.float32))
    value = call("where", call("equal", code, _u32(0)), tiny, power)
    nan = Constant(np.asarray(np.nan, np.float32))
    return call("where", call("greater_equal", code, _u32(255)), nan, value)
