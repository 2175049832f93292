"""PyCapsule access through ctypes.pythonapi, and the DLPack producer.

:func:`export_capsule` returns a legacy ``"dltensor"`` capsule over a DLTensor whose
DLManagedTensor keeps the tensor's owner alive until the consumer calls the deleter (or
the capsule dies unconsumed). It sits below :mod:`ember.runtime.ndarray`
(``NDArray.__dlpack__`` calls it); the consumer side is :mod:`ember.runtime.dlpack`.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from ember.runtime.c_api import DLManagedTensor, DLManagedTensorDeleter, DLTensor

LEGACY = b"dltensor"
VERSIONED = b"dltensor_versioned"


def _api(name: str, restype: Any, argtypes: list[Any]) -> Any:
    fn = ctypes.pythonapi[name]  # a fresh function object: argtypes are ours alone
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


PyCapsule_New = _api(
    "PyCapsule_New", ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
)
PyCapsule_GetPointer = _api(
    "PyCapsule_GetPointer", ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
)
PyCapsule_SetName = _api("PyCapsule_SetName", ctypes.c_int, [ctypes.py_object, ctypes.c_char_p])
PyCapsule_IsValid = _api("PyCapsule_IsValid", ctypes.c_int, [ctypes.py_object, ctypes.c_char_p])
# The destructor sees a capsule whose refcount is already zero: raw pointers only.
_RawCapsule_IsValid = _api("PyCapsule_IsValid", ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p])
_RawCapsule_GetPointer = _api(
    "PyCapsule_GetPointer", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]
)

# ---- producer ------------------------------------------------------------------
# address of an exported DLManagedTensor -> what must stay alive until its deleter runs
_EXPORTED: dict[int, tuple[DLManagedTensor, object]] = {}
_EXPORTED_LOCK = threading.Lock()


def _managed_deleter(address: int | None) -> None:
    if address:
        with _EXPORTED_LOCK:
            _EXPORTED.pop(address, None)


_DELETER = DLManagedTensorDeleter(_managed_deleter)


def _capsule_destructor(capsule: int | None) -> None:
    # Called when the capsule dies; if nobody consumed it, release the export ourselves.
    if capsule and _RawCapsule_IsValid(capsule, LEGACY):
        _managed_deleter(_RawCapsule_GetPointer(capsule, LEGACY))


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_capsule_destructor)
_CAPSULE_DESTRUCTOR_ADDR = ctypes.cast(_CAPSULE_DESTRUCTOR, ctypes.c_void_p).value


def export_capsule(dlt: DLTensor, owner: object) -> Any:
    """A legacy ``"dltensor"`` capsule over ``dlt`` (keeps ``owner`` alive until released)."""
    managed = DLManagedTensor()
    ctypes.pointer(managed.dl_tensor)[0] = dlt  # copies the struct (shape ptr shared)
    managed.manager_ctx = None
    managed.deleter = _DELETER
    address = ctypes.addressof(managed)
    with _EXPORTED_LOCK:
        _EXPORTED[address] = (managed, owner)
    return PyCapsule_New(address, LEGACY, _CAPSULE_DESTRUCTOR_ADDR)


def exported_count() -> int:
    """How many exported capsules have not been released yet (for leak tests)."""
    return len(_EXPORTED)
