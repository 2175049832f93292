"""The few oneDNN C API functions the onednn back end calls, declared with ctypes.

The pip wheel ``onednn`` ships ``lib/libdnnl.so`` but no headers, and its dependencies
(TBB, the SYCL runtime, Intel's math libraries) sit next to it without a RUNPATH, so a
C artifact could not be compiled against it nor find them. The loader therefore drives
oneDNN from Python: it preloads the dependencies by absolute path (``RTLD_GLOBAL``), then
declares just these functions (the values below are those of oneDNN 3.x's
``dnnl_types.h``). Every status goes through :func:`check`.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from ctypes import POINTER, c_float, c_int, c_int64, c_size_t, c_uint, c_void_p
from functools import cache

from ember.errors import ExecutorError, ModuleLoadError

DNNL_CPU = 1
DNNL_F32 = 3
DNNL_FORWARD_INFERENCE = 0x60
DNNL_CONVOLUTION_DIRECT = 0x1
DNNL_ELTWISE_RELU = 0x20
DNNL_STREAM_IN_ORDER = 0x1
ARG_SRC, ARG_DST, ARG_WEIGHTS, ARG_BIAS = 1, 17, 33, 41
MAX_DIMS = 12

Dims = c_int64 * MAX_DIMS


class ExecArg(ctypes.Structure):
    """``dnnl_exec_arg_t``: an argument index and a memory object."""

    _fields_ = [("arg", c_int), ("memory", c_void_p)]


_SIGNATURES: dict[str, tuple[type, ...]] = {
    "dnnl_engine_create": (POINTER(c_void_p), c_int, c_size_t),
    "dnnl_stream_create": (POINTER(c_void_p), c_void_p, c_uint),
    "dnnl_stream_wait": (c_void_p,),
    "dnnl_memory_desc_create_with_strides": (POINTER(c_void_p), c_int, Dims, c_int, Dims),
    "dnnl_memory_desc_destroy": (c_void_p,),
    "dnnl_primitive_attr_create": (POINTER(c_void_p),),
    "dnnl_primitive_attr_set_post_ops": (c_void_p, c_void_p),
    "dnnl_post_ops_create": (POINTER(c_void_p),),
    "dnnl_post_ops_append_eltwise": (c_void_p, c_int, c_float, c_float),
    "dnnl_matmul_primitive_desc_create": (
        POINTER(c_void_p), c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p,
    ),
    "dnnl_convolution_forward_primitive_desc_create": (
        POINTER(c_void_p), c_void_p, c_int, c_int, c_void_p, c_void_p, c_void_p, c_void_p,
        Dims, Dims, Dims, Dims, c_void_p,
    ),
    "dnnl_primitive_create": (POINTER(c_void_p), c_void_p),
    "dnnl_memory_create": (POINTER(c_void_p), c_void_p, c_void_p, c_void_p),
    "dnnl_memory_set_data_handle": (c_void_p, c_void_p),
    "dnnl_primitive_execute": (c_void_p, c_void_p, c_int, POINTER(ExecArg)),
}  # fmt: skip


def library_dir() -> str:
    """Where the ``onednn`` wheel put libdnnl.so (``<prefix>/lib``)."""
    return os.path.join(sys.prefix, "lib")


@cache
def library() -> ctypes.CDLL:
    """libdnnl with its dependencies preloaded and the functions above declared."""
    path = os.path.join(library_dir(), "libdnnl.so.3")
    if not os.path.exists(path):
        raise ModuleLoadError(
            f"the onednn back end needs libdnnl.so.3, not found in {library_dir()}: "
            "pip install onednn (or `pip install ember[backends]`)"
        )
    # the wheel's CPU runtime is SYCL on Intel's OpenCL CPU device: name its ICD
    icd = os.path.join(library_dir(), "libintelocl.so")
    if os.path.exists(icd):
        os.environ.setdefault("OCL_ICD_FILENAMES", icd)
    _preload(path, set())
    lib = ctypes.CDLL(path)
    for name, args in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = list(args), c_int
    return lib


def _preload(path: str, seen: set[str]) -> None:
    """Load the libraries ``path`` needs that sit next to it, dependencies first."""
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=False)
    for line in out.stdout.splitlines():
        if "(NEEDED)" in line:
            dep = os.path.join(os.path.dirname(path), line.split("[")[1].split("]")[0])
            if dep not in seen and os.path.exists(dep):
                seen.add(dep)
                _preload(dep, seen)
                try:
                    ctypes.CDLL(dep, mode=ctypes.RTLD_GLOBAL)
                except OSError as err:
                    raise ModuleLoadError(
                        f"onednn: cannot load its dependency {dep} ({err}); reinstall onednn"
                    ) from None


def check(status: int, what: str) -> None:
    """Raise a ExecutorError naming the call when a oneDNN status is not success."""
    if status != 0:
        raise ExecutorError(f"onednn: {what} failed with dnnl_status_t {status}")


def dims(values: list[int] | tuple[int, ...]) -> ctypes.Array[c_int64]:
    """A ``dnnl_dims_t`` holding ``values``."""
    out = Dims()
    for i, v in enumerate(values):
        out[i] = int(v)
    return out
