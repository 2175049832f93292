"""DLPack: zero-copy both ways with numpy for every supported dtype, and lifetimes."""

from __future__ import annotations

import gc

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.errors import EmberTypeError, EmberValueError
from ember.runtime import dlpack

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
DTYPES += ["float16", "bfloat16", "float32", "float64"]


def _np_dtype(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else name


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_shares_memory(dtype):
    src = (np.arange(12) % 5).reshape(3, 4).astype(_np_dtype(dtype))
    arr = ember.nd.from_dlpack(src)
    assert arr.data_ptr == src.ctypes.data
    assert arr.dtype == dtype and arr.shape == (3, 4)
    back = ember.nd.to_numpy(arr)  # our capsule producer + consumer
    assert back.ctypes.data == src.ctypes.data
    assert back.dtype == src.dtype
    np.testing.assert_array_equal(back, src)
    if dtype != "bfloat16":  # numpy's own consumer (it has no bfloat16 DLPack code)
        theirs = np.from_dlpack(arr)
        assert theirs.ctypes.data == src.ctypes.data
    assert arr.__dlpack_device__() == (1, 0)


def test_writes_are_visible_both_ways():
    src = np.zeros(4, dtype="float32")
    arr = ember.nd.from_dlpack(src)
    src[1] = 7
    assert ember.nd.to_numpy(arr)[1] == 7
    ember.nd.to_numpy(arr)[2] = 9
    assert src[2] == 9


def test_exported_capsule_keeps_array_alive_and_releases():
    before = dlpack.exported_count()
    arr = ember.nd.array(np.arange(1000, dtype="float64"))
    view = np.from_dlpack(arr)
    ptr = arr.data_ptr
    del arr
    gc.collect()
    assert view.ctypes.data == ptr and view[999] == 999  # still alive through the capsule
    assert dlpack.exported_count() == before + 1
    del view
    gc.collect()
    assert dlpack.exported_count() == before
    unconsumed = ember.nd.array(np.ones(2)).__dlpack__()
    assert dlpack.exported_count() == before + 1
    del unconsumed
    gc.collect()
    assert dlpack.exported_count() == before


def test_capsule_is_consumed_once():
    cap = ember.nd.array(np.ones(3, "int32")).__dlpack__()
    arr = ember.nd.from_dlpack(cap)
    assert arr.numpy().tolist() == [1, 1, 1]
    with pytest.raises(EmberTypeError, match="consumed only once"):
        ember.nd.from_dlpack(cap)


def test_non_contiguous_and_non_producers_are_rejected():
    with pytest.raises(EmberValueError, match="not compact"):
        ember.nd.from_dlpack(np.zeros((4, 4), "float32")[:, ::2])
    with pytest.raises(EmberTypeError, match="not a DLPack producer"):
        ember.nd.from_dlpack([1, 2, 3])


def test_copy_flag_and_ndarray_input():
    arr = ember.nd.array(np.arange(3, dtype="int64"))
    copied = np.from_dlpack(arr, copy=True)
    assert copied.ctypes.data != arr.data_ptr
    same = ember.nd.from_dlpack(arr)
    assert same.data_ptr == arr.data_ptr


def test_versioned_capsule_from_numpy():
    src = np.arange(6, dtype="int32").reshape(2, 3)
    capsule = src.__dlpack__(max_version=(1, 0))
    arr = ember.nd.from_dlpack(capsule)
    assert arr.data_ptr == src.ctypes.data and arr.shape == (2, 3) and arr.dtype == "int32"
    np.testing.assert_array_equal(arr.numpy(), src)
