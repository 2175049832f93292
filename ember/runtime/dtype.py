"""DataType: the element type of a tensor as a DLPack (code, bits, lanes) with numpy mapping.

Strings follow TVM: ``"float32"``, ``"int8"``, ``"uint16"``, ``"bool"``, ``"bfloat16"``,
``"float32x4"`` (4 lanes), ``"handle"``. ``bfloat16`` maps to ``ml_dtypes.bfloat16``.
Names, codes and numpy types come from the one dtype table, :mod:`ember.support.dtypes`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ember.errors import EmberTypeError, EmberValueError
from ember.support import dtypes as table

_CODE_NAMES = table.DL_CODE_NAMES
_NAME_CODES = {name: code for code, name in _CODE_NAMES.items()}
_PATTERN = re.compile(r"^(int|uint|float|bfloat|handle|bool)(\d*)(?:x(\d+))?$")

#: The dtypes an NDArray can hold, in the table's order.
SUPPORTED = table.TENSOR_DTYPES


@dataclass(frozen=True, slots=True)
class DataType:
    """A DLPack data type: type code, bits per lane, number of lanes."""

    code: int
    bits: int
    lanes: int = 1

    def __str__(self) -> str:
        if self.code == table.DL_BOOL:
            base = "bool"
        elif self.code == table.DL_HANDLE:
            base = "handle"
        elif self.code in _CODE_NAMES:
            base = f"{_CODE_NAMES[self.code]}{self.bits}"
        else:  # a code whose names are whole (float8_e4m3fn), or an unknown one
            info = table.from_dl(self.code, self.bits)
            base = info.name if info is not None else f"custom{self.code}_{self.bits}"
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
    info = table.from_dl(dt.code, dt.bits)
    if info is not None and info.kind == "string":
        return table.STRING_RECORD  # the 16-byte records in memory (docs/strings.md)
    if info is None or info.numpy is None:
        raise EmberValueError(f"data type {dt} has no numpy equivalent; use one of {SUPPORTED}")
    return info.numpy


@cache
def _parse(text: str) -> DataType:
    if text == "bool":
        return DataType(*table.dtype_info("bool").dl_type)
    base, _, lanes_text = text.rpartition("x") if "_" in text else ("", "", "")
    info = table.lookup(text) or table.lookup(base)
    if info is not None and info.dl_code not in _CODE_NAMES:  # float8_e4m3fn[x4]
        count = int(lanes_text) if info.name == base and lanes_text.isdigit() else 1
        return DataType(info.dl_type[0], info.dl_type[1], count)
    m = _PATTERN.match(text)
    if m is None:
        raise EmberValueError(f"cannot parse data type {text!r}; expected one like {SUPPORTED}")
    name, bits, lanes = m.group(1), m.group(2), m.group(3)
    if name == "bool":
        return DataType(table.DL_BOOL, 8, int(lanes or 1))
    if name == "handle":
        return DataType(table.DL_HANDLE, int(bits or 64), int(lanes or 1))
    if not bits:
        raise EmberValueError(f"data type {text!r} lacks a bit width, e.g. '{name}32'")
    return DataType(_NAME_CODES[name], int(bits), int(lanes or 1))


@cache
def _from_numpy(dtype: np.dtype[Any]) -> DataType:
    info = table.from_numpy(dtype)
    if info is None:
        raise EmberTypeError(f"numpy dtype {dtype} is not supported; use one of {SUPPORTED}")
    return DataType(*info.dl_type)


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
        npdt = np.dtype(value)
    except TypeError:
        raise EmberTypeError(
            f"cannot interpret {value!r} as a data type; pass a string such as 'float32'"
        ) from None
    return _from_numpy(npdt)  # a numpy dtype outside the table says so
