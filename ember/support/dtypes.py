"""The one dtype table: every element type ember knows and what each layer needs of it.

A row (:class:`DTypeInfo`) holds a dtype's name (TVM's spelling: ``"float32"``, ``"bool"``,
``"bfloat16"``, ``"handle"``), its class, storage bits per lane, DLPack type code, numpy
dtype (``bfloat16`` through ``ml_dtypes``), C type (None where C has none), and ONNX
``TensorProto`` element type. The params format writes a dtype as its DLPack
``(code, bits, lanes)``. Vector dtypes append their lane count to a row's name
(``"float32x8"``); every row itself has one lane.

The sub-byte types (``int4``, ``uint4``, ``int2``, ``uint2``, ``float4_e2m1fn``) are stored
*widened*, one element per byte, exactly as ml_dtypes lays out its numpy arrays (the value
in the low bits); their row's ``bits`` is that storage (8) and ``sub_bits`` the width of
the value, which is what their DLPack type says (``int4`` is ``(kDLInt, 4, 1)``). DLPack
itself means such a type *packed* (two int4 per byte), so ember neither exports nor
imports sub-byte tensors through DLPack (``ember.runtime.dlpack`` says so); ONNX's packed
initializers are unpacked at import by onnx's own ``numpy_helper``. Compiled code reads a
sub-byte integer sign- or zero-extended from its low bits and stores the low bits
(``ember.codegen.c.subbyte``).

Every other dtype list is a view of this table: the runtime's ``DataType``, the formats'
``DLType``, the loop IR's helpers, the graph IR's ``DTYPES``, the C code generator's
``c_type`` and the ONNX importer's element types. Add a dtype here, and only here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import ml_dtypes
import numpy as np

from ember.errors import EmberValueError

#: The class of a dtype.
Kind = Literal["bool", "int", "uint", "float", "handle", "string"]

# DLPack type codes (dlpack.h DLDataTypeCode).
DL_INT = 0
DL_UINT = 1
DL_FLOAT = 2
DL_HANDLE = 3
DL_BFLOAT = 4
DL_BOOL = 6
# DLPack 1.1 codes of the 8-bit floats (each name says its exponent and mantissa bits; ``fn``:
# finite, no infinities; ``uz``: unsigned zero, the one NaN is 0x80).
DL_FLOAT8_E4M3FN = 10
DL_FLOAT8_E4M3FNUZ = 11
DL_FLOAT8_E5M2 = 12
DL_FLOAT8_E5M2FNUZ = 13
DL_FLOAT8_E8M0FNU = 14  # exponent only: 2**(code - 127), 0xff is NaN; no zero, no sign
DL_FLOAT4_E2M1FN = 17  # 4 bits: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no NaN or infinity
#: ember's own code for ``string`` (DLPack has none, so no DLPack tensor carries it): one
#: element is a 16-byte ``{const char* data; int64_t size}`` record (docs/strings.md).
DL_STRING = 130

#: the memory layout of one ``string`` element in a tensor buffer (docs/strings.md); numpy
#: arrays of strings outside ember are object arrays of ``str``.
STRING_RECORD: np.dtype[Any] = np.dtype([("data", "<u8"), ("size", "<i8")])

#: DLPack type code -> the stem of a dtype name with that code (``bfloat`` + ``16``).
DL_CODE_NAMES: dict[int, str] = {
    DL_INT: "int",
    DL_UINT: "uint",
    DL_FLOAT: "float",
    DL_HANDLE: "handle",
    DL_BFLOAT: "bfloat",
    DL_BOOL: "bool",
}


@dataclass(frozen=True, slots=True)
class DTypeInfo:
    """One row of the dtype table (see the module docstring for the columns)."""

    name: str
    kind: Kind
    bits: int
    dl_code: int
    numpy: np.dtype[Any] | None
    c_type: str | None
    onnx: int | None
    lanes: int = 1
    #: bits of a sub-byte type's value (4 or 2; stored in ``bits`` = 8), 0 for the others
    sub_bits: int = 0

    @property
    def itemsize(self) -> int:
        """Bytes one element occupies in memory (bool and the sub-byte types: one byte)."""
        return (self.bits * self.lanes + 7) // 8

    @property
    def dl_type(self) -> tuple[int, int, int]:
        """The DLPack ``(code, bits, lanes)`` (bool is kDLBool with 8 bits, int4 has 4)."""
        return self.dl_code, self.sub_bits or self.bits, self.lanes


def _row(
    name: str,
    kind: Kind,
    bits: int,
    code: int,
    npdt: Any,
    c: str | None,
    onnx: int | None,
    sub_bits: int = 0,
) -> DTypeInfo:
    npdt = None if npdt is None else np.dtype(npdt)
    return DTypeInfo(name, kind, bits, code, npdt, c, onnx, sub_bits=sub_bits)


#: The table, in canonical order (bool, signed, unsigned, floats, handle).
DTYPES: tuple[DTypeInfo, ...] = (
    # name, class, bits, DLPack code, numpy type, C type, ONNX TensorProto code
    _row("bool", "bool", 8, DL_BOOL, np.bool_, "uint8_t", 9),
    _row("int8", "int", 8, DL_INT, np.int8, "int8_t", 3),
    _row("int16", "int", 16, DL_INT, np.int16, "int16_t", 5),
    _row("int32", "int", 32, DL_INT, np.int32, "int32_t", 6),
    _row("int64", "int", 64, DL_INT, np.int64, "int64_t", 7),
    _row("int4", "int", 8, DL_INT, ml_dtypes.int4, "int8_t", 22, sub_bits=4),
    _row("int2", "int", 8, DL_INT, ml_dtypes.int2, "int8_t", 26, sub_bits=2),
    _row("uint8", "uint", 8, DL_UINT, np.uint8, "uint8_t", 2),
    _row("uint16", "uint", 16, DL_UINT, np.uint16, "uint16_t", 4),
    _row("uint32", "uint", 32, DL_UINT, np.uint32, "uint32_t", 12),
    _row("uint64", "uint", 64, DL_UINT, np.uint64, "uint64_t", 13),
    _row("uint4", "uint", 8, DL_UINT, ml_dtypes.uint4, "uint8_t", 21, sub_bits=4),
    _row("uint2", "uint", 8, DL_UINT, ml_dtypes.uint2, "uint8_t", 25, sub_bits=2),
    _row("float8_e4m3fn", "float", 8, DL_FLOAT8_E4M3FN, ml_dtypes.float8_e4m3fn, None, 17),
    _row("float8_e4m3fnuz", "float", 8, DL_FLOAT8_E4M3FNUZ, ml_dtypes.float8_e4m3fnuz, None, 18),
    _row("float8_e5m2", "float", 8, DL_FLOAT8_E5M2, ml_dtypes.float8_e5m2, None, 19),
    _row("float8_e5m2fnuz", "float", 8, DL_FLOAT8_E5M2FNUZ, ml_dtypes.float8_e5m2fnuz, None, 20),
    _row("float4_e2m1fn", "float", 8, DL_FLOAT4_E2M1FN, ml_dtypes.float4_e2m1fn, None, 23, 4),
    _row("float8_e8m0fnu", "float", 8, DL_FLOAT8_E8M0FNU, ml_dtypes.float8_e8m0fnu, None, 24),
    _row("float16", "float", 16, DL_FLOAT, np.float16, None, 10),
    _row("bfloat16", "float", 16, DL_BFLOAT, ml_dtypes.bfloat16, None, 16),
    _row("float32", "float", 32, DL_FLOAT, np.float32, "float", 1),
    _row("float64", "float", 64, DL_FLOAT, np.float64, "double", 11),
    _row("handle", "handle", 64, DL_HANDLE, None, "void*", None),
    _row("string", "string", 128, DL_STRING, object, "EmberString", 8),
)

_BY_NAME: dict[str, DTypeInfo] = {d.name: d for d in DTYPES}
_BY_DL: dict[tuple[int, int], DTypeInfo] = {d.dl_type[:2]: d for d in DTYPES}
_BY_ONNX: dict[int, DTypeInfo] = {d.onnx: d for d in DTYPES if d.onnx is not None}
_BY_NUMPY: dict[str, DTypeInfo] = {d.numpy.name: d for d in DTYPES if d.numpy is not None}
_STRING = _BY_NAME["string"]


#: the dtypes ONNX only casts, quantizes and moves (no arithmetic): the sub-byte types and
#: float8_e8m0fnu. The importer's arithmetic handlers do not take them.
STORAGE_ONLY: frozenset[str] = frozenset(
    d.name for d in DTYPES if d.sub_bits or d.dl_code == DL_FLOAT8_E8M0FNU
)


def names_of(*kinds: Kind) -> tuple[str, ...]:
    """The names of the dtypes of the given classes (all tensor dtypes if none), in order."""
    wanted = kinds or ("bool", "int", "uint", "float")
    return tuple(d.name for d in DTYPES if d.kind in wanted)


#: The dtypes a tensor can hold (every row but ``handle``), in canonical order.
TENSOR_DTYPES: tuple[str, ...] = names_of()


def lookup(name: object) -> DTypeInfo | None:
    """The row of a scalar dtype name, or None (vector names and non-strings give None)."""
    return _BY_NAME.get(name) if isinstance(name, str) else None


def dtype_info(name: str) -> DTypeInfo:
    """The row of a scalar dtype name; EmberValueError naming the known dtypes otherwise."""
    info = lookup(name)
    if info is None:
        raise EmberValueError(
            f"unknown dtype {name!r}; use one of {', '.join(d.name for d in DTYPES)}"
        )
    return info


def from_dl(code: int, bits: int) -> DTypeInfo | None:
    """The row with DLPack type ``code`` and ``bits`` per lane, or None."""
    return _BY_DL.get((code, bits))


def from_onnx(elem_type: int) -> DTypeInfo | None:
    """The row of an ONNX ``TensorProto`` element type, or None if ember has no such dtype."""
    return _BY_ONNX.get(elem_type)


def from_numpy(dtype: np.dtype[Any]) -> DTypeInfo | None:
    """The row of a numpy dtype (any byte order), or None if ember has no such dtype; object,
    ``U`` and ``S`` arrays (and the storage record) are ``string``."""
    if dtype.kind in "OUS" or dtype == STRING_RECORD:
        return _STRING
    return _BY_NUMPY.get(dtype.name)


def numpy_dtype(name: str) -> np.dtype[Any]:
    """The numpy dtype of a tensor dtype name (bfloat16 via ml_dtypes)."""
    info = dtype_info(name)
    if info.numpy is None:
        raise EmberValueError(
            f"dtype {name!r} has no numpy equivalent; use one of {', '.join(TENSOR_DTYPES)}"
        )
    return info.numpy


def _kind(name: str) -> str | None:
    info = _BY_NAME.get(name)
    return None if info is None else info.kind


def is_float(name: str) -> bool:
    """True for the floating point dtypes (float16, bfloat16, float32, float64)."""
    return _kind(name) == "float"


def is_half(name: str) -> bool:
    """True for the floats narrower than float32 (float16, bfloat16, the float8s), which
    ops compute in float32."""
    return is_float(name) and _BY_NAME[name].bits < 32


def is_int(name: str) -> bool:
    """True for the signed integer dtypes."""
    return _kind(name) == "int"


def is_uint(name: str) -> bool:
    """True for the unsigned integer dtypes."""
    return _kind(name) == "uint"


def sub_bits(name: str) -> int:
    """The value bits of a sub-byte dtype (4 for int4, uint4 and float4_e2m1fn; 2 for int2
    and uint2), stored one per byte; 0 for every other dtype."""
    info = _BY_NAME.get(name)
    return 0 if info is None else info.sub_bits


def is_string(name: object) -> bool:
    """True for the ``string`` dtype (16-byte records of UTF-8 bytes, docs/strings.md)."""
    return name == "string"


def is_integral(name: str) -> bool:
    """True for signed or unsigned integers (not bool)."""
    return _kind(name) in ("int", "uint")
