"""DataType: the element type of a tensor as a DLPack (code, bits, lanes) with numpy mapping.

Strings follow TVM: ``"float32"``, ``"int8"``, ``"uint16"``, ``"bool"``, ``"bfloat16"``,
``"float32x4"`` (4 lanes), ``"handle"``. ``bfloat16`` maps to ``ml_dtypes.bfloat16``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ember.errors import EmberTypeError, EmberValueError

_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "handle", 4: "bfloat", 6: "bool"}
_NAME_CODES = {name: code for code, name in _CODE_NAMES.items()}
_PATTERN = re.compile(r"^(int|uint|float|bfloat|handle|bool)(\d*)(?:x(\d+))?$")

SUPPORTED = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
)


@dataclass(frozen=True, slots=True)
class DataType:
    """A DLPack data type: type code, bits per lane, number of lanes."""

    code: int
    bits: int
    lanes: int = 1

    def __str__(self) -> str:
        if self.code == 6:
            base = "bool"
        elif self.code == 3:
            base = "handle"
        else:
            base = f"{_CODE_NAMES.get(self.code, f'custom{self.code}_')}{self.bits}"
        return base if self.lanes == 1 else f"{base}x{self.lanes}"

    def __repr__(self) -> str:
        return f"DataType('{self}')"

    @property
    def itemsize(self) -> int:
        """Bytes per element (all lanes)."""
        return (self.bits * self.lanes + 7) // 8

    def as_int(self) -> int:
        """The little-endian 32-bit packing of the DLDataType struct."""
        return self.code | (self.bits << 8) | (self.lanes << 16)

    def numpy_dtype(self) -> np.dtype[Any]:
        """The numpy dtype holding one element (scalar lanes only)."""
        return _numpy_dtype(self)


@cache
def _numpy_dtype(dt: DataType) -> np.dtype[Any]:
    if dt.lanes != 1:
        raise EmberValueError(f"data type {dt} has {dt.lanes} lanes; numpy holds only scalars")
    if dt.code == 4 and dt.bits == 16:
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    if dt.code == 6:
        return np.dtype(np.bool_)
    kind = {0: "i", 1: "u", 2: "f"}.get(dt.code)
    if kind is None or dt.bits not in (8, 16, 32, 64) or (kind == "f" and dt.bits == 8):
        raise EmberValueError(f"data type {dt} has no numpy equivalent; use one of {SUPPORTED}")
    return np.dtype(f"{kind}{dt.bits // 8}")


@cache
def _parse(text: str) -> DataType:
    if text == "bool":
        return DataType(6, 8, 1)
    m = _PATTERN.match(text)
    if m is None:
        raise EmberValueError(f"cannot parse data type {text!r}; expected one like {SUPPORTED}")
    name, bits, lanes = m.group(1), m.group(2), m.group(3)
    if name == "bool":
        return DataType(6, 8, int(lanes or 1))
    if name == "handle":
        return DataType(3, int(bits or 64), int(lanes or 1))
    if not bits:
        raise EmberValueError(f"data type {text!r} lacks a bit width, e.g. '{name}32'")
    return DataType(_NAME_CODES[name], int(bits), int(lanes or 1))


@cache
def _from_numpy(dtype: np.dtype[Any]) -> DataType:
    if dtype == np.bool_:
        return DataType(6, 8, 1)
    if dtype.kind in "iuf":
        return DataType({"i": 0, "u": 1, "f": 2}[dtype.kind], dtype.itemsize * 8, 1)
    if dtype.name == "bfloat16":
        return DataType(4, 16, 1)
    raise EmberTypeError(f"numpy dtype {dtype} is not supported; use one of {SUPPORTED}")


def dtype(value: Any) -> DataType:
    """Coerce a string, numpy dtype/type or DataType into a DataType."""
    if isinstance(value, DataType):
        return value
    if isinstance(value, str):
        try:
            return _parse(value)
        except EmberValueError as err:
            try:
                return _from_numpy(np.dtype(value))
            except TypeError:
                raise err from None
    try:
        return _from_numpy(np.dtype(value))
    except TypeError:
        raise EmberTypeError(
            f"cannot interpret {value!r} as a data type; pass a string such as 'float32'"
        ) from None
