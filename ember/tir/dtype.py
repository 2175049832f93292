"""Scalar data types of the loop IR: names, sizes and classification helpers.

A dtype is a plain string such as ``"float32"``, ``"int64"``, ``"bool"`` or ``"handle"``;
a vector type appends its lane count (``"float32x8"``). Every helper here is pure and a
view of the one dtype table, :mod:`ember.support.dtypes`.
"""

from __future__ import annotations

from ember.errors import IRError
from ember.support import dtypes as table

_BITS: dict[str, int] = {d.name: d.bits for d in table.DTYPES}

SCALAR_DTYPES: tuple[str, ...] = tuple(sorted(_BITS))


def split_lanes(dtype: str) -> tuple[str, int]:
    """Split ``"float32x8"`` into ``("float32", 8)``; scalars have one lane."""
    if dtype in _BITS:
        return dtype, 1
    base, sep, lanes = dtype.rpartition("x")
    if sep and base in _BITS and lanes.isdigit() and int(lanes) > 1:
        return base, int(lanes)
    raise IRError(f"unknown dtype {dtype!r}; known scalar dtypes: {', '.join(SCALAR_DTYPES)}")


def check_dtype(dtype: str) -> str:
    """Return ``dtype`` if it names a known (scalar or vector) type, else raise IRError."""
    if not isinstance(dtype, str):
        raise IRError(f"a dtype must be a string such as 'float32', got {dtype!r}")
    split_lanes(dtype)
    return dtype


def element_of(dtype: str) -> str:
    """The scalar element type of a (possibly vector) dtype."""
    return split_lanes(dtype)[0]


def lanes_of(dtype: str) -> int:
    """The number of vector lanes of a dtype (1 for scalars)."""
    return split_lanes(dtype)[1]


def with_lanes(dtype: str, lanes: int) -> str:
    """The dtype with the element type of ``dtype`` and ``lanes`` lanes."""
    base = element_of(dtype)
    return base if lanes == 1 else f"{base}x{lanes}"


def bits_of(dtype: str) -> int:
    """Bits of one element of ``dtype`` (bool counts as 8: it is stored as uint8)."""
    return _BITS[element_of(dtype)]


def bytes_of(dtype: str) -> int:
    """Bytes of one full value of ``dtype`` including all lanes."""
    base, lanes = split_lanes(dtype)
    return _BITS[base] // 8 * lanes


def is_float(dtype: str) -> bool:
    """True for float16/bfloat16/float32/float64 (and their vectors)."""
    return table.is_float(element_of(dtype))


def is_int(dtype: str) -> bool:
    """True for signed integer types."""
    return table.is_int(element_of(dtype))


def is_uint(dtype: str) -> bool:
    """True for unsigned integer types."""
    return table.is_uint(element_of(dtype))


def is_bool(dtype: str) -> bool:
    """True for bool."""
    return element_of(dtype) == "bool"


def is_handle(dtype: str) -> bool:
    """True for opaque pointers."""
    return dtype == "handle"


def is_integral(dtype: str) -> bool:
    """True for signed or unsigned integers (not bool)."""
    return table.is_integral(element_of(dtype))


def dlpack_code(dtype: str) -> tuple[int, int, int]:
    """The DLPack ``(code, bits, lanes)`` of ``dtype`` (bool is DLPack's kDLBool=6, 8 bits)."""
    base, lanes = split_lanes(dtype)
    info = table.dtype_info(base)
    code, bits, _ = info.dl_type
    return code, bits, 1 if base == "handle" else lanes
