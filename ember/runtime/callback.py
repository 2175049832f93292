"""C -> Python: the trampoline through which C calls Python functions.

With the accelerator (:mod:`ember.runtime.fastcall`) the trampoline is C code in
src/python_ffi.c and resource_handle is a strong reference to the callable; otherwise it
is a ctypes callback and resource_handle indexes ``_PY_FUNCS``. Either way the handle's
finalizer releases the callable, and both use the helpers below for uncommon types. Arguments
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
        _report(exc, _PY_FUNCS.get(resource or 0))
        return -1


def _report(exc: BaseException, func: Any) -> None:
    """Record ``exc`` for the caller's check_call and set the C last error (both trampolines)."""
    name = getattr(func, "__qualname__", "callback")
    c_api.set_pending_exception(exc, f"{type(exc).__name__}: {exc} (in Python function {name})")


def _finalize(resource: int | None) -> None:
    _PY_FUNCS.pop(resource or 0, None)


_TRAMPOLINE = EmberPackedCFunc(_trampoline)
_FINALIZER = EmberFinalizer(_finalize)


_USE_EXTENSION = True  # tests switch this off to exercise the ctypes trampoline
_CONFIGURED: set[int] = set()  # ids of extension modules whose helpers are installed


def _extension() -> Any:
    """The accelerator module with its trampoline configured, or None."""
    if not _USE_EXTENSION:
        return None
    from ember.runtime import fastcall

    module = fastcall.extension()
    if module is not None and id(module) not in _CONFIGURED:
        module.configure(_decode_arg, _write_return, _report)
        _CONFIGURED.add(id(module))
    return module


def _decode_arg(raw: int, code: int) -> Any:
    return decode_value(raw, code, owned_handle=False)


def python_handle(func: Callable[..., Any]) -> int:
    """A new C handle whose body calls ``func`` (the handle keeps ``func`` alive)."""
    out = ctypes.c_void_p()
    lib = c_api.lib()
    module = _extension()
    if module is not None:  # the C trampoline: resource is a strong reference to func
        resource = module.new_reference(func)
        trampoline = EmberPackedCFunc(module.trampoline_address())
        finalizer = EmberFinalizer(module.finalizer_address())
        ret = lib.EmberFuncCreateFromCFunc(trampoline, resource, finalizer, ctypes.byref(out))
        if ret != 0:
            module.release_reference(resource)
        check_call(ret)
        return out.value or 0
    rid = next(_IDS)
    _PY_FUNCS[rid] = func
    check_call(lib.EmberFuncCreateFromCFunc(_TRAMPOLINE, rid, _FINALIZER, ctypes.byref(out)))
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
