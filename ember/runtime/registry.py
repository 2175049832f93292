"""The global function registry: Python-registered functions plus the C runtime's table.

The Python registry is the source of truth for functions defined in Python; C code finds
them through the C runtime's fallback lookup (installed when the C runtime loads).
:func:`get_global_func` also finds functions registered in C (by generated code or the
runtime), and :func:`list_global_funcs` lists both. The C runtime is consulted only once
it is loaded: a pure-Python lookup never compiles anything. Example::

    @ember.register_func("demo.add_one")
    def add_one(x):
        return x + 1

    ember.get_global_func("demo.add_one")(1)   # -> 2
"""

from __future__ import annotations

import ctypes
import difflib
from collections.abc import Callable
from typing import Any, TypeVar, overload

from ember.errors import RegistryError
from ember.runtime import c_api
from ember.runtime.c_api import EmberGlobalFallback
from ember.runtime.packed_func import HandlePackedFunc, PackedFunc, as_packed_func
from ember.support.registry import Registry

F = TypeVar("F", bound=Callable[..., Any])

GLOBAL_FUNCS: Registry[PackedFunc] = Registry("global function")


@overload
def register_func(name: str, f: None = None, override: bool = False) -> Callable[[F], F]: ...
@overload
def register_func(name: str, f: F, override: bool = False) -> F: ...
def register_func(name: str, f: Any = None, override: bool = False) -> Any:
    """Register ``f`` as the global function ``name``; without ``f`` return a decorator."""
    if callable(name) and f is None:
        raise RegistryError("register_func needs a name: use @register_func('my.name')")

    def wrap(func: Any) -> Any:
        GLOBAL_FUNCS.register(name, as_packed_func(func), override=override)
        return func

    return wrap if f is None else wrap(f)


def find_python_func(name: str) -> PackedFunc | None:
    """The PackedFunc registered from Python under ``name``, or None."""
    return GLOBAL_FUNCS.find(name)


def _c_global(name: str) -> PackedFunc | None:
    if not c_api.is_loaded():
        return None
    out = ctypes.c_void_p()
    c_api.check_call(c_api.lib().EmberFuncGetGlobal(name.encode("utf-8"), ctypes.byref(out)))
    return HandlePackedFunc(out.value) if out.value else None


def _c_global_names() -> list[str]:
    if not c_api.is_loaded():
        return []
    lib = c_api.lib()
    size = ctypes.c_size_t()
    c_api.check_call(lib.EmberFuncListGlobalNames(None, 0, ctypes.byref(size)))
    buf = ctypes.create_string_buffer(size.value + 1)
    c_api.check_call(lib.EmberFuncListGlobalNames(buf, size.value + 1, ctypes.byref(size)))
    raw = buf.raw[: size.value]
    return [n.decode("utf-8") for n in raw.split(b"\0") if n]


def get_global_func(name: str, allow_missing: bool = False) -> Any:
    """The global function ``name`` (Python or C); a miss raises naming close matches."""
    func = GLOBAL_FUNCS.find(name)
    if func is None:
        func = _c_global(name)
    if func is not None or allow_missing:
        return func
    known = list_global_funcs()
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    msg = f"unknown global function '{name}'"
    if close:
        msg += f"; did you mean {', '.join(repr(c) for c in close)}?"
    msg += "; register it with ember.register_func(name, f)"
    raise RegistryError(msg)


def list_global_funcs() -> list[str]:
    """Every global function name, from Python and from the C runtime, sorted."""
    return sorted(set(GLOBAL_FUNCS.names()) | set(_c_global_names()))


def remove_global_func(name: str) -> None:
    """Remove a Python-registered global function (raises if unknown)."""
    GLOBAL_FUNCS.unregister(name)


def register_c_func(name: str, func: PackedFunc, override: bool = False) -> None:
    """Register ``func`` in the C runtime's own table (visible to standalone C code too)."""
    c_api.check_call(
        c_api.lib().EmberFuncRegisterGlobal(name.encode("utf-8"), func.handle, int(override))
    )


def _global_fallback(name: bytes | None, out: Any) -> int:
    try:
        out[0] = None
        func = find_python_func((name or b"").decode("utf-8"))
        if func is not None:
            handle = func.handle
            c_api.check_call(c_api.lib().EmberFuncRetain(handle))
            out[0] = handle
        return 0
    except BaseException as exc:  # noqa: BLE001
        c_api.set_pending_exception(exc, f"{type(exc).__name__}: {exc} (in the global lookup)")
        return -1


_FALLBACK = EmberGlobalFallback(_global_fallback)


def install_global_fallback(lib: ctypes.CDLL) -> None:
    """Let C lookups of unknown global names find functions registered from Python."""
    lib.EmberFuncSetGlobalFallback(_FALLBACK)


c_api.add_load_hook("global_fallback", install_global_fallback)
