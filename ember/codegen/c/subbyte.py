"""Sub-byte integers in C (int4, uint4, int2, uint2): one element per byte, computed as bytes.

A buffer of a sub-byte integer holds one ``int8_t``/``uint8_t`` per element with the value
in its low bits, as ml_dtypes lays out its numpy arrays (``int4`` -1 is the byte 0x0f).
A *value* is a byte holding the number itself (-1 is 0xff): a load sign- or zero-extends
the low bits (``ember_ld_i4``; it ignores the high bits, as ml_dtypes does), a store
writes the low bits (``ember_st_i4``), and a cast into the type keeps the low bits of the
source as an integer, the two's complement wrap of ONNX's integer casts and of ml_dtypes
(7 + 1 -> -8; a float is truncated toward zero first, as C and ml_dtypes do). Arithmetic
on such values is not wrapped until it is stored (ONNX has no arithmetic on these types).
"""

from __future__ import annotations

from ember.support import dtypes
from ember.tir import dtype as dt

#: key prefix of the helpers in a FileContext.
HELPER_KEY = "0d_ember_sub"


def is_sub_byte(dtype: str) -> bool:
    """True for int4, uint4, int2 and uint2 (scalars; vectors are refused elsewhere)."""
    base = dt.element_of(dtype)
    return dtypes.sub_bits(base) > 0 and dt.is_integral(base)


def _tag(dtype: str) -> str:
    base = dt.element_of(dtype)
    return ("i" if dt.is_int(base) else "u") + str(dtypes.sub_bits(base))


def helpers_of(dtype: str) -> str:
    """The C load/store/wrap helpers of the sub-byte integer ``dtype``."""
    base = dt.element_of(dtype)
    bits = dtypes.sub_bits(base)
    shift, mask = 8 - bits, (1 << bits) - 1
    tag = _tag(dtype)
    if dt.is_int(base):
        value = f"(int8_t)((int8_t)(uint8_t)(b << {shift}) >> {shift})"
        ctype = "int8_t"
    else:
        value = f"(uint8_t)(b & {mask:#x}u)"
        ctype = "uint8_t"
    return (
        f"static inline {ctype} ember_ld_{tag}(uint8_t b) {{ return {value}; }}\n"
        f"static inline {ctype} ember_st_{tag}({ctype} v) {{ "
        f"return ({ctype})((uint8_t)v & {mask:#x}u); }}\n"
        f"static inline {ctype} ember_wrap_{tag}(int64_t v) {{\n"
        f"  return ember_ld_{tag}((uint8_t)v);\n}}"
    )


def use(helpers: dict[str, str], dtype: str) -> None:
    """Declare the helpers of the sub-byte integer ``dtype`` in a file's helpers."""
    helpers.setdefault(f"{HELPER_KEY}_{_tag(dtype)}", helpers_of(dtype))


def load(dtype: str, text: str) -> str:
    """The value of the stored byte ``text``."""
    return f"ember_ld_{_tag(dtype)}((uint8_t)({text}))"


def store(dtype: str, text: str) -> str:
    """The byte to store for the value ``text``."""
    return f"ember_st_{_tag(dtype)}({text})"


def cast_to(dtype: str, src: str, text: str) -> str:
    """C text converting ``text`` of dtype ``src`` to a value of the sub-byte ``dtype``."""
    if dt.is_float(src):
        text = f"(int64_t)({text})"  # truncate toward zero, then wrap
    return f"ember_wrap_{_tag(dtype)}((int64_t)({text}))"
