"""dtype names <-> numpy <-> DLPack types, as the formats use them."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ember.errors import SerializationError
from ember.formats.dtypes import (
    KNOWN_DTYPES,
    DLType,
    check_dtype,
    dltype_of,
    dtype_from_dltype,
    dtype_name,
    numpy_dtype,
)


@pytest.mark.parametrize("name", KNOWN_DTYPES)
def test_round_trips(name: str) -> None:
    assert dtype_name(numpy_dtype(name)) == name
    assert dtype_from_dltype(dltype_of(name), "test") == name
    assert dltype_of(name).itemsize == numpy_dtype(name).itemsize


def test_specific_codes() -> None:
    assert dltype_of("bool") == DLType(6, 8)
    assert dltype_of("bfloat16") == DLType(4, 16)
    assert numpy_dtype("bfloat16") == np.dtype(ml_dtypes.bfloat16)
    assert dtype_from_dltype(DLType(1, 1), "old tvm") == "bool"


def test_refusals() -> None:
    with pytest.raises(SerializationError, match="here: unknown dtype 'float8'"):
        check_dtype("float8", "here")
    with pytest.raises(SerializationError, match="lanes=4"):
        dtype_from_dltype(DLType(2, 32, 4), "x")
    with pytest.raises(SerializationError, match="no ember equivalent"):
        dtype_name(np.complex128)
    with pytest.raises(SerializationError, match="cannot interpret"):
        dtype_name(object())
