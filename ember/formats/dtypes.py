"""Data types shared by the formats: dtype name <-> numpy dtype <-> DLPack (code, bits, lanes).

A view of the one dtype table, :mod:`ember.support.dtypes`; only the reading of older
spellings lives here.

The names are TVM's (``"float32"``, ``"bool"``, ``"bfloat16"``). DLPack type codes follow
``dlpack.h``: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool. ``bool`` is written as DLPack's
``kDLBool`` with 8 bits (as ember's runtime and current TVM/tvm-ffi do) and also read in
the older TVM spelling (uint, 1 bit, one byte per element).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ember.errors import SerializationError
from ember.support import dtypes as table
from ember.support.dtypes import DL_BFLOAT, DL_BOOL, DL_FLOAT, DL_INT, DL_UINT

__all__ = [
    "DL_BFLOAT",
    "DL_BOOL",
    "DL_FLOAT",
    "DL_INT",
    "DL_UINT",
    "KNOWN_DTYPES",
    "DLType",
    "check_dtype",
    "dltype_of",
    "dtype_from_dltype",
    "dtype_name",
    "is_known_dtype",
    "numpy_dtype",
]


@dataclass(frozen=True)
class DLType:
    """A DLPack ``DLDataType``: type code, bits per lane, lanes."""

    code: int
    bits: int
    lanes: int = 1

    @property
    def itemsize(self) -> int:
        """Bytes one element occupies in memory (bool: one byte)."""
        return (self.bits * self.lanes + 7) // 8


# name -> (DLPack type as written, numpy dtype of the memory): the tensor rows of the dtype
# table (``string``: its 16-byte records, docs/strings.md).
_TABLE: dict[str, tuple[DLType, np.dtype]] = {
    info.name: (DLType(*info.dl_type), table.STRING_RECORD if info.kind == "string" else info.numpy)
    for info in table.DTYPES
    if info.numpy is not None
}

KNOWN_DTYPES: tuple[str, ...] = tuple(sorted(_TABLE))

_BY_DLTYPE: dict[DLType, str] = {dl: name for name, (dl, _) in _TABLE.items()}
_BY_DLTYPE[DLType(DL_UINT, 1)] = "bool"  # older TVM writes bool as uint1


def is_known_dtype(name: object) -> bool:
    """True if ``name`` is a dtype string the formats and executors handle."""
    return isinstance(name, str) and name in _TABLE


def check_dtype(name: object, where: str) -> str:
    """Return ``name`` if it is a known dtype, else raise SerializationError naming ``where``."""
    if not is_known_dtype(name):
        raise SerializationError(
            f"{where}: unknown dtype {name!r}; known dtypes: {', '.join(KNOWN_DTYPES)}"
        )
    return str(name)


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype for a dtype name (bfloat16 via ml_dtypes)."""
    return _TABLE[check_dtype(name, "dtype")][1]


def dtype_name(dtype: object) -> str:
    """The dtype name of a numpy dtype (or anything ``np.dtype`` accepts); raises if unknown."""
    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError as exc:
        raise SerializationError(f"cannot interpret {dtype!r} as a dtype: {exc}") from None
    info = table.from_numpy(dt)
    if info is not None and (info.numpy == dt or info.kind == "string"):  # native order only
        return info.name
    raise SerializationError(
        f"dtype {dt} has no ember equivalent; known dtypes: {', '.join(KNOWN_DTYPES)}"
    )


def dltype_of(name: str) -> DLType:
    """The DLPack type written for a dtype name."""
    return _TABLE[check_dtype(name, "dtype")][0]


def dtype_from_dltype(dl: DLType, where: str) -> str:
    """The dtype name of a DLPack type, or SerializationError naming ``where``."""
    name = _BY_DLTYPE.get(dl)
    if name is None:
        raise SerializationError(
            f"{where}: unsupported DLDataType (code={dl.code}, bits={dl.bits}, "
            f"lanes={dl.lanes}); supported: {', '.join(KNOWN_DTYPES)} with one lane"
        )
    return name
