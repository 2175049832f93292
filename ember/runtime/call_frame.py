"""Call frames: the argument/return storage of one packed call, and pinned Python objects.

:class:`CallBuffers` is one ``EmberCallFrame`` with its argument arrays, reused across calls
and written through memoryviews (the hot path of :mod:`ember.runtime.packed_func`). A
:class:`Pin` keeps a Python object (a Module, an Object) reachable by ``id()`` while C holds
it; :func:`pinned_object` turns the id back into the object.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from ember.errors import EmberTypeError
from ember.runtime.c_api import EmberByteArray, EmberCallFrame, TypeCode


class CallBuffers:
    """Argument and return storage of one in-flight call (an EmberCallFrame), reused."""

    __slots__ = (
        "capacity",
        "frame",
        "values",
        "codes",
        "ref",
        "q",
        "u",
        "d",
        "c",
        "n",
        "rq",
        "values_addr",
        "codes_addr",
    )

    def __init__(self, capacity: int, func: int = 0, resource: int = 0, handle: int = 0) -> None:
        self.capacity = capacity
        self.values = (ctypes.c_int64 * capacity)()
        self.codes = (ctypes.c_int32 * capacity)()
        self.values_addr = ctypes.addressof(self.values)
        self.codes_addr = ctypes.addressof(self.codes)
        frame = EmberCallFrame()
        frame.func = func or None
        frame.resource_handle = resource or None
        frame.handle = handle or None
        frame.args = self.values_addr
        frame.type_codes = self.codes_addr
        self.frame = frame
        self.ref = ctypes.byref(frame)
        raw = memoryview(self.values).cast("B")
        self.q = raw.cast("q")
        self.u = raw.cast("Q")
        self.d = raw.cast("d")
        self.c = memoryview(self.codes).cast("B").cast("i")
        frame_raw = memoryview(frame).cast("B")
        n_off = EmberCallFrame.num_args.offset
        ret_off = EmberCallFrame.ret_value.offset
        self.n = frame_raw[n_off : n_off + 4].cast("i")
        self.rq = frame_raw[ret_off : ret_off + 8].cast("q")


# ---- Python objects passed through C by identity (Module, Object) --------------------
_PINNED: dict[int, list[Any]] = {}
_PINNED_LOCK = threading.Lock()


class Pin:
    """Keeps a Python object reachable by id() from C while the pin lives."""

    __slots__ = ("key",)

    def __init__(self, obj: Any) -> None:
        self.key = id(obj)
        with _PINNED_LOCK:
            entry = _PINNED.setdefault(self.key, [obj, 0])
            entry[1] += 1

    def __del__(self) -> None:
        with _PINNED_LOCK:
            entry = _PINNED.get(self.key)
            if entry is not None:
                entry[1] -= 1
                if entry[1] <= 0:
                    del _PINNED[self.key]


def pinned_object(key: int, code: int) -> Any:
    """The live object a MODULE_HANDLE or OBJECT_HANDLE value (an id) refers to."""
    entry = _PINNED.get(key)
    if entry is None:
        raise EmberTypeError(
            f"a value with type code {TypeCode(code).name} refers to no live Python object"
        )
    return entry[0]


def c_string(data: bytes) -> tuple[int, ctypes.c_char_p]:
    """(address, keep-alive object) of a NUL-terminated copy of ``data``."""
    keep = ctypes.c_char_p(data)
    return ctypes.cast(keep, ctypes.c_void_p).value or 0, keep


def byte_array(data: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """(address, keep-alive objects) of an EmberByteArray over a copy of ``data``."""
    raw = bytes(data)
    addr, keep_str = c_string(raw)
    arr = EmberByteArray(addr, len(raw))
    return ctypes.addressof(arr), (arr, keep_str)
