"""DLPack exchange: capsule producer and consumer written with ctypes.pythonapi.

Zero-copy both ways for every dtype ember supports, bfloat16 included (numpy cannot export
bfloat16 through DLPack, so numpy arrays without a working ``__dlpack__`` are viewed
directly through their buffer). Producer (:mod:`ember.runtime.capsule`):
``NDArray.__dlpack__`` returns a ``"dltensor"`` capsule whose DLManagedTensor keeps the
NDArray alive until the consumer calls the deleter.
Consumer: :func:`from_dlpack` renames the capsule ``"used_dltensor"`` and calls the
producer's deleter when the resulting NDArray dies.

The sub-byte types (int4, uint4, int2, uint2, float4_e2m1fn) are the exception: ember
stores them one element per byte (ml_dtypes' layout), while DLPack means them packed, so
an NDArray of one is not exported and a packed capsule is refused with an error saying
to unpack; a numpy array of ``ml_dtypes.int4`` is viewed directly like bfloat16.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.errors import EmberTypeError, EmberValueError
from ember.runtime.c_api import DLManagedTensor, DLManagedTensorVersioned, DLTensor
from ember.runtime.capsule import (
    LEGACY,
    VERSIONED,
    PyCapsule_GetPointer,
    PyCapsule_IsValid,
    PyCapsule_SetName,
    export_capsule,
    exported_count,
)
from ember.runtime.device import Device
from ember.runtime.dtype import DataType
from ember.runtime.ndarray import NDArray, from_numpy_view, view_from_pointer
from ember.support.dtypes import DL_BOOL

_USED = b"used_dltensor"
_USED_VERSIONED = b"used_dltensor_versioned"


def to_dlpack_capsule(arr: NDArray) -> Any:
    """A legacy ``"dltensor"`` capsule sharing ``arr``'s memory (keeps ``arr`` alive)."""
    return export_capsule(arr._dlt, arr)


__all__ = ["exported_count", "from_capsule", "from_dlpack", "to_dlpack_capsule", "to_numpy"]


# ---- consumer ------------------------------------------------------------------
class _ManagedOwner:
    """Calls the producer's deleter when the last NDArray viewing its tensor dies."""

    __slots__ = ("address", "deleter")

    def __init__(self, address: int, deleter: Any) -> None:
        self.address = address
        self.deleter = deleter

    def __del__(self) -> None:
        if self.deleter:
            self.deleter(self.address)


def _check_compact(dlt: DLTensor, shape: tuple[int, ...]) -> None:
    if not dlt.strides:
        return
    expected = 1
    for axis in range(len(shape) - 1, -1, -1):
        if shape[axis] != 1 and dlt.strides[axis] != expected:
            raise EmberValueError(
                f"from_dlpack: the tensor is not compact (strides "
                f"{[dlt.strides[i] for i in range(len(shape))]} for shape {shape}); "
                "make it contiguous first (e.g. np.ascontiguousarray)"
            )
        expected *= shape[axis]


def from_capsule(capsule: Any) -> NDArray:
    """Consume a DLPack capsule (legacy or versioned) into an NDArray sharing its memory."""
    if PyCapsule_IsValid(capsule, LEGACY):
        address = PyCapsule_GetPointer(capsule, LEGACY)
        managed: Any = DLManagedTensor.from_address(address)
        used = _USED
    elif PyCapsule_IsValid(capsule, VERSIONED):
        address = PyCapsule_GetPointer(capsule, VERSIONED)
        managed = DLManagedTensorVersioned.from_address(address)
        if managed.version.major > 1:
            raise EmberValueError(f"from_dlpack: DLPack version {managed.version.major} is unknown")
        used = _USED_VERSIONED
    else:
        raise EmberTypeError(
            "from_dlpack: expected an unconsumed DLPack capsule named 'dltensor'; "
            "a capsule can be consumed only once"
        )
    dlt = managed.dl_tensor
    shape = tuple(int(dlt.shape[i]) for i in range(dlt.ndim))
    dtype = DataType(int(dlt.dtype.code), int(dlt.dtype.bits), int(dlt.dtype.lanes))
    if dtype.bits < 8 and dtype.code != DL_BOOL:
        raise EmberValueError(
            f"from_dlpack: {dtype} tensors come packed ({8 // max(dtype.bits, 1)} elements per "
            "byte), which ember does not read; unpack them to one element per byte (a numpy "
            f"array of ml_dtypes.{dtype}) and pass that instead"
        )
    device = Device(int(dlt.device.device_type), int(dlt.device.device_id))
    _check_compact(dlt, shape)
    data = int(dlt.data or 0) + int(dlt.byte_offset)
    PyCapsule_SetName(capsule, used)
    owner = _ManagedOwner(address, managed.deleter)
    return view_from_pointer(data, shape, dtype, device, owner)


def from_dlpack(obj: Any) -> NDArray:
    """An NDArray sharing memory with ``obj``: any DLPack producer, a capsule, or numpy."""
    if isinstance(obj, NDArray):
        return NDArray(obj._np, obj.device, owner=obj)
    if type(obj).__name__ == "PyCapsule":
        return from_capsule(obj)
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "V" or obj.dtype.name == "bfloat16":
            # numpy refuses to export ml_dtypes types through DLPack: view the buffer.
            if not obj.flags.c_contiguous:
                raise EmberValueError("from_dlpack: the numpy array is not C-contiguous")
            return from_numpy_view(obj)
        return from_capsule(obj.__dlpack__())
    if hasattr(obj, "__dlpack__"):
        return from_capsule(obj.__dlpack__())
    raise EmberTypeError(
        f"from_dlpack: {type(obj).__name__} is not a DLPack producer (no __dlpack__ method)"
    )


def to_numpy(obj: Any) -> np.ndarray:
    """A numpy array sharing memory with ``obj`` (an NDArray or any DLPack producer)."""
    if isinstance(obj, NDArray):
        if obj.data_type.bits < 8 and obj.data_type.code != DL_BOOL:  # no DLPack spelling
            return obj._np
        return from_capsule(obj.__dlpack__())._np
    return from_dlpack(obj)._np
