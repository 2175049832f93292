"""The C ABI seen from Python: the ONE module of ctypes declarations matching runtime_api.h.

Everything that crosses into C is declared here: type codes, the value union, the DLPack
structs, the packed-function signature, and the prototypes of every exported function
(``PROTOTYPES``). :func:`lib` returns the loaded C runtime with those prototypes bound; it
compiles the runtime on first use. Every C return code goes through :func:`check_call`.
A test (tests/runtime/test_c_api.py) compiles a probe against the header and checks that
sizes, offsets, enum values and prototypes agree with this module.
"""

from __future__ import annotations

import ctypes
import enum
import threading
from collections.abc import Callable
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    Union,
    c_char_p,
    c_double,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint16,
    c_uint64,
    c_void_p,
)
from typing import Any

from ember.config import config
from ember.errors import FFIError
from ember.runtime import libruntime
from ember.support.registry import Registry


class TypeCode(enum.IntEnum):
    """Type codes of packed values (TVM's numbering)."""

    INT = 0
    UINT = 1
    FLOAT = 2
    OPAQUE_HANDLE = 3
    NULL = 4
    DATA_TYPE = 5
    DEVICE = 6
    DLTENSOR_HANDLE = 7
    OBJECT_HANDLE = 8
    MODULE_HANDLE = 9
    PACKED_FUNC_HANDLE = 10
    STR = 11
    BYTES = 12
    NDARRAY_HANDLE = 13


class DLDeviceType(enum.IntEnum):
    """DLPack device types (the subset ember names)."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLExtDev = 12


class DLDataTypeCode(enum.IntEnum):
    """DLPack data type codes."""

    kDLInt = 0
    kDLUInt = 1
    kDLFloat = 2
    kDLOpaqueHandle = 3
    kDLBfloat = 4
    kDLComplex = 5
    kDLBool = 6


class DLDevice(Structure):
    """DLPack ``DLDevice``."""

    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    """DLPack ``DLDataType``."""

    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    """DLPack ``DLTensor``."""

    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    """DLPack ``DLManagedTensor`` (the legacy, unversioned capsule payload)."""


DLManagedTensorDeleter = CFUNCTYPE(None, c_void_p)
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", c_void_p),
    ("deleter", DLManagedTensorDeleter),
]


class DLPackVersion(Structure):
    """DLPack 1.x ``DLPackVersion`` (read when a producer hands a versioned capsule)."""

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(Structure):
    """DLPack 1.x ``DLManagedTensorVersioned``."""

    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", c_void_p),
        ("deleter", DLManagedTensorDeleter),
        ("flags", c_uint64),
        ("dl_tensor", DLTensor),
    ]


class EmberValue(Union):
    """The value union of one packed argument or return value."""

    _fields_ = [
        ("v_int64", c_int64),
        ("v_float64", c_double),
        ("v_handle", c_void_p),
        ("v_str", c_char_p),
        ("v_type", DLDataType),
        ("v_device", DLDevice),
    ]


class EmberByteArray(Structure):
    """What a value with type code BYTES points to."""

    _fields_ = [("data", c_void_p), ("size", c_size_t)]


class EmberParallelGroupEnv(Structure):
    """The environment a parallel task receives."""

    _fields_ = [("sync_handle", c_void_p), ("num_task", c_int32)]


EmberFunctionHandle = c_void_p


class EmberCallFrame(Structure):
    """Everything one packed call needs, passed to ``EmberFuncCallFrame`` as one pointer."""

    _fields_ = [
        ("func", c_void_p),
        ("resource_handle", c_void_p),
        ("handle", c_void_p),
        ("args", c_void_p),
        ("type_codes", c_void_p),
        ("num_args", c_int32),
        ("ret_type_code", c_int32),
        ("ret_value", EmberValue),
    ]


# int32_t (*)(EmberValue*, int32_t*, int32_t, EmberValue*, int32_t*, void*); pointers as
# c_void_p so that Python passes plain integers (cheap) instead of ctypes pointer objects.
EmberPackedCFunc = CFUNCTYPE(c_int32, c_void_p, c_void_p, c_int32, c_void_p, c_void_p, c_void_p)
EmberGlobalFallback = CFUNCTYPE(c_int32, c_char_p, POINTER(c_void_p))
EmberFinalizer = CFUNCTYPE(None, c_void_p)
FEmberParallelLambda = CFUNCTYPE(c_int32, c_int32, POINTER(EmberParallelGroupEnv), c_void_p)
FEmberParallelRange = CFUNCTYPE(c_int32, c_int64, c_int64, c_void_p)

# name -> (restype, argtypes); the header declares exactly these functions.
PROTOTYPES: dict[str, tuple[Any, tuple[Any, ...]]] = {
    "EmberAPISetLastError": (None, (c_char_p,)),
    "EmberGetLastError": (c_char_p, ()),
    "EmberFuncCreateFromCFunc": (
        c_int32,
        (EmberPackedCFunc, c_void_p, EmberFinalizer, POINTER(EmberFunctionHandle)),
    ),
    "EmberFuncRetain": (c_int32, (EmberFunctionHandle,)),
    "EmberFuncFree": (c_int32, (EmberFunctionHandle,)),
    "EmberFuncCall": (
        c_int32,
        (EmberFunctionHandle, c_void_p, c_void_p, c_int32, c_void_p, c_void_p),
    ),
    "EmberFuncGetCFunc": (c_int32, (EmberFunctionHandle, POINTER(c_void_p), POINTER(c_void_p))),
    "EmberFuncCallFrame": (c_int32, (POINTER(EmberCallFrame),)),
    "EmberFuncRegisterGlobal": (c_int32, (c_char_p, EmberFunctionHandle, c_int32)),
    "EmberFuncGetGlobal": (c_int32, (c_char_p, POINTER(EmberFunctionHandle))),
    "EmberFuncRemoveGlobal": (c_int32, (c_char_p,)),
    "EmberFuncListGlobalNames": (c_int32, (c_char_p, c_size_t, POINTER(c_size_t))),
    "EmberFuncSetGlobalFallback": (c_int32, (EmberGlobalFallback,)),
    "EmberBackendGetFuncFromEnv": (c_int32, (c_void_p, c_char_p, POINTER(EmberFunctionHandle))),
    "EmberBackendAllocWorkspace": (c_void_p, (c_int32, c_int32, c_uint64, c_int32, c_int32)),
    "EmberBackendFreeWorkspace": (c_int32, (c_int32, c_int32, c_void_p)),
    "EmberStringArenaCreate": (c_void_p, ()),
    "EmberStringArenaReset": (None, (c_void_p,)),
    "EmberStringArenaFree": (None, (c_void_p,)),
    "EmberStringArenaSwap": (c_void_p, (c_void_p,)),
    "EmberStringArenaBytes": (c_int64, (c_void_p,)),
    "EmberBackendStringAlloc": (c_void_p, (c_int64,)),
    "EmberBackendParallelLaunch": (c_int32, (FEmberParallelLambda, c_void_p, c_int32)),
    "EmberBackendParallelBarrier": (c_int32, (c_int32, POINTER(EmberParallelGroupEnv))),
    "EmberBackendSetNumThreads": (c_int32, (c_int32,)),
    "EmberBackendGetNumThreads": (c_int32, ()),
    "EmberBackendParallelFor": (
        c_int32,
        (FEmberParallelRange, c_void_p, c_int64, c_int64, c_int32),
    ),
    "EmberBackendNumCores": (c_int32, ()),
    "EmberBackendPoolStats": (c_int32, (c_void_p, c_int32)),
    "EmberBackendPoolPolicy": (c_int32, (c_int32, c_int32)),
    "EmberBackendRunBegin": (c_int32, (c_void_p,)),
    "EmberBackendRunEnd": (c_int32, (c_void_p,)),
    "EmberBackendRunBeginPacked": (
        c_int32,
        (c_void_p, c_void_p, c_int32, c_void_p, c_void_p, c_void_p),
    ),
    "EmberBackendRunEndPacked": (
        c_int32,
        (c_void_p, c_void_p, c_int32, c_void_p, c_void_p, c_void_p),
    ),
    "EmberBackendGovernedCall": (
        c_int32,
        (c_void_p, c_void_p, c_int32, c_void_p, c_void_p, c_void_p),
    ),
    "EmberBackendRunChoice": (c_int32, (c_void_p, c_int32, c_void_p, c_int32)),
    "EmberTimeEvaluate": (
        c_int32,
        (
            EmberFunctionHandle,
            c_void_p,
            c_void_p,
            c_int32,
            c_int32,
            c_int32,
            c_int32,
            c_int32,
            POINTER(c_double),
        ),
    ),
    "EmberRuntimeABIVersion": (c_int32, ()),
}

ABI_VERSION = 1

_LIB: list[ctypes.CDLL] = []
_LIB_LOCK = threading.Lock()

#: Called with the C runtime right after it is loaded, in name order. Modules above this one
#: register here (registry.py installs the lookup of Python-registered global functions).
LOAD_HOOKS: Registry[Callable[[ctypes.CDLL], None]] = Registry("C runtime load hook")


def add_load_hook(name: str, hook: Callable[[ctypes.CDLL], None]) -> None:
    """Run ``hook(lib)`` once the C runtime is loaded (at once when it already is)."""
    with _LIB_LOCK:
        LOAD_HOOKS.register(name, hook)
        if _LIB:
            hook(_LIB[0])


def lib() -> ctypes.CDLL:
    """The C runtime with every prototype bound (built and loaded on first use)."""
    if _LIB:
        return _LIB[0]
    with _LIB_LOCK:
        if not _LIB:
            raw = libruntime.load()
            for name, (restype, argtypes) in PROTOTYPES.items():
                fn = getattr(raw, name)
                fn.restype = restype
                fn.argtypes = list(argtypes)
            version = raw.EmberRuntimeABIVersion()
            if version != ABI_VERSION:
                raise FFIError(
                    f"the loaded C runtime has ABI version {version}, Python expects "
                    f"{ABI_VERSION}; clear {config().cache_dir / 'runtime'} and retry"
                )
            if config().num_threads > 0:
                raw.EmberBackendSetNumThreads(config().num_threads)
            _LIB.append(raw)
            for hook_name in LOAD_HOOKS.names():
                LOAD_HOOKS.get(hook_name)(raw)
    return _LIB[0]


def frame_caller() -> Any:
    """``EmberFuncCallFrame`` without argtypes, for the hot path: pass a prebuilt byref(frame)."""
    fn = lib()["EmberFuncCallFrame"]  # a fresh function object, independent of PROTOTYPES
    fn.restype = c_int32
    return fn


def is_loaded() -> bool:
    """Whether :func:`lib` has loaded the C runtime already."""
    return bool(_LIB)


# ---- errors ----------------------------------------------------------------
_PENDING = threading.local()


def set_pending_exception(exc: BaseException, message: str) -> None:
    """Record a Python exception raised inside a callback called from C (this thread)."""
    _PENDING.value = (exc, message)
    lib().EmberAPISetLastError(message.encode("utf-8", "replace"))


def last_error() -> str:
    """The C runtime's last error message on this thread."""
    msg = lib().EmberGetLastError()
    return msg.decode("utf-8", "replace") if msg else ""


def check_call(ret: int) -> None:
    """Raise for a non-zero C return code: the original Python exception when one caused it."""
    if ret == 0:
        return
    message = last_error()
    pending = getattr(_PENDING, "value", None)
    _PENDING.value = None
    if pending is not None:
        exc, pending_message = pending
        if message == pending_message:
            raise exc
        raise FFIError(message or f"C call failed with code {ret}") from exc
    raise FFIError(message or f"C call failed with code {ret} and no error message")
