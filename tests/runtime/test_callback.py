"""C -> Python calls through both trampolines (the C one of the extension, the ctypes one)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from runtime_test_util import build_library

import ember
import ember.runtime as rt
from ember.runtime import callback, fastcall

C_SOURCE = r"""
/* call the function args[0] with the remaining arguments; return what it returns */
EMBER_DLL int32_t forward(EMBER_ARGS) {
  if (n < 1 || codes[0] != EMBER_PACKED_FUNC_HANDLE) {
    EmberAPISetLastError("forward: first argument must be a function");
    return -1;
  }
  return EmberFuncCall(args[0].v_handle, args + 1, codes + 1, n - 1, ret, ret_code);
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return build_library(tmp_path_factory.mktemp("cb"), C_SOURCE, "callback")


@pytest.fixture(params=["extension", "ctypes"])
def path(request, monkeypatch):
    if request.param == "extension":
        if fastcall.extension() is None:
            pytest.skip(f"accelerator unavailable: {fastcall.status()}")
    else:
        monkeypatch.setattr(callback, "_USE_EXTENSION", False)
    return request.param


@pytest.mark.cc
def test_arguments_and_returns(lib, path):
    fwd = lib["forward"]
    arr = ember.nd.array(np.arange(3, dtype="float32"))
    assert fwd(lambda *a: a[0] + a[1], 2, 3) == 5
    assert fwd(lambda x: x * 2, 1.25) == 2.5
    assert fwd(lambda x: x is None, None) == 1  # True packs as the int 1
    assert fwd(lambda s: s + "!", "héllo") == "héllo!"
    assert fwd(lambda b: b[::-1], b"abc") == b"cba"
    assert fwd(lambda t: float(t.numpy().sum()), arr) == 3.0
    assert fwd(lambda: 2**64 - 1) == 2**64 - 1
    assert fwd(lambda: rt.dtype("int8")) == rt.dtype("int8")
    assert fwd(lambda: None) is None
    back = fwd(lambda t: t, arr)
    assert back.data_ptr == arr.data_ptr
    inner = fwd(lambda: lambda y: y + 1)
    assert isinstance(inner, rt.PackedFunc) and inner(41) == 42


@pytest.mark.cc
def test_exception_is_reraised(lib, path):
    err = KeyError("missing key")

    def bad():
        raise err

    with pytest.raises(KeyError) as info:
        lib["forward"](bad)
    assert info.value is err


@pytest.mark.cc
def test_handle_releases_the_callable(lib, path):
    def make():
        def f(x):
            return x

        return f

    func = make()
    ref = weakref.ref(func)
    packed = rt.PyPackedFunc(func)
    assert lib["forward"](packed, 7) == 7
    count = len(callback._PY_FUNCS)
    del func, packed
    gc.collect()
    assert ref() is None
    assert len(callback._PY_FUNCS) <= count


def test_trampoline_choice():
    func = rt.PyPackedFunc(lambda: 1)
    before = len(callback._PY_FUNCS)
    assert func.handle
    grew = len(callback._PY_FUNCS) - before
    assert grew == (0 if fastcall.extension() is not None else 1)
