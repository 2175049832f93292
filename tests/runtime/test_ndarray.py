"""NDArray, Device and DataType: construction, properties, copies, alignment."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.runtime as rt
from ember.errors import EmberTypeError, EmberValueError
from ember.runtime import ndarray

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
DTYPES += ["float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_array_round_trip_and_alignment(dtype):
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    src = (np.arange(24) % 7).reshape(2, 3, 4).astype(np_dtype)
    arr = ember.nd.array(src, ember.cpu(0))
    assert arr.shape == (2, 3, 4)
    assert arr.dtype == dtype
    assert arr.device == ember.cpu(0)
    assert arr.data_ptr % 64 == 0
    out = arr.numpy()
    assert out.dtype == src.dtype
    np.testing.assert_array_equal(out, src)
    assert out.ctypes.data != arr.data_ptr  # numpy() copies


def test_empty_copyfrom_copyto():
    arr = ember.nd.empty((3, 2), "float32")
    assert arr.shape == (3, 2) and arr.dtype == "float32" and arr.data_ptr % 64 == 0
    assert arr.copyfrom(np.ones((3, 2))) is arr  # casts array-likes
    np.testing.assert_array_equal(arr.numpy(), np.ones((3, 2), "float32"))
    other = arr.copyto(ember.cpu(0))
    assert other.data_ptr != arr.data_ptr
    np.testing.assert_array_equal(other.numpy(), arr.numpy())
    with pytest.raises(EmberValueError, match="shape"):
        arr.copyfrom(np.ones((2, 3)))
    with pytest.raises(EmberValueError, match="dtype"):
        arr.copyfrom(ember.nd.array(np.ones((3, 2), "int32")))
    with pytest.raises(EmberTypeError):
        arr.copyto("cpu")


def test_slice_assignment():
    arr = ember.nd.empty((2, 2), "int32")
    arr[:] = np.arange(4, dtype="int32").reshape(2, 2)
    assert arr.numpy().tolist() == [[0, 1], [2, 3]]
    arr[:] = 7
    assert arr.numpy().tolist() == [[7, 7], [7, 7]]
    with pytest.raises(EmberValueError, match="only arr"):
        arr[0] = 1


def test_scalar_and_empty_shapes():
    s = ember.nd.array(np.float64(2.5))
    assert s.shape == () and s.ndim == 0 and s.numpy() == 2.5
    z = ember.nd.empty((0, 4), "int8")
    assert z.shape == (0, 4) and z.size == 0 and z.nbytes == 0
    assert ember.nd.empty(5, "int64").shape == (5,)


def test_dlpack_handle_describes_the_array():
    from ember.runtime.c_api import DLTensor

    arr = ember.nd.array(np.zeros((4, 5), "uint16"))
    dlt = DLTensor.from_address(arr.handle)
    assert dlt.ndim == 2 and [dlt.shape[0], dlt.shape[1]] == [4, 5]
    assert (dlt.dtype.code, dlt.dtype.bits, dlt.dtype.lanes) == (1, 16, 1)
    assert dlt.data == arr.data_ptr and not dlt.strides
    assert (dlt.device.device_type, dlt.device.device_id) == (1, 0)


def test_dtype_parsing():
    assert rt.dtype("float32") == rt.DataType(2, 32, 1)
    assert rt.dtype("bfloat16") == rt.DataType(4, 16, 1)
    assert rt.dtype("bool") == rt.DataType(6, 8, 1)
    assert rt.dtype("int8x4") == rt.DataType(0, 8, 4)
    assert str(rt.dtype("uint64")) == "uint64"
    assert rt.dtype(np.float16) == rt.dtype("float16")
    assert rt.dtype("f4") == rt.dtype("float32")
    with pytest.raises(EmberValueError, match="cannot parse"):
        rt.dtype("floaty")
    with pytest.raises(EmberTypeError):
        rt.dtype(np.complex64)


def test_device():
    assert ember.cpu() == rt.Device(1, 0)
    assert str(ember.cpu(1)) == "cpu(1)"
    assert rt.device("cpu:2") == ember.cpu(2)
    assert ember.cpu().exist
    with pytest.raises(EmberValueError, match="unknown device"):
        rt.device("tpu")
    with pytest.raises(EmberValueError, match="not supported"):
        ember.nd.empty((2,), "float32", rt.Device(2, 0))


def test_zeros_is_aligned_zeroed_storage() -> None:
    buf = ndarray.zeros(100_000)
    assert buf.data_ptr % ndarray.ALIGNMENT == 0
    assert buf.shape == (100_000,) and str(buf.dtype) == "uint8"
    assert not buf.numpy().any()
    with pytest.raises(EmberValueError, match="negative size"):
        ndarray.zeros(-1)
