"""NDArrays of the sub-byte types (int4, uint4, int2, uint2, float4_e2m1fn): one element per
byte, ml_dtypes' numpy layout; DLPack, which means such types packed, is refused both ways
with an error saying what to do instead."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.errors import EmberValueError
from ember.runtime.capsule import export_capsule
from ember.runtime.dlpack import from_capsule, from_dlpack, to_numpy

SUB_BYTE = ("int4", "uint4", "int2", "uint2", "float4_e2m1fn")


@pytest.mark.parametrize("name", SUB_BYTE)
def test_arrays_hold_one_element_per_byte_like_ml_dtypes(name: str) -> None:
    values = np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, name))
    arr = ember.nd.array(values)
    assert arr.dtype == name and arr.nbytes == 256 and arr.data_type.itemsize == 1
    assert arr.data_type.bits == (2 if name.endswith("2") else 4)  # DLPack's bits
    np.testing.assert_array_equal(arr.numpy().view(np.uint8), values.view(np.uint8))
    np.testing.assert_array_equal(to_numpy(arr).astype(np.float32), values.astype(np.float32))
    empty = ember.nd.empty((3, 5), name)
    assert empty.numpy().dtype == np.dtype(getattr(ml_dtypes, name))


def test_numpy_arrays_of_ml_dtypes_are_viewed_without_copy() -> None:
    x = np.array([-8, -1, 0, 7], ml_dtypes.int4)
    arr = from_dlpack(x)
    assert arr.dtype == "int4" and arr.data_ptr == x.ctypes.data


def test_export_through_dlpack_is_refused() -> None:
    arr = ember.nd.array(np.array([1, 2, 3], ml_dtypes.uint4))
    with pytest.raises(EmberValueError, match=r"cannot export a uint4 array .* use \.numpy\(\)"):
        arr.__dlpack__()


def test_a_packed_dlpack_tensor_is_refused() -> None:
    """A producer's int4 capsule holds two elements per byte: ember does not read it."""
    storage = ember.nd.array(np.array([0x21, 0x43], np.uint8))
    dlt = type(storage._dlt).from_buffer_copy(storage._dlt)
    dlt.dtype.code, dlt.dtype.bits = 0, 4
    shape = (ctypes.c_int64 * 1)(4)
    dlt.ndim, dlt.shape = 1, ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    capsule = export_capsule(dlt, (storage, shape))
    with pytest.raises(EmberValueError, match="come packed .* unpack them to one element"):
        from_capsule(capsule)
