"""Narrow floats in C (float16, bfloat16, the float8s, float4): stored as bits, computed in
float32.

A buffer of ``float16`` or ``bfloat16`` holds ``uint16_t`` bit patterns, one of a float8
type (``float8_e4m3fn``, ``float8_e4m3fnuz``, ``float8_e5m2``, ``float8_e5m2fnuz``,
``float8_e8m0fnu``, as in ml_dtypes and ONNX) ``uint8_t`` ones, and ``float4_e2m1fn`` one
``uint8_t`` per element, its code in the low 4 bits (ml_dtypes' layout; the code is read
from the low bits only); everything below holds for them alike. A *value* of one
of these dtypes is a C ``float`` that is exactly representable in the narrow type: a load
widens exactly (``ember_f16_to_f32``), every arithmetic result, intrinsic and cast into
the narrow type is rounded back (``ember_round_f16``: float32 -> float16 -> float32), and a
store writes the bits (``ember_f32_to_f16``). One float32 operation followed by one
rounding gives the correctly rounded float16/bfloat16 result of ``+ - * /`` and sqrt
(float32 has more than 2p+1 bits for both types), so results match numpy and ml_dtypes
bit for bit.

The conversions are portable C (bit manipulation, round to nearest even, NaN, infinities,
subnormals and overflow as numpy and ml_dtypes do them). Where the compiler targets x86
with F16C (``__F16C__``: Haswell, Zen and later) float16 conversions use the
``vcvtps2ph``/``vcvtph2ps`` instructions instead, except for NaNs, which keep numpy's bit
patterns (the instructions would quiet signalling NaNs). Those are scalar intrinsics, which
gcc does not vectorize, so inside an ``omp simd`` loop float16 uses branch-free versions
(``ember_f32_to_f16_simd`` ..., the same bits) that it does, on every target (a
microcontroller build has no ``omp simd`` loops and keeps the branchy portable code).
A store of a value computed in float32 converts it once (``bits``), and a narrow value
copied from one buffer to another keeps its bits. ``float64 -> float16`` rounds once (via
a round-to-odd float32, as numpy does); ``float64 -> bfloat16`` goes through float32 as
ml_dtypes does.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.errors import CompileError
from ember.tir import dtype as dt

#: the narrow float dtypes this module handles, with the short tag of their helpers.
HALF_TAGS: dict[str, str] = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "f8e4m3fn",
    "float8_e4m3fnuz": "f8e4m3fnuz",
    "float8_e5m2": "f8e5m2",
    "float8_e5m2fnuz": "f8e5m2fnuz",
    "float4_e2m1fn": "f4e2m1fn",
    "float8_e8m0fnu": "f8e8m0fnu",
}


@dataclass(frozen=True)
class Float8:
    """An 8-bit float format: exponent and mantissa bits, exponent bias, and how it spells
    NaN (``fn``: all ones with the sign, no infinities; ``fnuz``: 0x80, no negative zero;
    ``ieee``: infinities and NaNs as IEEE does)."""

    mbits: int
    bias: int
    kind: str

    @property
    def max_code(self) -> int:
        """The code of the largest finite value."""
        return {"fn": 0x7E, "fnuz": 0x7F, "ieee": 0x7B}[self.kind]


#: the float8 formats (ml_dtypes' and ONNX's), by dtype.
FLOAT8: dict[str, Float8] = {
    "float8_e4m3fn": Float8(3, 7, "fn"),
    "float8_e4m3fnuz": Float8(3, 8, "fnuz"),
    "float8_e5m2": Float8(2, 15, "ieee"),
    "float8_e5m2fnuz": Float8(2, 16, "fnuz"),
}


def float8_helpers(dtype: str) -> str:
    """C conversions float32 <-> the float8 ``dtype`` (round to nearest even, overflow and
    NaN as ml_dtypes: NaN or infinity by format, never saturating)."""
    f = FLOAT8[dtype]
    tag = HALF_TAGS[dtype]
    shift = 23 - f.mbits
    min_normal = (1 - f.bias + 127) << 23
    magic = (1 - f.bias - f.mbits + 23 + 127) << 23  # a float whose ulp is the subnormal step
    rebias = ((127 - f.bias) << f.mbits) & 0xFFFFFFFF
    nan = {"fn": "sign | 0x7fu", "fnuz": "0x80u", "ieee": "sign | 0x7eu"}[f.kind]
    ovf = {"fn": "sign | 0x7fu", "fnuz": "0x80u", "ieee": "sign | 0x7cu"}[f.kind]
    zero = "0u" if f.kind == "fnuz" else "sign"
    e_max = (1 << (7 - f.mbits)) - 1
    special = {
        "fn": f"if (e == {e_max}u && m == {(1 << f.mbits) - 1}u) return sign ? -NAN : NAN;",
        "fnuz": "if (h == 0x80u) return -NAN; /* ml_dtypes' bits */",
        "ieee": f"if (e == {e_max}u) "
        "return m ? (sign ? -NAN : NAN) : (sign ? -INFINITY : INFINITY);",
    }[f.kind]
    step = 2.0 ** (1 - f.bias - f.mbits)
    return f"""static inline uint8_t ember_f32_to_{tag}(float f) {{
  uint32_t x = ember_f32_bits(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  uint32_t r;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return (uint8_t)({nan});
  if (x < {min_normal:#x}u) {{
    r = ember_f32_bits(ember_f32_from_bits(x) + ember_f32_from_bits({magic:#x}u)) - {magic:#x}u;
  }} else {{
    x += {(1 << (shift - 1)) - 1:#x}u + ((x >> {shift}) & 1u);
    r = (x >> {shift}) - {rebias:#x}u;
  }}
  if (r > {f.max_code:#x}u) return (uint8_t)({ovf});
  return (uint8_t)(r ? sign | r : {zero});
}}
static inline float ember_{tag}_to_f32(uint8_t h) {{
  const uint32_t sign = h & 0x80u, e = (h >> {f.mbits}) & {e_max}u, m = h & {(1 << f.mbits) - 1}u;
  {special}
  const float mag = e ? ember_f32_from_bits(((e + {127 - f.bias}u) << 23) | (m << {shift}))
                      : (float)m * {step!r}f;
  return sign ? -mag : mag;
}}
static inline float ember_round_{tag}(float f) {{
  return ember_{tag}_to_f32(ember_f32_to_{tag}(f));
}}
static inline float ember_round_{tag}_f64(double d) {{ return ember_round_{tag}((float)d); }}"""


#: float4_e2m1fn (as ml_dtypes): round to nearest even onto +-{0, 0.5, 1, 1.5, 2, 3, 4, 6},
#: beyond 6 and infinities saturate to +-6, NaN (which the format lacks) becomes the zero of
#: the opposite sign (ml_dtypes' choice); the code of a stored byte is its low 4 bits.
FLOAT4_HELPERS = r"""static inline uint8_t ember_f32_to_f4e2m1fn(float f) {
  const uint32_t x = ember_f32_bits(f);
  const uint8_t sign = (uint8_t)((x >> 28) & 8u);
  const float a = fabsf(f);
  if (f != f) return (uint8_t)(sign ^ 8u);
  return (uint8_t)(sign | (a <= 0.25f ? 0u : a < 0.75f ? 1u : a <= 1.25f ? 2u : a < 1.75f ? 3u
                          : a <= 2.5f ? 4u : a < 3.5f ? 5u : a <= 5.0f ? 6u : 7u));
}
static inline float ember_f4e2m1fn_to_f32(uint8_t h) {
  static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (h & 8u) ? -mag[h & 7u] : mag[h & 7u];
}
static inline float ember_round_f4e2m1fn(float f) {
  return ember_f4e2m1fn_to_f32(ember_f32_to_f4e2m1fn(f));
}
static inline float ember_round_f4e2m1fn_f64(double d) { return ember_round_f4e2m1fn((float)d); }"""

#: float8_e8m0fnu (as ml_dtypes): 2**(code - 127), 0xff is NaN; NaN, infinities, zero,
#: negatives and overflow become NaN; normal floats round half up in the exponent, float32
#: subnormals go to 2**-127 up to it and to 2**-126 above. ONNX's Cast rounding modes and
#: saturation are the importer's (frontend/onnx/cast_rules.py), exact before this conversion.
E8M0_HELPERS = r"""static inline uint8_t ember_f32_to_f8e8m0fnu(float f) {
  const uint32_t x = ember_f32_bits(f);
  if (x >= 0x7f800000u || x == 0u) return 0xffu;
  if (x <= 0x00400000u) return 0u;
  if (x < 0x00800000u) return 1u;
  const uint32_t e = (x + 0x00400000u) >> 23;
  return (uint8_t)(e > 0xffu ? 0xffu : e);
}
static inline float ember_f8e8m0fnu_to_f32(uint8_t h) {
  if (h == 0xffu) return NAN;
  return ember_f32_from_bits(h ? (uint32_t)h << 23 : 0x00400000u);
}
static inline float ember_round_f8e8m0fnu(float f) {
  return ember_f8e8m0fnu_to_f32(ember_f32_to_f8e8m0fnu(f));
}
static inline float ember_round_f8e8m0fnu_f64(double d) {
  return ember_round_f8e8m0fnu((float)d);
}"""

#: the helpers of the narrow floats that are neither float16/bfloat16 nor FLOAT8's.
OTHER_HELPERS: dict[str, str] = {"float4_e2m1fn": FLOAT4_HELPERS, "float8_e8m0fnu": E8M0_HELPERS}


def use(helpers: dict[str, str], dtype: str) -> None:
    """Declare the conversions of the narrow float ``dtype`` in a file's helpers."""
    helpers.setdefault(HELPER_KEY, HALF_HELPERS)
    base = dt.element_of(dtype)
    if base in FLOAT8:
        helpers.setdefault(f"{HELPER_KEY}_{HALF_TAGS[base]}", float8_helpers(base))
    elif base in OTHER_HELPERS:
        helpers.setdefault(f"{HELPER_KEY}_{HALF_TAGS[base]}", OTHER_HELPERS[base])


#: key of the helper block in a FileContext (sorted before helpers that call it).
HELPER_KEY = "0c_ember_half"

HALF_HELPERS = r"""#if defined(__F16C__)
#include <immintrin.h>
#endif
static inline uint32_t ember_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float ember_f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
/* float32 NaN -> float16 NaN as numpy: sign, top 10 payload bits, never an infinity */
static inline uint16_t ember_f16_nan(uint32_t x) {
  uint32_t m = (x >> 13) & 0x3ffu;
  return (uint16_t)(((x >> 16) & 0x8000u) | 0x7c00u | (m ? m : 1u));
}
static inline uint16_t ember_f32_to_f16_soft(float f) {
  uint32_t x = ember_f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return ember_f16_nan(ember_f32_bits(f));
  if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
  if (x < 0x38800000u) { /* below 2^-14: subnormal or zero; the FPU rounds (to even) */
    const float magic = ember_f32_from_bits(0x3f000000u); /* 0.5: ulp 2^-24 */
    return (uint16_t)(sign | (ember_f32_bits(ember_f32_from_bits(x) + magic) - 0x3f000000u));
  }
  x += 0xc8000fffu + ((x >> 13) & 1u); /* rebias the exponent, round to nearest even */
  return (uint16_t)(sign | (x >> 13));
}
static inline float ember_f16_to_f32_soft(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  if (em >= 0x7c00u) return ember_f32_from_bits(sign | 0x7f800000u | ((em & 0x3ffu) << 13));
  if (em >= 0x0400u) return ember_f32_from_bits(sign | ((em + 0x1c000u) << 13));
  return ember_f32_from_bits(sign | ember_f32_bits((float)em * 5.9604644775390625e-8f));
}
#if defined(__F16C__)
static inline uint16_t ember_f32_to_f16(float f) {
  return f != f ? ember_f16_nan(ember_f32_bits(f)) : (uint16_t)_cvtss_sh(f, 0);
}
static inline float ember_f16_to_f32(uint16_t h) {
  return (h & 0x7fffu) > 0x7c00u ? ember_f16_to_f32_soft(h) : _cvtsh_ss(h);
}
#else
static inline uint16_t ember_f32_to_f16(float f) { return ember_f32_to_f16_soft(f); }
static inline float ember_f16_to_f32(uint16_t h) { return ember_f16_to_f32_soft(h); }
#endif
static inline float ember_round_f16(float f) { return ember_f16_to_f32(ember_f32_to_f16(f)); }
/* Branch-free float16 conversions for `omp simd` loops: every path is computed and selects
 * pick one, so gcc vectorizes the loop (a scalar F16C intrinsic keeps it scalar); the bits
 * are those of the _soft versions. 1x64x56x56 at one thread (onnxruntime's): Cast float32
 * -> float16 -> float32 187 -> 31 us (28), float32 -> float16 96 -> 49 (16), float16 ->
 * float32 72 -> 27 (15), float16 Add 187 -> 105 (45). */
static inline uint16_t ember_f32_to_f16_simd(float f) {
  const uint32_t x = ember_f32_bits(f);
  const int32_t a = (int32_t)(x & 0x7fffffffu);
  const uint32_t m = ((uint32_t)a >> 13) & 0x3ffu;
  const uint32_t nan = 0x7c00u | (m ? m : 1u);
  const uint32_t sub = ember_f32_bits(ember_f32_from_bits((uint32_t)a) + 0.5f) - 0x3f000000u;
  const uint32_t norm = ((uint32_t)a + 0xc8000fffu + (((uint32_t)a >> 13) & 1u)) >> 13;
  const uint32_t r = a > 0x7f800000 ? nan : a >= 0x477ff000 ? 0x7c00u : a < 0x38800000 ? sub : norm;
  return (uint16_t)(((x >> 16) & 0x8000u) | r);
}
static inline float ember_f16_to_f32_simd(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const int32_t em = h & 0x7fff;
  const uint32_t special = 0x7f800000u | (((uint32_t)em & 0x3ffu) << 13);
  const uint32_t norm = ((uint32_t)em + 0x1c000u) << 13;
  const uint32_t sub = ember_f32_bits((float)em * 5.9604644775390625e-8f);
  return ember_f32_from_bits(sign | (em >= 0x7c00 ? special : em >= 0x0400 ? norm : sub));
}
/* float32 -> float16 -> float32 without the 16-bit detour: round the float32 bits to 10
 * mantissa bits (nearest even), 2^-24 steps below 2^-14, infinity from 65520, and a NaN
 * keeps its top 10 payload bits (at least one set, as ember_f16_nan) */
static inline float ember_round_f16_simd(float f) {
  const uint32_t x = ember_f32_bits(f);
  const int32_t a = (int32_t)(x & 0x7fffffffu);
  const uint32_t u = (uint32_t)a;
  const uint32_t norm = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
  const uint32_t sub = ember_f32_bits((ember_f32_from_bits(u) + 0.5f) - 0.5f);
  const uint32_t nan = (u & 0xffffe000u) | ((u & 0x007fe000u) ? 0u : 0x2000u);
  const uint32_t inf = 0x7f800000u;
  const uint32_t r = a > 0x7f800000 ? nan : a >= 0x477ff000 ? inf : a < 0x38800000 ? sub : norm;
  return ember_f32_from_bits((x & 0x80000000u) | r);
}
/* float64 -> float32 rounded to odd: rounding that to float16 rounds the double once */
static inline float ember_f64_to_f32_odd(double d) {
  float f = (float)d;
  if ((double)f != d && f == f) {
    uint32_t u = ember_f32_bits(f);
    if (fabs((double)f) > fabs(d)) u -= 1u;
    f = ember_f32_from_bits(u | 1u);
  }
  return f;
}
static inline float ember_round_f16_f64(double d) {
  return ember_round_f16(ember_f64_to_f32_odd(d));
}
static inline float ember_bf16_to_f32(uint16_t h) { return ember_f32_from_bits((uint32_t)h << 16); }
/* ml_dtypes: round to nearest even; NaN -> the quiet NaN 0x7fc0 with the sign */
static inline uint16_t ember_f32_to_bf16(float f) {
  uint32_t u = ember_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float ember_round_bf16(float f) { return ember_bf16_to_f32(ember_f32_to_bf16(f)); }
static inline float ember_round_bf16_f64(double d) { return ember_round_bf16((float)d); }"""


def is_half(dtype: str) -> bool:
    """True for float16/bfloat16 and their vectors."""
    return dt.element_of(dtype) in HALF_TAGS


def _tag(dtype: str) -> str:
    return HALF_TAGS[dt.element_of(dtype)]


def _simd(dtype: str, simd: bool) -> str:
    """The suffix of the branch-free helpers (float16's) used inside ``omp simd`` loops."""
    return "_simd" if simd and _tag(dtype) == "f16" else ""


def load(dtype: str, text: str, simd: bool = False) -> str:
    """The float value of the stored bits ``text`` (``simd``: in a vectorized loop)."""
    return f"ember_{_tag(dtype)}_to_f32{_simd(dtype, simd)}({text})"


def store(dtype: str, text: str, simd: bool = False) -> str:
    """The bits to store for the (already rounded) float value ``text``."""
    return f"ember_f32_to_{_tag(dtype)}{_simd(dtype, simd)}({text})"


def round_value(dtype: str, text: str, simd: bool = False) -> str:
    """``text`` (a float32 expression) rounded to ``dtype``, as a float."""
    return f"ember_round_{_tag(dtype)}{_simd(dtype, simd)}({text})"


def bits(dtype: str, src: str, text: str, simd: bool = False) -> str:
    """The bits of ``text`` (dtype ``src``: float32, float64 or an integer) rounded to the
    half ``dtype``, converted once."""
    if dt.element_of(src) == "float64":
        if _tag(dtype) == "f16":  # rounded once; ml_dtypes' other types round via float32
            return store(dtype, f"ember_f64_to_f32_odd({text})", simd)
        text = f"(float)({text})"
    elif dt.is_integral(src) or dt.is_bool(src):
        return bits(dtype, "float64", f"(double)({text})", simd)
    return store(dtype, text, simd)


def cast_to(dtype: str, src: str, text: str, where: str, simd: bool = False) -> str:
    """C text converting ``text`` of dtype ``src`` to a (float) value of the half ``dtype``."""
    if dt.lanes_of(src) != 1:
        raise CompileError(f"C codegen{where}: vector casts to {dtype} are not supported")
    if dt.element_of(src) == "float64":
        return f"ember_round_{_tag(dtype)}_f64({text})"
    if dt.is_integral(src) or dt.is_bool(src):
        return f"ember_round_{_tag(dtype)}_f64((double)({text}))"
    if dt.element_of(src) == dt.element_of(dtype):
        return text
    return round_value(dtype, text, simd)  # float32, or the other half type (exact as float)
