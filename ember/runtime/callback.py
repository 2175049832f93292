"""C -> Python: the trampoline through which C calls Python functions.

With the accelerator (:mod:`ember.runtime.fastcall`) the trampoline is C code in
src/python_ffi.c and resource_handle is a strong reference to the callable; otherwise it
is a ctypes callback and resource_handle indexes ``_PY_FUNCS``. Either way the handle's
finalizer releases the callable. Arguments are decoded into Python values (tensors as
NDArray views valid during the call) and return values packed back by the value codec,
which :mod:`ember.runtime.packed_func` (the module above this one) registers with
:func:`register_value_codec` when imported, before it can ask for the first handle.
An exception is stored per thread (see c_api.set_pending_exception) and reported as -1.
"""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Callable
from typing import Any

from ember.runtime import c_api, fastcall
from ember.runtime.c_api import EmberFinalizer, EmberPackedCFunc, TypeCode, check_call
from ember.support.registry import Registry

_PY_FUNCS: dict[int, Callable[..., Any]] = {}
_IDS = itertools.count(1)

#: How callbacks decode an argument (``decode_arg(raw, code)``) and write a return value
#: (``write_return(value, ret_addr, ret_code_addr)``); registered by packed_func.py.
VALUE_CODEC: Registry[Callable[..., Any]] = Registry("packed value codec")
DECODE_ARG = "decode_arg"
WRITE_RETURN = "write_return"


def register_value_codec(
    decode_arg: Callable[[int, int], Any], write_return: Callable[[Any, int, int], None]
) -> None:
    """Set how arguments are decoded and return values written (packed_func.py calls this)."""
    VALUE_CODEC.register(DECODE_ARG, decode_arg, override=True)
    VALUE_CODEC.register(WRITE_RETURN, write_return, override=True)


def _unpack_args(args_addr: int | None, codes_addr: int | None, n: int) -> list[Any]:
    if n <= 0:
        return []
    decode = VALUE_CODEC.get(DECODE_ARG)
    values = (ctypes.c_int64 * n).from_address(args_addr or 0)
    codes = (ctypes.c_int32 * n).from_address(codes_addr or 0)
    return [decode(values[k], codes[k]) for k in range(n)]


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
                VALUE_CODEC.get(WRITE_RETURN)(result, ret_addr, ret_code_addr)
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
    module = fastcall.extension()
    if module is not None and id(module) not in _CONFIGURED:
        module.configure(VALUE_CODEC.get(DECODE_ARG), VALUE_CODEC.get(WRITE_RETURN), _report)
        _CONFIGURED.add(id(module))
    return module


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
