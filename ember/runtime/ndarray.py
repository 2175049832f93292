"""NDArray: a compact tensor in host memory described by a DLPack DLTensor.

An NDArray owns (or borrows, with an owner kept alive) a buffer and a ctypes ``DLTensor``
whose address is cached as an int (``handle``) so passing it to C costs nothing. Memory
allocated by ember is 64-byte aligned. ``numpy()`` copies; zero-copy exchange goes through
DLPack (see :mod:`ember.runtime.dlpack`, producer in :mod:`ember.runtime.capsule`). Example::

    x = ember.nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    x.shape, x.dtype      # (2, 3), 'float32'
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember.errors import EmberTypeError, EmberValueError
from ember.runtime.c_api import DLTensor
from ember.runtime.capsule import export_capsule
from ember.runtime.device import CPU, RPC_SESS_MASK, Device, cpu
from ember.runtime.dtype import DataType
from ember.runtime.dtype import dtype as as_dtype
from ember.runtime.hooks import REMOTE_NDARRAY, call_hook
from ember.runtime.strings import decode, encode
from ember.support.dtypes import DL_BOOL, DL_STRING

ALIGNMENT = 64
_UINT_TYPESTR = {1: "|u1", 2: "<u2", 4: "<u4", 8: "<u8", 16: "|V16"}


class NDArray:
    """A tensor: shape, dtype, device and a compact buffer, exposed to C as a DLTensor."""

    __slots__ = (
        "_dlt", "_shape_arr", "_owner", "_np", "handle", "_shape", "_dtype", "_device", "_keep"
    )  # fmt: skip

    def __init__(self, view: np.ndarray, device: Device, owner: Any = None) -> None:
        """Wrap the C-contiguous numpy ``view`` without copying (internal; use ember.nd.*)."""
        if not view.flags.c_contiguous:
            raise EmberValueError(
                "NDArray needs a C-contiguous buffer; pass np.ascontiguousarray(x)"
            )
        if device.device_type != CPU:
            raise EmberValueError(f"device {device} is not supported yet; use ember.cpu(0)")
        self._np = view
        self._owner = owner
        self._keep: list[Any] = []  # string arrays: the blobs their records point into
        self._device = device
        self._shape = tuple(int(d) for d in view.shape)
        self._dtype = as_dtype(view.dtype)
        ndim = len(self._shape)
        self._shape_arr = (ctypes.c_int64 * max(ndim, 1))(*self._shape)
        dlt = DLTensor()
        dlt.data = view.ctypes.data
        dlt.device.device_type = device.device_type
        dlt.device.device_id = device.device_id
        dlt.ndim = ndim
        dlt.dtype.code = self._dtype.code
        dlt.dtype.bits = self._dtype.bits
        dlt.dtype.lanes = self._dtype.lanes
        dlt.shape = ctypes.cast(self._shape_arr, ctypes.POINTER(ctypes.c_int64))
        dlt.byte_offset = 0
        self._dlt = dlt
        self.handle: int = ctypes.addressof(dlt)

    # ---- properties -------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The shape as a tuple of ints."""
        return self._shape

    @property
    def dtype(self) -> str:
        """The element type as a string, e.g. ``"float32"``."""
        return str(self._dtype)

    @property
    def data_type(self) -> DataType:
        """The element type as a DataType."""
        return self._dtype

    @property
    def device(self) -> Device:
        """The device holding the buffer."""
        return self._device

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return math.prod(self._shape)

    @property
    def nbytes(self) -> int:
        """The buffer size in bytes."""
        return self.size * self._dtype.itemsize

    @property
    def data_ptr(self) -> int:
        """The address of the first element."""
        return int(self._dlt.data or 0)

    # ---- data movement ----------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A numpy copy of the contents (string arrays: a numpy object array of str)."""
        if self._dtype.code == DL_STRING:
            return decode(self._np)
        return self._np.copy()

    def copyfrom(self, source: np.ndarray | NDArray | Any) -> NDArray:
        """Copy ``source`` (numpy array, NDArray or array-like) into this array; returns self."""
        if self._dtype.code == DL_STRING:
            return self._copy_strings(source)
        src = source._np if isinstance(source, NDArray) else np.asarray(source)
        if src.shape != self._shape:
            raise EmberValueError(
                f"copyfrom: source shape {src.shape} does not match the array shape {self._shape}"
            )
        if src.dtype != self._np.dtype:
            if isinstance(source, NDArray):
                raise EmberValueError(
                    f"copyfrom: source dtype {source.dtype} does not match {self.dtype}"
                )
            src = src.astype(self._np.dtype)
        np.copyto(self._np, src)
        return self

    def _copy_strings(self, source: Any) -> NDArray:
        """copyfrom for string arrays: the records, and the blobs they point into kept alive."""
        if isinstance(source, NDArray):
            if source._dtype.code != DL_STRING:
                raise EmberValueError(f"copyfrom: source dtype {source.dtype} is not string")
            source = decode(source._np)  # a deep copy: the source may point into an arena
        records, blob = encode(source)
        if records.shape != self._shape:
            raise EmberValueError(
                f"copyfrom: source shape {records.shape} does not match the array shape "
                f"{self._shape}"
            )
        np.copyto(self._np, records)
        self._keep = [blob]
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        """``arr[:] = value`` copies ``value`` in (TVM's spelling of copyfrom)."""
        if not (isinstance(index, slice) and index == slice(None)):
            raise EmberValueError("NDArray supports only arr[:] = value; use .numpy() to index")
        if isinstance(value, NDArray | np.ndarray) or np.ndim(value) > 0:
            self.copyfrom(value)
        else:
            self._np.fill(value)

    def copyto(self, target: NDArray | Device) -> NDArray:
        """Copy into ``target`` (an NDArray, or a new array on a Device); returns the target."""
        if isinstance(target, Device):
            return empty(self._shape, self._dtype, target).copyfrom(self)
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        raise EmberTypeError(
            f"copyto: expected an NDArray or a Device, got {type(target).__name__}"
        )

    # ---- DLPack -------------------------------------------------------------
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """Export as a DLPack capsule sharing this array's memory (a copy if ``copy``)."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise EmberValueError(
                f"cannot export to device {dl_device}; the array is on {self._device}"
            )
        if self._dtype.code == DL_STRING:
            raise EmberValueError(
                "cannot export a string array through DLPack: DLPack has no string type; "
                "use .numpy() (a numpy object array of str) instead"
            )
        if self._dtype.bits < 8 and self._dtype.code != DL_BOOL:
            raise EmberValueError(
                f"cannot export a {self.dtype} array through DLPack: ember stores it one "
                "element per byte, and DLPack means sub-byte types packed; use .numpy() "
                "(ml_dtypes' layout, one element per byte) instead"
            )
        source = empty(self._shape, self._dtype, self._device).copyfrom(self) if copy else self
        return export_capsule(source._dlt, source)

    def __dlpack_device__(self) -> tuple[int, int]:
        """The (device_type, device_id) pair of DLPack."""
        return (self._device.device_type, self._device.device_id)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if self._dtype.code == DL_STRING:
            out = decode(self._np)
            return out if dtype is None else out.astype(dtype)
        out = self._np.copy() if copy is not False else self._np
        return out if dtype is None else out.astype(dtype)

    def __repr__(self) -> str:
        return f"<ember.NDArray shape={self._shape} dtype={self.dtype} device={self._device}>"

    def __str__(self) -> str:
        return f"{self!r}\n{self.numpy() if self._dtype.code == DL_STRING else self._np}"


def _aligned_buffer(nbytes: int, zero: bool = False) -> tuple[np.ndarray, np.ndarray]:
    # np.zeros takes its memory from calloc: a large block arrives as untouched zero pages,
    # resident only once written (so storage that is never written costs no memory)
    raw = (np.zeros if zero else np.empty)(nbytes + ALIGNMENT, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGNMENT
    return raw, raw[offset : offset + nbytes]


def empty(
    shape: Sequence[int] | int,
    dtype: str | DataType | Any = "float32",
    device: Device | None = None,
) -> NDArray:
    """A new uninitialized, 64-byte-aligned array."""
    if device is not None and device.device_type >= RPC_SESS_MASK:
        return call_hook(REMOTE_NDARRAY, "empty", shape, device, dtype)
    dims = (int(shape),) if isinstance(shape, int) else tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise EmberValueError(f"empty: negative dimension in shape {dims}")
    dt = as_dtype(dtype)
    np_dtype = dt.numpy_dtype()
    nbytes = math.prod(dims) * np_dtype.itemsize
    try:
        raw, window = _aligned_buffer(nbytes)
    except (MemoryError, ValueError):
        raise EmberValueError(
            f"empty: cannot allocate {nbytes} bytes for shape {dims} of {dt}; use a smaller shape"
        ) from None
    view = window.view(np_dtype).reshape(dims)
    if dt.code == DL_STRING:
        window[:] = 0  # empty strings: NULL data, size 0
    return NDArray(view, device or cpu(0), owner=raw)


def zeros(nbytes: int, device: Device | None = None) -> NDArray:
    """A new zero-filled, 64-byte-aligned byte array whose pages become resident when written.

    This is how executors allocate planned storage: memory a run never writes (an entry a
    parameter array later replaces without copying) costs address space, not RAM.
    """
    if device is not None and device.device_type >= RPC_SESS_MASK:
        remote = call_hook(REMOTE_NDARRAY, "empty", (nbytes,), device, "uint8")
        remote.copyfrom(np.zeros(nbytes, np.uint8))
        return remote
    if nbytes < 0:
        raise EmberValueError(f"zeros: negative size {nbytes}")
    try:
        raw, window = _aligned_buffer(nbytes, zero=True)
    except (MemoryError, ValueError):
        raise EmberValueError(f"zeros: cannot allocate {nbytes} bytes; free memory first") from None
    return NDArray(window, device or cpu(0), owner=raw)


def array(source: Any, device: Device | None = None, dtype: Any = None) -> NDArray:
    """A new aligned array holding a copy of ``source`` (numpy array, NDArray or array-like)."""
    if device is not None and device.device_type >= RPC_SESS_MASK:
        return call_hook(REMOTE_NDARRAY, "array", source, device, dtype)
    if _is_text(source, dtype):
        out = empty(np.shape(source), "string", device)
        return out.copyfrom(source)
    if isinstance(source, NDArray):
        src = source._np
    else:
        src = np.asarray(source, dtype=as_dtype(dtype).numpy_dtype() if dtype is not None else None)
    if dtype is not None and src.dtype != as_dtype(dtype).numpy_dtype():
        src = src.astype(as_dtype(dtype).numpy_dtype())
    out = empty(src.shape, as_dtype(src.dtype), device)
    np.copyto(out._np, src)
    return out


def _is_text(source: Any, dtype: Any) -> bool:
    """Whether ``array(source, dtype=dtype)`` makes a string array."""
    if isinstance(source, NDArray):
        return source._dtype.code == DL_STRING
    if dtype is not None:
        return as_dtype(dtype).code == DL_STRING
    arr = source if isinstance(source, np.ndarray) else np.asarray(source)
    return arr.dtype.kind in "OUS"


def view_from_pointer(
    data: int, shape: Sequence[int], dtype: DataType, device: Device, owner: Any
) -> NDArray:
    """An NDArray over existing memory at ``data``; ``owner`` is kept alive as long as it is."""
    np_dtype = dtype.numpy_dtype()
    dims = tuple(int(d) for d in shape)
    holder = _ArrayInterface(data, dims, np_dtype.itemsize, owner)
    view = np.asarray(holder).view(np_dtype)
    return NDArray(view, device, owner=owner)


class _ArrayInterface:
    """Lets numpy view raw memory while holding a reference to the memory's owner."""

    def __init__(self, data: int, shape: tuple[int, ...], itemsize: int, owner: Any) -> None:
        self.owner = owner
        self.__array_interface__ = {
            "data": (data, False),
            "shape": shape,
            "typestr": _UINT_TYPESTR[itemsize],
            "version": 3,
        }


def from_numpy_view(arr: np.ndarray, device: Device | None = None) -> NDArray:
    """An NDArray sharing the memory of the C-contiguous numpy array ``arr`` (no copy)."""
    return NDArray(arr, device or cpu(0), owner=arr)
