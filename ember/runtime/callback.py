"""C -> Python: the one trampoline through which C calls Python functions.

A C handle made for a Python callable has the trampoline as its body and an index into
``_PY_FUNCS`` as its resource_handle; the handle's finalizer drops the entry. Arguments
are decoded into Python values (tensors as NDArray views valid during the call); return
values are packed back and kept alive per thread until the next callback on that thread.
An exception is stored per thread (see c_api.set_pending_exception) and reported as -1.
The global fallback lets C's EmberFuncGetGlobal find Python-registered functions.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Callable
from typing import Any

from ember.runtime import c_api
from ember.runtime.c_api import (
    EmberFinalizer,
    EmberGlobalFallback,
    EmberPackedCFunc,
    TypeCode,
    check_call,
)
from ember.runtime.packed_func import _CallBuffers, _pack, decode_value

_PY_FUNCS: dict[int, Callable[..., Any]] = {}
_IDS = itertools.count(1)
_TLS = threading.local()


def _unpack_args(args_addr: int | None, codes_addr: int | None, n: int) -> list[Any]:
    if n <= 0:
        return []
    values = (ctypes.c_int64 * n).from_address(args_addr or 0)
    codes = (ctypes.c_int32 * n).from_address(codes_addr or 0)
    return [decode_value(values[k], codes[k], owned_handle=False) for k in range(n)]


def _write_return(value: Any, ret_addr: int, ret_code_addr: int) -> None:
    buf = _CallBuffers(1)
    keep = _pack((value,), buf)
    code = buf.c[0]
    if code == TypeCode.PACKED_FUNC_HANDLE:
        check_call(c_api.lib().EmberFuncRetain(buf.u[0]))  # the caller owns a reference
    _TLS.keep = (keep, value)  # alive until the next callback on this thread
    ctypes.c_int64.from_address(ret_addr).value = buf.q[0]
    ctypes.c_int32.from_address(ret_code_addr).value = code


def _trampoline(
    args_addr: int | None,
    codes_addr: int | None,
    num_args: int,
    ret_addr: int | None,
    ret_code_addr: int | None,
    resource: int | None,
) -> int:
    try:
        func = _PY_FUNCS[resource or 0]
        result = func(*_unpack_args(args_addr, codes_addr, num_args))
        if ret_addr and ret_code_addr:
            if result is None:
                ctypes.c_int32.from_address(ret_code_addr).value = TypeCode.NULL
            else:
                _write_return(result, ret_addr, ret_code_addr)
        return 0
    except BaseException as exc:  # noqa: BLE001 - every error must cross back to the caller
        name = getattr(_PY_FUNCS.get(resource or 0), "__qualname__", "callback")
        c_api.set_pending_exception(exc, f"{type(exc).__name__}: {exc} (in Python function {name})")
        return -1


def _finalize(resource: int | None) -> None:
    _PY_FUNCS.pop(resource or 0, None)


_TRAMPOLINE = EmberPackedCFunc(_trampoline)
_FINALIZER = EmberFinalizer(_finalize)


def python_handle(func: Callable[..., Any]) -> int:
    """A new C handle whose body calls ``func`` (the handle owns one table entry)."""
    rid = next(_IDS)
    _PY_FUNCS[rid] = func
    out = ctypes.c_void_p()
    check_call(
        c_api.lib().EmberFuncCreateFromCFunc(_TRAMPOLINE, rid, _FINALIZER, ctypes.byref(out))
    )
    return out.value or 0


def _global_fallback(name: bytes | None, out: Any) -> int:
    try:
        from ember.runtime.registry import find_python_func

        out[0] = None
        func = find_python_func((name or b"").decode("utf-8"))
        if func is not None:
            handle = func.handle
            check_call(c_api.lib().EmberFuncRetain(handle))
            out[0] = handle
        return 0
    except BaseException as exc:  # noqa: BLE001
        c_api.set_pending_exception(exc, f"{type(exc).__name__}: {exc} (in the global lookup)")
        return -1


_FALLBACK = EmberGlobalFallback(_global_fallback)


def install_global_fallback(lib: ctypes.CDLL) -> None:
    """Let C lookups of unknown global names find functions registered from Python."""
    lib.EmberFuncSetGlobalFallback(_FALLBACK)
