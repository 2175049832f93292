"""PackedFunc: one type-erased function object whose body is Python or C, callable from both.

* :class:`PyPackedFunc` wraps a Python callable. When C needs it (argument to a C function,
  global lookup from generated code) it gets a C handle whose body is the trampoline of
  :mod:`ember.runtime.callback`.
* :class:`CPackedFunc` wraps a C ``EmberPackedCFunc`` pointer (e.g. a symbol of a generated
  library) and calls it directly; :class:`HandlePackedFunc` does the same for a C runtime
  handle (it owns one reference).

Python -> C calls go through the optional CPython extension (:mod:`ember.runtime.fastcall`)
when it is available, else through ctypes: per-function ``EmberCallFrame`` buffers (popped
from a small pool, so threads and re-entrant calls never share one) filled through
memoryviews, one pointer passed to ``EmberFuncCallFrame``. An NDArray passes its cached
DLTensor address. A Python exception raised in a callback called from C is re-raised
(same object, same traceback) by :func:`ember.runtime.c_api.check_call`.

The trampolines sit below this file: on import it registers the value codec they use
(:func:`ember.runtime.callback.register_value_codec`). Classes passed to C by identity
register here (:func:`register_identity_type`; module.py registers Module).
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ember.errors import EmberTypeError
from ember.runtime import c_api
from ember.runtime.c_api import (
    DLTensor,
    EmberByteArray,
    EmberFinalizer,
    EmberPackedCFunc,
    TypeCode,
    check_call,
)
from ember.runtime.call_frame import CallBuffers, Pin, byte_array, c_string, pinned_object
from ember.runtime.callback import python_handle, register_value_codec
from ember.runtime.device import Device
from ember.runtime.dtype import DataType
from ember.runtime.fastcall import make_fast_func
from ember.runtime.ndarray import NDArray, from_numpy_view, view_from_pointer
from ember.runtime.object import is_registered_object
from ember.support.registry import Registry

_POOL_CAPACITY = 8
_SUPPORTED = (
    "int, float, bool, str, bytes, None, NDArray, numpy.ndarray, DataType, Device, "
    "PackedFunc or callable, Module, registered Object"
)


def _pack_slow(value: Any, i: int, buf: CallBuffers, keep: list[Any] | None) -> list[Any]:
    """Pack one argument of a less common type into slot ``i``; returns the keep-alive list."""
    if keep is None:
        keep = []
    code: int
    if isinstance(value, bool | np.bool_):
        buf.q[i] = int(value)
        code = TypeCode.INT
    elif isinstance(value, int | np.integer):
        try:
            buf.q[i] = int(value)
            code = TypeCode.INT
        except (OverflowError, ValueError):
            buf.u[i] = int(value)
            code = TypeCode.UINT
    elif isinstance(value, float | np.floating):
        buf.d[i] = float(value)
        code = TypeCode.FLOAT
    elif value is None:
        buf.q[i] = 0
        code = TypeCode.NULL
    elif isinstance(value, NDArray):
        buf.u[i] = value.handle
        code = TypeCode.NDARRAY_HANDLE
    elif isinstance(value, str):
        addr, k = c_string(value.encode("utf-8"))
        buf.u[i] = addr
        keep.append(k)
        code = TypeCode.STR
    elif isinstance(value, bytes | bytearray | memoryview):
        addr, k = byte_array(value)
        buf.u[i] = addr
        keep.append(k)
        code = TypeCode.BYTES
    elif isinstance(value, np.ndarray):
        if not value.flags.c_contiguous:
            raise EmberTypeError(
                f"argument {i}: a numpy array passed to a packed function must be "
                "C-contiguous; pass np.ascontiguousarray(x)"
            )
        view = from_numpy_view(value)
        keep.append(view)
        buf.u[i] = view.handle
        code = TypeCode.DLTENSOR_HANDLE
    elif isinstance(value, DataType):
        buf.q[i] = value.as_int()
        code = TypeCode.DATA_TYPE
    elif isinstance(value, Device):
        buf.q[i] = value.as_int()
        code = TypeCode.DEVICE
    elif isinstance(value, PackedFunc):
        buf.u[i] = value.handle
        code = TypeCode.PACKED_FUNC_HANDLE
    elif isinstance(value, ctypes.c_void_p):
        buf.u[i] = value.value or 0
        code = TypeCode.OPAQUE_HANDLE
    elif _identity_code(value) is not None:
        keep.append(Pin(value))
        buf.u[i] = id(value)
        code = _identity_code(value) or TypeCode.OBJECT_HANDLE
    elif callable(value):
        func = PyPackedFunc(value)
        keep.append(func)
        buf.u[i] = func.handle
        code = TypeCode.PACKED_FUNC_HANDLE
    else:
        raise EmberTypeError(
            f"argument {i} of type {type(value).__name__} cannot be passed to a packed "
            f"function; supported: {_SUPPORTED}"
        )
    buf.c[i] = code
    return keep


#: Classes whose instances cross C by identity (pinned while C holds them), with the type
#: code they travel under. module.py registers Module: it sits above this file.
IDENTITY_TYPES: Registry[tuple[type, TypeCode]] = Registry("class passed by identity")


def register_identity_type(cls: type, code: TypeCode) -> str:
    """Pass instances of ``cls`` to C by identity, under ``code``; returns the registry key."""
    key = f"{cls.__module__}.{cls.__qualname__}"
    IDENTITY_TYPES.register(key, (cls, code), override=True)
    return key


def _identity_code(value: Any) -> TypeCode | None:
    for name in IDENTITY_TYPES.names():
        cls, code = IDENTITY_TYPES.get(name)
        if isinstance(value, cls):
            return code
    return TypeCode.OBJECT_HANDLE if is_registered_object(value) else None


def _pack(args: tuple[Any, ...], buf: CallBuffers) -> list[Any] | None:
    """Write ``args`` into ``buf``; return the temporaries that must outlive the call."""
    keep: list[Any] | None = None
    for i, value in enumerate(args):
        if type(value) is int and -(2**63) <= value < 2**63:
            buf.q[i] = value
            buf.c[i] = 0
        else:
            keep = _pack_slow(value, i, buf, keep)
    return keep


# ---- decoding values written by C ------------------------------------------------------
def _tensor_view(address: int) -> NDArray:
    dlt = DLTensor.from_address(address)
    shape = tuple(int(dlt.shape[k]) for k in range(dlt.ndim))
    dt = DataType(int(dlt.dtype.code), int(dlt.dtype.bits), int(dlt.dtype.lanes))
    dev = Device(int(dlt.device.device_type), int(dlt.device.device_id))
    data = int(dlt.data or 0) + int(dlt.byte_offset)
    return view_from_pointer(data, shape, dt, dev, owner=None)


def decode_value(raw: int, code: int, owned_handle: bool) -> Any:
    """Turn one packed value (its 64 raw bits as a signed int) into a Python value.

    ``owned_handle``: a PackedFunc handle is a new reference (a return value) rather than a
    borrowed one (an argument).
    """
    if code == TypeCode.INT:
        return raw
    if code == TypeCode.FLOAT:
        return ctypes.c_double.from_buffer(ctypes.c_int64(raw)).value
    if code == TypeCode.NULL:
        return None
    addr = raw & 0xFFFFFFFFFFFFFFFF
    if code == TypeCode.UINT:
        return addr
    if code == TypeCode.STR:
        return ctypes.string_at(addr).decode("utf-8") if addr else ""
    if code == TypeCode.BYTES:
        arr = EmberByteArray.from_address(addr)
        return ctypes.string_at(arr.data, arr.size) if arr.size else b""
    if code in (TypeCode.NDARRAY_HANDLE, TypeCode.DLTENSOR_HANDLE):
        return _tensor_view(addr)
    if code == TypeCode.PACKED_FUNC_HANDLE:
        if not owned_handle:
            check_call(c_api.lib().EmberFuncRetain(addr))
        return HandlePackedFunc(addr)
    if code == TypeCode.OPAQUE_HANDLE:
        return ctypes.c_void_p(addr) if addr else None
    if code == TypeCode.DATA_TYPE:
        return DataType(addr & 0xFF, (addr >> 8) & 0xFF, (addr >> 16) & 0xFFFF)
    if code == TypeCode.DEVICE:
        return Device(addr & 0xFFFFFFFF, (addr >> 32) & 0xFFFFFFFF)
    if code in (TypeCode.MODULE_HANDLE, TypeCode.OBJECT_HANDLE):
        return pinned_object(addr, code)
    raise EmberTypeError(f"unknown packed type code {code}; the callee wrote a corrupt value")


def _weak_slow_call(func: _CCallable) -> Callable[..., Any]:
    """The ctypes path of ``func`` without a reference cycle (the extension holds this)."""
    ref = weakref.ref(func)

    def slow_call(*args: Any) -> Any:
        target = ref()
        if target is None:
            raise EmberTypeError("the PackedFunc behind this call no longer exists")
        return target._ctypes_call(*args)

    return slow_call


def _decode_owned(raw: int, code: int) -> Any:
    return decode_value(raw, code, owned_handle=True)


# ---- the value codec of C -> Python calls (callback.py) ----------------------------------
_RETURNS = threading.local()


def _decode_arg(raw: int, code: int) -> Any:
    return decode_value(raw, code, owned_handle=False)


def _write_return(value: Any, ret_addr: int, ret_code_addr: int) -> None:
    buf = CallBuffers(1)
    keep = _pack((value,), buf)
    code = buf.c[0]
    if code == TypeCode.PACKED_FUNC_HANDLE:
        check_call(c_api.lib().EmberFuncRetain(buf.u[0]))  # the caller owns a reference
    _RETURNS.keep = (keep, value)  # alive until the next callback on this thread
    ctypes.c_int64.from_address(ret_addr).value = buf.q[0]
    ctypes.c_int32.from_address(ret_code_addr).value = code


register_value_codec(_decode_arg, _write_return)


# ---- the PackedFunc classes ---------------------------------------------------------
class PackedFunc:
    """A type-erased function: ``f(*args)``; its body may be Python or C."""

    __slots__ = ("_handle", "__weakref__")

    def __init__(self) -> None:
        self._handle = 0

    def __call__(self, *args: Any) -> Any:
        raise NotImplementedError

    @property
    def handle(self) -> int:
        """The C runtime handle of this function (created on first use, owned by self)."""
        if not self._handle:
            self._handle = self._make_handle()
        return self._handle

    def _make_handle(self) -> int:
        raise NotImplementedError

    def c_entry(self) -> tuple[int, int] | None:
        """(function pointer, resource_handle) when the body is C code, else None."""
        return None

    def __del__(self) -> None:
        if self._handle and c_api is not None and c_api.is_loaded():
            c_api.lib().EmberFuncFree(self._handle)
            self._handle = 0


class PyPackedFunc(PackedFunc):
    """A PackedFunc whose body is a Python callable."""

    __slots__ = ("func",)

    def __init__(self, func: Callable[..., Any]) -> None:
        super().__init__()
        if not callable(func):
            raise EmberTypeError(f"PyPackedFunc needs a callable, got {type(func).__name__}")
        self.func = func

    def __call__(self, *args: Any) -> Any:
        return self.func(*args)

    def _make_handle(self) -> int:
        return python_handle(self.func)

    def __repr__(self) -> str:
        return f"<PackedFunc python {getattr(self.func, '__qualname__', self.func)!r}>"


class _CCallable(PackedFunc):
    """Shared fast call path of PackedFuncs whose body is reached through EmberFuncCallFrame."""

    __slots__ = ("_pool", "_pool0", "_call", "_frame_func", "_frame_resource")

    def __init__(self, func: int, resource: int) -> None:
        super().__init__()
        self._pool: list[CallBuffers] = []  # frames for calls with arguments
        self._pool0: list[CallBuffers] = []  # frames whose num_args stays 0
        self._call = c_api.frame_caller()
        self._frame_func = func
        self._frame_resource = resource

    def _buffers(self, n: int) -> CallBuffers:
        return CallBuffers(
            max(n, _POOL_CAPACITY), self._frame_func, self._frame_resource, self._handle
        )

    def _ctypes_call(self, *args: Any) -> Any:
        # The hot path: written out flat on purpose (each helper call costs ~50 ns).
        if args:
            pool = self._pool
            try:
                buf = pool.pop()
            except IndexError:
                buf = self._buffers(len(args))
            n = len(args)
            if n > buf.capacity:
                buf = self._buffers(n)
            q = buf.q
            c = buf.c
            keep = None
            i = 0
            try:
                for value in args:
                    kind = type(value)
                    if kind is NDArray:
                        q[i] = value.handle
                        c[i] = 13
                    elif kind is int:
                        q[i] = value
                        c[i] = 0
                    elif kind is float:
                        buf.d[i] = value
                        c[i] = 2
                    else:
                        keep = _pack_slow(value, i, buf, keep)
                    i += 1
            except (OverflowError, ValueError):
                keep = _pack(args, buf)  # an int beyond int64: redo on the careful path
            buf.n[0] = n
            code = self._call(buf.ref)
        else:
            pool = self._pool0
            try:
                buf = pool.pop()
            except IndexError:
                buf = self._buffers(0)
            code = self._call(buf.ref)
        if code == 4:
            pool.append(buf)
            return None
        if code == 0:
            value = buf.rq[0]
            pool.append(buf)
            return value
        if code < 0:
            pool.append(buf)
            check_call(code)
        value = decode_value(buf.rq[0], code, owned_handle=True)
        pool.append(buf)
        return value

    __call__ = _ctypes_call


class CPackedFunc(_CCallable):
    """A PackedFunc calling an ``EmberPackedCFunc`` C function pointer directly."""

    __slots__ = ("_address", "_resource", "_owner", "name", "_fast")

    def __init__(
        self,
        address: int,
        resource_handle: int = 0,
        owner: Any = None,
        name: str = "",
        accelerate: bool = True,
    ) -> None:
        if not address:
            raise EmberTypeError("CPackedFunc needs a non-NULL function pointer")
        super().__init__(address, resource_handle)
        self._address = address
        self._resource = resource_handle or None
        self._owner = owner  # e.g. the library that holds the code
        self.name = name
        self._fast: Callable[..., Any] | None = None
        if accelerate:
            self._fast = make_fast_func(
                address, resource_handle, _weak_slow_call(self), _decode_owned, NDArray
            )
            if self._fast is not None:
                # same layout, only __call__ differs: the hot path then has no extra branch
                self.__class__ = _AcceleratedCPackedFunc

    @property
    def accelerated(self) -> bool:
        """Whether calls go through the optional CPython extension (else through ctypes)."""
        return self._fast is not None

    def _make_handle(self) -> int:
        out = ctypes.c_void_p()
        fn = ctypes.cast(ctypes.c_void_p(self._address), EmberPackedCFunc)
        lib = c_api.lib()
        check_call(
            lib.EmberFuncCreateFromCFunc(fn, self._resource, _NO_FINALIZER, ctypes.byref(out))
        )
        return out.value or 0

    def c_entry(self) -> tuple[int, int] | None:
        """(function pointer, resource_handle) of the C body."""
        return (self._address, self._resource or 0)

    def __repr__(self) -> str:
        return f"<PackedFunc c {self.name or hex(self._address)}>"


class _AcceleratedCPackedFunc(CPackedFunc):
    """A CPackedFunc whose calls go through the CPython extension (see fastcall.py)."""

    __slots__ = ()

    def __call__(self, *args: Any) -> Any:
        return self._fast(*args)  # type: ignore[misc]


class HandlePackedFunc(CPackedFunc):
    """A PackedFunc owning one reference to a C runtime handle, calling its C body directly."""

    __slots__ = ()

    def __init__(self, handle: int) -> None:
        func = ctypes.c_void_p()
        resource = ctypes.c_void_p()
        check_call(
            c_api.lib().EmberFuncGetCFunc(handle, ctypes.byref(func), ctypes.byref(resource))
        )
        super().__init__(func.value or 0, resource.value or 0, name=f"handle {hex(handle)}")
        self._handle = handle  # released by PackedFunc.__del__


def as_packed_func(value: Any) -> PackedFunc:
    """Return ``value`` if it is a PackedFunc, else wrap the callable in a PyPackedFunc."""
    if isinstance(value, PackedFunc):
        return value
    if callable(value):
        return PyPackedFunc(value)
    raise EmberTypeError(f"expected a PackedFunc or a callable, got {type(value).__name__}")


_NO_FINALIZER = EmberFinalizer()  # a NULL function pointer
