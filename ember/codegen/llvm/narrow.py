"""Narrow floats in LLVM IR (float16, bfloat16, the float8s, float4): stored as bits,
computed in float32, converted exactly as ``ember.codegen.c.half`` does.

A buffer of ``float16``/``bfloat16`` holds ``i16`` bit patterns, one of a float8 type or
``float4_e2m1fn`` one ``i8`` per element (float4's code in the low 4 bits). A *value* of
one of these dtypes is an LLVM ``float`` exactly representable in the narrow type: a load
widens, an arithmetic result is rounded back (to the narrow type and back to float32), a
store writes the bits. The conversions are ``alwaysinline`` internal functions written
here with integer operations, compares and selects only (no ``half``/``bfloat`` type, so
no soft-float libcalls on any target, and no branches, so the loop vectorizer widens them
like any other elementwise code), one per element type and vector width. Each is the
portable C helper of ``ember.codegen.c.half`` transcribed step for step: round to
nearest even, NaN payloads and signs, infinities, subnormals and overflow give the same
bits as the C back end (and as numpy/ml_dtypes).
"""

from __future__ import annotations

from collections.abc import Callable

from ember.codegen.c.half import FLOAT8, HALF_TAGS, Float8
from ember.codegen.llvm.ir_text import FunctionWriter, ModuleContext, Val, float_literal, splat
from ember.codegen.llvm.mathfn import intrinsic
from ember.support.dtypes import numpy_dtype
from ember.tir import dtype as dt

#: the storage width in bits of each narrow float dtype.
STORAGE_BITS: dict[str, int] = {
    name: 16 if name in ("float16", "bfloat16") else 8 for name in HALF_TAGS
}


def is_narrow(dtype: str) -> bool:
    """True for the narrow float dtypes (and their vectors)."""
    return dt.element_of(dtype) in HALF_TAGS


def storage_type(dtype: str) -> str:
    """The LLVM integer type of one stored element (``i16`` or ``i8``)."""
    return f"i{STORAGE_BITS[dt.element_of(dtype)]}"


def narrow_value(dtype: str, value: float) -> float:
    """``value`` rounded to the narrow ``dtype`` (a constant's value, as the C back end)."""
    return float(numpy_dtype(dt.element_of(dtype)).type(value))


class _Fn:
    """Builds one conversion function for ``lanes`` lanes (1: scalars)."""

    def __init__(self, ctx: ModuleContext, lanes: int) -> None:
        self.w = FunctionWriter(ctx)
        self.w.lines.append("entry:")
        self.lanes = lanes

    def t(self, elem: str) -> str:
        """The type ``elem`` at the function's width."""
        return elem if self.lanes == 1 else f"<{self.lanes} x {elem}>"

    def k(self, elem: str, value: int | float) -> str:
        """A constant of ``elem`` at the function's width."""
        lit = float_literal(float(value), "float32") if elem == "float" else str(int(value))
        if elem == "double":
            lit = float_literal(float(value), "float64")
        return lit if self.lanes == 1 else splat(self.t(elem), lit)

    def op(self, elem: str, text: str, a: str, b: str) -> str:
        """A binary instruction on two ``elem`` operands."""
        return self.w.inst(self.t(elem), f"{text} {self.t(elem)} {a}, {b}").ref

    def i(self, text: str, a: str, b: int | str) -> str:
        """An i32 binary op; an int ``b`` is a constant."""
        return self.op("i32", text, a, self.k("i32", b) if isinstance(b, int) else b)

    def cmp(self, pred: str, a: str, b: int | str) -> str:
        """An unsigned/equality i32 compare (``icmp``)."""
        rhs = self.k("i32", b) if isinstance(b, int) else b
        return self.w.inst(self.t("i1"), f"icmp {pred} {self.t('i32')} {a}, {rhs}").ref

    def fcmp(self, pred: str, elem: str, a: str, b: str) -> str:
        """A float comparison of two ``elem`` (float or double) operands."""
        return self.w.inst(self.t("i1"), f"fcmp {pred} {self.t(elem)} {a}, {b}").ref

    def sel(self, elem: str, c: str, a: int | float | str, b: int | float | str) -> str:
        """``c ? a : b`` of ``elem``; numbers are constants."""
        av = a if isinstance(a, str) else self.k(elem, a)
        bv = b if isinstance(b, str) else self.k(elem, b)
        ty = self.t(elem)
        return self.w.inst(ty, f"select {self.t('i1')} {c}, {ty} {av}, {ty} {bv}").ref

    def conv(self, text: str, a: str, src: str, dst: str) -> str:
        """A conversion instruction (``zext``, ``bitcast`` ...) from ``src`` to ``dst``."""
        return self.w.inst(self.t(dst), f"{text} {self.t(src)} {a} to {self.t(dst)}").ref

    def bits(self, f: str) -> str:
        """The i32 bits of a float."""
        return self.conv("bitcast", f, "float", "i32")

    def from_bits(self, x: str) -> str:
        """The float of i32 bits."""
        return self.conv("bitcast", x, "i32", "float")

    def finish(self, name: str, ret: str, arg: str, result: str) -> str:
        """The definition text of ``ret @name(arg %x)``."""
        self.w.op(f"ret {self.t(ret)} {result}")
        return (
            f"define internal {self.t(ret)} @{name}({self.t(arg)} %x) alwaysinline nounwind "
            f"{{\n{self.w.body()}\n}}"
        )


def _suffix(lanes: int) -> str:
    return "" if lanes == 1 else f"_v{lanes}"


# -- narrow -> float32 ---------------------------------------------------------------------
def _f16_to_f32(b: _Fn) -> str:
    h = b.conv("zext", "%x", "i16", "i32")
    sign = b.i("shl", b.i("and", h, 0x8000), 16)
    em = b.i("and", h, 0x7FFF)
    special = b.i("or", b.i("or", sign, 0x7F800000), b.i("shl", b.i("and", em, 0x3FF), 13))
    normal = b.i("or", sign, b.i("shl", b.i("add", em, 0x1C000), 13))
    scaled = b.op("float", "fmul", b.conv("uitofp", em, "i32", "float"), b.k("float", 2.0**-24))
    sub = b.i("or", sign, b.bits(scaled))
    low = b.sel("i32", b.cmp("uge", em, 0x400), normal, sub)
    return b.from_bits(b.sel("i32", b.cmp("uge", em, 0x7C00), special, low))


def _bf16_to_f32(b: _Fn) -> str:
    return b.from_bits(b.i("shl", b.conv("zext", "%x", "i16", "i32"), 16))


def _f8_to_f32(b: _Fn, f: Float8) -> str:
    h = b.conv("zext", "%x", "i8", "i32")
    e_max, m_mask, shift = (1 << (7 - f.mbits)) - 1, (1 << f.mbits) - 1, 23 - f.mbits
    sign = b.i("shl", b.i("and", h, 0x80), 24)
    e = b.i("and", b.i("lshr", h, f.mbits), e_max)
    m = b.i("and", h, m_mask)
    normal = b.i("or", b.i("shl", b.i("add", e, 127 - f.bias), 23), b.i("shl", m, shift))
    step = b.op(
        "float",
        "fmul",
        b.conv("uitofp", m, "i32", "float"),
        b.k("float", 2.0 ** (1 - f.bias - f.mbits)),
    )
    mag = b.sel("i32", b.cmp("ne", e, 0), normal, b.bits(step))
    out = b.i("or", mag, sign)
    nan = b.i("or", sign, 0x7FC00000)  # C's NAN / -NAN
    if f.kind == "fn":
        is_nan = b.cmp("eq", b.i("and", h, 0x7F), 0x7F)
    elif f.kind == "fnuz":
        is_nan = b.cmp("eq", h, 0x80)
    else:
        top = b.cmp("eq", e, e_max)
        inf = b.i("or", sign, 0x7F800000)
        out = b.sel("i32", top, b.sel("i32", b.cmp("ne", m, 0), nan, inf), out)
        return b.from_bits(out)
    return b.from_bits(b.sel("i32", is_nan, nan, out))


def _f4_to_f32(b: _Fn) -> str:
    h = b.conv("zext", "%x", "i8", "i32")
    e = b.i("and", b.i("lshr", h, 1), 3)
    m = b.i("and", h, 1)
    normal = b.i("or", b.i("shl", b.i("add", e, 126), 23), b.i("shl", m, 22))
    mag = b.sel("i32", b.cmp("ne", e, 0), normal, b.i("mul", m, 0x3F000000))
    return b.from_bits(b.i("or", mag, b.i("shl", b.i("and", h, 8), 28)))


def _e8m0_to_f32(b: _Fn) -> str:
    h = b.conv("zext", "%x", "i8", "i32")
    power = b.sel("i32", b.cmp("ne", h, 0), b.i("shl", h, 23), 0x00400000)
    return b.from_bits(b.sel("i32", b.cmp("eq", h, 0xFF), 0x7FC00000, power))


# -- float32 -> narrow ---------------------------------------------------------------------
def _f32_to_f16(b: _Fn) -> str:
    x = b.bits("%x")
    sign = b.i("and", b.i("lshr", x, 16), 0x8000)
    a = b.i("and", x, 0x7FFFFFFF)
    m = b.i("and", b.i("lshr", x, 13), 0x3FF)
    nan = b.i("or", b.i("or", sign, 0x7C00), b.sel("i32", b.cmp("ne", m, 0), m, 1))
    inf = b.i("or", sign, 0x7C00)
    magic = b.k("float", 0.5)  # ulp 2^-24: the FPU rounds subnormals to even
    summed = b.op("float", "fadd", b.from_bits(a), magic)
    sub = b.i("or", sign, b.i("sub", b.bits(summed), 0x3F000000))
    rounded = b.i("add", b.i("add", a, 0xC8000FFF), b.i("and", b.i("lshr", a, 13), 1))
    normal = b.i("or", sign, b.i("lshr", rounded, 13))
    out = b.sel("i32", b.cmp("ult", a, 0x38800000), sub, normal)
    out = b.sel("i32", b.cmp("uge", a, 0x477FF000), inf, out)
    out = b.sel("i32", b.cmp("ugt", a, 0x7F800000), nan, out)
    return b.conv("trunc", out, "i32", "i16")


def _f32_to_bf16(b: _Fn) -> str:
    u = b.bits("%x")
    nan = b.i("or", b.i("and", b.i("lshr", u, 16), 0x8000), 0x7FC0)
    rounded = b.i("lshr", b.i("add", b.i("add", u, 0x7FFF), b.i("and", b.i("lshr", u, 16), 1)), 16)
    out = b.sel("i32", b.cmp("ugt", b.i("and", u, 0x7FFFFFFF), 0x7F800000), nan, rounded)
    return b.conv("trunc", out, "i32", "i16")


def _f32_to_f8(b: _Fn, f: Float8) -> str:
    shift = 23 - f.mbits
    min_normal = (1 - f.bias + 127) << 23
    magic = (1 - f.bias - f.mbits + 23 + 127) << 23
    rebias = ((127 - f.bias) << f.mbits) & 0xFFFFFFFF
    x = b.bits("%x")
    sign = b.i("and", b.i("lshr", x, 24), 0x80)
    a = b.i("and", x, 0x7FFFFFFF)
    summed = b.op("float", "fadd", b.from_bits(a), b.from_bits(b.k("i32", magic)))
    sub = b.i("sub", b.bits(summed), magic)
    up = b.i("add", b.i("add", a, (1 << (shift - 1)) - 1), b.i("and", b.i("lshr", a, shift), 1))
    normal = b.i("sub", b.i("lshr", up, shift), rebias)
    r = b.sel("i32", b.cmp("ult", a, min_normal), sub, normal)
    nan: int | str = {"fn": 0x7F, "fnuz": 0x80, "ieee": 0x7E}[f.kind]
    ovf: int | str = {"fn": 0x7F, "fnuz": 0x80, "ieee": 0x7C}[f.kind]
    if f.kind != "fnuz":
        nan, ovf = b.i("or", sign, nan), b.i("or", sign, ovf)
    zero: int | str = 0 if f.kind == "fnuz" else sign
    out = b.sel("i32", b.cmp("ne", r, 0), b.i("or", sign, r), zero)
    out = b.sel("i32", b.cmp("ugt", r, f.max_code), ovf, out)
    out = b.sel("i32", b.cmp("ugt", a, 0x7F800000), nan, out)
    return b.conv("trunc", out, "i32", "i8")


def _f32_to_f4(b: _Fn) -> str:
    x = b.bits("%x")
    sign = b.i("and", b.i("lshr", x, 28), 8)
    a = b.from_bits(b.i("and", x, 0x7FFFFFFF))
    code = b.k("i32", 0)
    edges = (("ogt", 0.25), ("oge", 0.75), ("ogt", 1.25), ("oge", 1.75))
    for pred, edge in (*edges, ("ogt", 2.5), ("oge", 3.5), ("ogt", 5.0)):
        passed = b.fcmp(pred, "float", a, b.k("float", edge))
        code = b.i("add", code, b.conv("zext", passed, "i1", "i32"))
    is_nan = b.fcmp("uno", "float", "%x", "%x")
    out = b.sel("i32", is_nan, b.i("xor", sign, 8), b.i("or", sign, code))
    return b.conv("trunc", out, "i32", "i8")


def _f32_to_e8m0(b: _Fn) -> str:
    x = b.bits("%x")
    e = b.i("lshr", b.i("add", x, 0x00400000), 23)
    out = b.sel("i32", b.cmp("ugt", e, 0xFF), 0xFF, e)
    out = b.sel("i32", b.cmp("ult", x, 0x00800000), 1, out)
    out = b.sel("i32", b.cmp("ule", x, 0x00400000), 0, out)
    bad = b.w.inst(
        b.t("i1"), f"or {b.t('i1')} {b.cmp('uge', x, 0x7F800000)}, {b.cmp('eq', x, 0)}"
    ).ref
    out = b.sel("i32", bad, 0xFF, out)
    return b.conv("trunc", out, "i32", "i8")


def _f64_to_f32_odd(b: _Fn) -> str:
    from_d = b.conv("fptrunc", "%x", "double", "float")
    back = b.conv("fpext", from_d, "float", "double")
    inexact = b.fcmp("une", "double", back, "%x")
    number = b.fcmp("ord", "float", from_d, from_d)
    fabs = intrinsic(b.w.ctx, "fabs", b.t("double"))
    mag_f = b.w.inst(b.t("double"), f"call {b.t('double')} @{fabs}({b.t('double')} {back})").ref
    mag_d = b.w.inst(b.t("double"), f"call {b.t('double')} @{fabs}({b.t('double')} %x)").ref
    above = b.fcmp("ogt", "double", mag_f, mag_d)
    u = b.bits(from_d)
    odd = b.i("or", b.i("sub", u, b.conv("zext", above, "i1", "i32")), 1)
    fix = b.w.inst(b.t("i1"), f"and {b.t('i1')} {inexact}, {number}").ref
    return b.from_bits(b.sel("i32", fix, odd, u))


#: the builders (to float32, from float32) of the types other than FLOAT8's.
_BUILDERS: dict[str, tuple[Callable[[_Fn], str], Callable[[_Fn], str]]] = {
    "float16": (_f16_to_f32, _f32_to_f16),
    "bfloat16": (_bf16_to_f32, _f32_to_bf16),
    "float4_e2m1fn": (_f4_to_f32, _f32_to_f4),
    "float8_e8m0fnu": (_e8m0_to_f32, _f32_to_e8m0),
}


def _builder(base: str, to_f32: bool) -> Callable[[_Fn], str]:
    if base in FLOAT8:
        f = FLOAT8[base]
        return (lambda b: _f8_to_f32(b, f)) if to_f32 else (lambda b: _f32_to_f8(b, f))
    return _BUILDERS[base][0 if to_f32 else 1]


def _helper(
    w: FunctionWriter, name: str, ret: str, arg: str, v: Val, build: Callable[[_Fn], str]
) -> Val:
    """Call helper ``name`` (defined on first use by ``build``) on ``v``."""
    lanes = int(v.ty[1:].split(" x ")[0]) if v.ty.startswith("<") else 1
    name += _suffix(lanes)
    b = _Fn(w.ctx, lanes)
    if name not in w.ctx.helpers:
        w.ctx.helpers[name] = b.finish(name, ret, arg, build(b))
    return w.inst(b.t(ret), f"call {b.t(ret)} @{name}({v.typed()})")


def to_f32(w: FunctionWriter, dtype: str, bits: Val) -> Val:
    """The float value of the stored bits ``bits`` of the narrow ``dtype``."""
    base = dt.element_of(dtype)
    name = f"ember_llvm_{HALF_TAGS[base]}_to_f32"
    return _helper(w, name, "float", storage_type(base), bits, _builder(base, True))


def from_f32(w: FunctionWriter, dtype: str, value: Val) -> Val:
    """The bits of the float ``value`` rounded to the narrow ``dtype`` (converted once)."""
    base = dt.element_of(dtype)
    name = f"ember_llvm_f32_to_{HALF_TAGS[base]}"
    return _helper(w, name, storage_type(base), "float", value, _builder(base, False))


def round_f32(w: FunctionWriter, dtype: str, value: Val) -> Val:
    """The float ``value`` rounded to the narrow ``dtype``, as a float."""
    return to_f32(w, dtype, from_f32(w, dtype, value))


def f64_to_f32(w: FunctionWriter, dtype: str, value: Val) -> Val:
    """A double narrowed to float on the way to ``dtype``: rounded to odd for float16
    (so the next rounding rounds the double once, as numpy), else to nearest."""
    if dt.element_of(dtype) == "float16":
        return _helper(w, "ember_llvm_f64_to_f32_odd", "float", "double", value, _f64_to_f32_odd)
    ty = value.ty.replace("double", "float")
    return w.inst(ty, f"fptrunc {value.typed()} to {ty}")
