"""Optional accelerator for Python -> C packed calls (src/python_ffi.c as a CPython extension).

Built on first need (never at import) into the cache next to the C runtime, keyed by the
source, the header and the Python ABI; loaded with importlib. When Python headers or a
compiler are missing, or EMBER_FFI_ACCEL=0, :func:`extension` returns None and ember uses
its ctypes path, which behaves identically (only slower per call). Example::

    fast = make_fast_func(address, 0, slow_call)   # None when unavailable
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sysconfig
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from ember.config import config
from ember.errors import EmberError
from ember.runtime import c_api
from ember.runtime.cache_entry import cache_subdir, cached_build
from ember.runtime.libruntime import header_path, include_dir
from ember.support.hashing import hash_bytes
from ember.support.toolchain import compile_shared

_SOURCE = Path(__file__).resolve().parent / "src" / "python_ffi.c"
_MODULE_NAME = "_ember_ffi"
_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


def _python_include() -> Path:
    return Path(sysconfig.get_paths()["include"])


def extension_path() -> Path:
    """Where the built extension lives for this source, header and Python ABI."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    key = hash_bytes(
        _SOURCE.read_bytes(), header_path().read_bytes(), suffix.encode(), config().cc.encode()
    )
    return cache_subdir("runtime") / f"{_MODULE_NAME}-{key}{suffix}"


def _build_and_load() -> ModuleType | None:
    if not config().ffi_accel:
        _STATE["reason"] = "disabled by EMBER_FFI_ACCEL=0"
        return None
    if not (_python_include() / "Python.h").exists():
        _STATE["reason"] = f"no Python.h in {_python_include()} (install the Python dev headers)"
        return None
    path = extension_path()
    try:
        cached_build(  # a planted or altered extension is rebuilt, never imported
            path,
            lambda out: compile_shared(
                [_SOURCE], out, include_dirs=[_python_include(), include_dir()], openmp=False
            ),
        )
        loader = importlib.machinery.ExtensionFileLoader(_MODULE_NAME, str(path))
        spec = importlib.util.spec_from_file_location(_MODULE_NAME, path, loader=loader)
        if spec is None:
            raise ImportError(f"no import spec for {path}")
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except (EmberError, ImportError, OSError) as err:
        _STATE["reason"] = f"build or load failed: {err}"
        return None
    _STATE["reason"] = f"loaded from {path}"
    return module


def extension() -> ModuleType | None:
    """The accelerator module, built and loaded once; None when unavailable."""
    if "module" not in _STATE:
        with _LOCK:
            if "module" not in _STATE:
                _STATE["module"] = _build_and_load()
    module: ModuleType | None = _STATE["module"]
    return module


def status() -> str:
    """Why the accelerator is or is not in use (for diagnostics and bug reports)."""
    extension()
    return str(_STATE.get("reason", "unknown"))


def make_fast_func(
    address: int,
    resource: int,
    slow_call: Callable[..., Any],
    decode: Callable[[int, int], Any],
    ndarray_type: type,
) -> Callable[..., Any] | None:
    """A vectorcall callable for the C function at ``address``, or None without the extension."""
    module = extension()
    if module is None:
        return None
    fast: Callable[..., Any] = module.FastFunc(
        address, resource, ndarray_type, slow_call, c_api.check_call, decode
    )
    return fast


def make_prepared_call(
    address: int,
    values: int,
    codes: int,
    num_args: int,
    ret_value: int,
    ret_code: int,
    resource: int,
) -> Callable[[], int] | None:
    """A no-argument callable making the packed call at ``address`` over argument arrays
    built once (raw addresses the caller keeps alive) and returning its status; None
    without the extension."""
    module = extension()
    if module is None:
        return None
    call: Callable[[], int] = module.PreparedCall(
        address, values, codes, num_args, ret_value, ret_code, resource
    )
    return call
