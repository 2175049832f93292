"""PackedFunc across Python and C: arguments, returns, callbacks and errors both ways."""

from __future__ import annotations

import threading
import traceback

import numpy as np
import pytest
from runtime_test_util import build_library

import ember
import ember.runtime as rt
from ember.errors import EmberTypeError, FFIError

C_SOURCE = r"""
EMBER_DLL int32_t add_ints(EMBER_ARGS) {
  if (n != 3) { EmberAPISetLastError("add_ints: expected 3 arguments"); return -1; }
  for (int i = 0; i < 3; ++i) {
    if (codes[i] != EMBER_INT) { EmberAPISetLastError("add_ints: expected ints"); return -1; }
  }
  ret->v_int64 = args[0].v_int64 + args[1].v_int64 + args[2].v_int64;
  *ret_code = EMBER_INT;
  return 0;
}
EMBER_DLL int32_t scale_float(EMBER_ARGS) {
  ret->v_float64 = args[0].v_float64 * 2.5;
  *ret_code = EMBER_FLOAT;
  return 0;
}
EMBER_DLL int32_t str_len(EMBER_ARGS) {
  if (codes[0] != EMBER_STR) { EmberAPISetLastError("str_len: expected a string"); return -1; }
  ret->v_int64 = (int64_t)strlen(args[0].v_str);
  *ret_code = EMBER_INT;
  return 0;
}
static char g_buf[64];
EMBER_DLL int32_t greet(EMBER_ARGS) {
  snprintf(g_buf, sizeof(g_buf), "hello %s", args[0].v_str);
  ret->v_str = g_buf;
  *ret_code = EMBER_STR;
  return 0;
}
EMBER_DLL int32_t bytes_sum(EMBER_ARGS) {
  if (codes[0] != EMBER_BYTES) { EmberAPISetLastError("bytes_sum: expected bytes"); return -1; }
  EmberByteArray* b = (EmberByteArray*)args[0].v_handle;
  int64_t s = 0;
  for (size_t i = 0; i < b->size; ++i) s += (unsigned char)b->data[i];
  ret->v_int64 = s * 1000 + (int64_t)b->size;
  *ret_code = EMBER_INT;
  return 0;
}
static EmberByteArray g_bytes = {"a\0b", 3};
EMBER_DLL int32_t give_bytes(EMBER_ARGS) {
  ret->v_handle = &g_bytes;
  *ret_code = EMBER_BYTES;
  return 0;
}
/* out[i] = a[i] + b[i] on float32 tensors; accepts NDArray and DLTensor codes alike */
EMBER_DLL int32_t vadd(EMBER_ARGS) {
  if (n != 3) { EmberAPISetLastError("vadd: expected 3 tensors"); return -1; }
  for (int i = 0; i < 3; ++i) {
    if (codes[i] != EMBER_NDARRAY_HANDLE && codes[i] != EMBER_DLTENSOR_HANDLE) {
      EmberAPISetLastError("vadd: expected tensors"); return -1;
    }
  }
  DLTensor* a = (DLTensor*)args[0].v_handle;
  DLTensor* b = (DLTensor*)args[1].v_handle;
  DLTensor* c = (DLTensor*)args[2].v_handle;
  if (a->dtype.code != kDLFloat || a->dtype.bits != 32) {
    EmberAPISetLastError("vadd: expected float32"); return -1;
  }
  int64_t size = 1;
  for (int i = 0; i < a->ndim; ++i) size *= a->shape[i];
  for (int64_t i = 0; i < size; ++i)
    ((float*)c->data)[i] = ((float*)a->data)[i] + ((float*)b->data)[i];
  return 0;
}
EMBER_DLL int32_t echo(EMBER_ARGS) {
  /* a returned function handle is a new reference owned by the caller */
  if (codes[0] == EMBER_PACKED_FUNC_HANDLE) EmberFuncRetain(args[0].v_handle);
  *ret = args[0];
  *ret_code = codes[0];
  return 0;
}
EMBER_DLL int32_t arg_code(EMBER_ARGS) {
  ret->v_int64 = codes[0];
  *ret_code = EMBER_INT;
  return 0;
}
/* call the global function args[0] with the int args[1]; return its result + 1 */
EMBER_DLL int32_t call_global(EMBER_ARGS) {
  EmberFunctionHandle f;
  if (EmberFuncGetGlobal(args[0].v_str, &f) != 0) return -1;
  if (f == NULL) { EmberAPISetLastError("call_global: no such function"); return -1; }
  EmberValue a[1];
  int32_t c[1] = {EMBER_INT};
  a[0].v_int64 = args[1].v_int64;
  EmberValue r;
  int32_t rc;
  int32_t status = EmberFuncCall(f, a, c, 1, &r, &rc);
  EmberFuncFree(f);
  if (status != 0) return -1;
  if (rc != EMBER_INT) {
    EmberAPISetLastError("call_global: callee returned a non-int");
    return -1;
  }
  ret->v_int64 = r.v_int64 + 1;
  *ret_code = EMBER_INT;
  return 0;
}
/* call the function passed as args[0] with a string; return what it returns */
EMBER_DLL int32_t call_arg(EMBER_ARGS) {
  if (codes[0] != EMBER_PACKED_FUNC_HANDLE) {
    EmberAPISetLastError("call_arg: not a function");
    return -1;
  }
  EmberValue a[1];
  int32_t c[1] = {EMBER_STR};
  a[0].v_str = "from C";
  return EmberFuncCall(args[0].v_handle, a, c, 1, ret, ret_code);
}
/* call args[0] with a tensor args[1] and forward its result */
EMBER_DLL int32_t call_with_tensor(EMBER_ARGS) {
  return EmberFuncCall(args[0].v_handle, &args[1], &codes[1], 1, ret, ret_code);
}
"""


class _CtypesOnly:
    """The same library, but every function takes ember's ctypes path (no extension)."""

    def __init__(self, module):
        self.module = module

    def __getitem__(self, name):
        address, _ = self.module[name].c_entry()
        func = rt.CPackedFunc(address, owner=self.module, name=name, accelerate=False)
        assert not func.accelerated
        return func


@pytest.fixture(scope="module", params=["accelerated", "ctypes"])
def lib(request, tmp_path_factory):
    module = build_library(tmp_path_factory.mktemp("pf"), C_SOURCE, "packed")
    return module if request.param == "accelerated" else _CtypesOnly(module)


@pytest.fixture(autouse=True)
def _trampoline_matches_call_path(request, monkeypatch):
    """With the ctypes-only library, C -> Python calls use the ctypes trampoline too."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("lib") == "ctypes":
        from ember.runtime import callback

        monkeypatch.setattr(callback, "_USE_EXTENSION", False)


def test_accelerator_is_used_when_available(tmp_path):
    from ember.runtime import fastcall

    module = build_library(tmp_path, C_SOURCE, "accel")
    assert module["add_ints"].accelerated == (fastcall.extension() is not None)
    assert fastcall.status()


def test_prepared_call_makes_the_packed_call_over_arrays_built_once(tmp_path):
    import ctypes

    from ember.runtime import fastcall

    if fastcall.extension() is None:
        pytest.skip(f"no accelerator: {fastcall.status()}")
    module = build_library(tmp_path, C_SOURCE, "prepared")
    address, _ = module["add_ints"].c_entry()
    values = (rt.c_api.EmberValue * 3)()
    for k, v in enumerate((1, 2, 39)):
        values[k].v_int64 = v
    codes = (ctypes.c_int32 * 3)(*[int(rt.c_api.TypeCode.INT)] * 3)
    ret, ret_code = rt.c_api.EmberValue(), ctypes.c_int32(0)
    addrs = [ctypes.addressof(x) for x in (values, codes, ret, ret_code)]
    call = fastcall.make_prepared_call(address, addrs[0], addrs[1], 3, addrs[2], addrs[3], 0)
    assert call is not None and call() == 0 and ret.v_int64 == 42
    values[2].v_int64 = 0  # the arrays are read at each call, not copied
    assert call() == 0 and ret.v_int64 == 3
    codes[0] = int(rt.c_api.TypeCode.FLOAT)  # the function's failure is its status
    assert call() == -1 and "expected ints" in rt.c_api.last_error()
    with pytest.raises(TypeError, match="takes no arguments"):
        call(1)
    with pytest.raises(ValueError, match="non-NULL"):
        fastcall.make_prepared_call(0, addrs[0], addrs[1], 3, addrs[2], addrs[3], 0)


def test_python_packed_func_calls_directly():
    f = rt.as_packed_func(lambda a, b: a * b)
    assert isinstance(f, rt.PackedFunc)
    assert f(6, 7) == 42
    assert rt.as_packed_func(f) is f
    with pytest.raises(EmberTypeError):
        rt.as_packed_func(3)


@pytest.mark.cc
def test_ints_floats_strings_bytes(lib):
    assert lib["add_ints"](1, 2, 3) == 6
    assert lib["add_ints"](-(2**40), 5, True) == -(2**40) + 6
    assert lib["add_ints"](np.int32(4), np.int64(5), 6) == 15
    assert lib["scale_float"](2.0) == 5.0
    assert lib["scale_float"](np.float32(4.0)) == 10.0
    assert lib["str_len"]("héllo") == len("héllo".encode())
    assert lib["greet"]("ember") == "hello ember"
    assert lib["bytes_sum"](b"\x01\x02\x00") == 3 * 1000 + 3
    assert lib["bytes_sum"](bytearray(b"\xff")) == 255 * 1000 + 1
    assert lib["give_bytes"]() == b"a\0b"


@pytest.mark.cc
def test_ndarrays_and_numpy_arrays(lib):
    a = ember.nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    b = ember.nd.array(np.full((2, 3), 10, dtype="float32"))
    c = ember.nd.empty((2, 3), "float32")
    assert lib["vadd"](a, b, c) is None
    np.testing.assert_array_equal(c.numpy(), a.numpy() + b.numpy())
    out = np.zeros((2, 3), dtype="float32")
    lib["vadd"](a, np.ones((2, 3), dtype="float32"), out)  # numpy arrays pass zero-copy
    np.testing.assert_array_equal(out, a.numpy() + 1)
    with pytest.raises(FFIError, match="expected float32"):
        lib["vadd"](ember.nd.array(np.zeros(3, "int32")), b, c)


@pytest.mark.cc
def test_echo_round_trips_each_type(lib):
    echo = lib["echo"]
    assert echo(5) == 5
    assert echo(2.25) == 2.25
    assert echo(None) is None
    assert echo("text") == "text"
    assert echo(b"raw") == b"raw"
    assert echo(rt.dtype("bfloat16")) == rt.DataType(4, 16, 1)
    assert echo(ember.cpu(3)) == ember.cpu(3)
    assert echo(2**64 - 1) == 2**64 - 1  # too big for int64: passed as UINT
    arr = ember.nd.array(np.arange(4, dtype="int16"))
    view = echo(arr)
    assert view.shape == (4,) and view.dtype == "int16" and view.data_ptr == arr.data_ptr
    assert lib["arg_code"](arr) == rt.TypeCode.NDARRAY_HANDLE
    assert lib["arg_code"](np.zeros(2)) == rt.TypeCode.DLTENSOR_HANDLE
    g = echo(rt.as_packed_func(lambda x: x + 100))
    assert isinstance(g, rt.PackedFunc) and g(1) == 101
    mod = rt.PythonModule({})
    assert echo(mod) is mod


@pytest.mark.cc
def test_c_calls_python_registered_function(lib):
    rt.register_func("test_pf.triple", lambda x: 3 * x, override=True)
    assert lib["call_global"]("test_pf.triple", 7) == 22


@pytest.mark.cc
def test_c_calls_python_function_passed_as_argument(lib):
    seen = []

    def callback(msg):
        seen.append(msg)
        return msg.upper()

    assert lib["call_arg"](callback) == "FROM C"
    assert seen == ["from C"]
    assert lib["call_arg"](rt.as_packed_func(lambda s: len(s))) == 6


@pytest.mark.cc
def test_callback_receives_tensor_view(lib):
    arr = ember.nd.array(np.arange(5, dtype="float64"))
    got = lib["call_with_tensor"](lambda t: float(t.numpy().sum()) + t.ndim, arr)
    assert got == 10.0 + 1


@pytest.mark.cc
def test_python_exception_crosses_c_with_original_object_and_traceback(lib):
    class Boom(ValueError):
        pass

    raised = Boom("exploded in python")

    def bad(x):
        raise raised

    rt.register_func("test_pf.bad", bad, override=True)
    with pytest.raises(Boom) as info:
        lib["call_global"]("test_pf.bad", 1)
    assert info.value is raised
    frames = "".join(traceback.format_tb(info.value.__traceback__))
    assert "in bad" in frames


@pytest.mark.cc
def test_c_error_reaches_python_as_ffi_error(lib):
    with pytest.raises(FFIError, match="add_ints: expected 3 arguments"):
        lib["add_ints"](1, 2)
    with pytest.raises(FFIError, match="expected ints"):
        lib["add_ints"](1, 2, "x")
    with pytest.raises(FFIError, match="no such function"):
        lib["call_global"]("test_pf.does_not_exist", 1)


@pytest.mark.cc
def test_callback_returning_wrong_type_is_reported_by_c(lib):
    rt.register_func("test_pf.returns_str", lambda x: "nope", override=True)
    with pytest.raises(FFIError, match="callee returned a non-int"):
        lib["call_global"]("test_pf.returns_str", 1)


@pytest.mark.cc
def test_wrong_argument_type_is_a_python_error(lib):
    with pytest.raises(EmberTypeError, match="argument 1 of type object"):
        lib["add_ints"](1, object(), 3)
    with pytest.raises(EmberTypeError, match="C-contiguous"):
        lib["vadd"](np.zeros((4, 4), "float32")[:, ::2], np.zeros(1), np.zeros(1))


@pytest.mark.cc
def test_many_arguments_and_threads(lib):
    echo = lib["echo"]
    assert echo(*range(40)) == 0
    results = []

    def work(k):
        results.append(all(lib["add_ints"](k, i, 1) == k + i + 1 for i in range(200)))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4


@pytest.mark.cc
def test_reentrant_call_uses_separate_buffers(lib):
    add = lib["add_ints"]
    # the callback calls the same C function while the outer call's buffers are in use
    rt.register_func("test_pf.reenter", lambda x: add(x, x, x), override=True)
    assert lib["call_global"]("test_pf.reenter", 2) == 7
    assert add(1, 1, 1) == 3


@pytest.mark.cc
def test_c_registered_global_is_found_from_python(lib):
    rt.register_c_func("test_pf.c_add", lib["add_ints"], override=True)
    f = rt.get_global_func("test_pf.c_add")
    assert f(1, 2, 3) == 6
    assert "test_pf.c_add" in rt.list_global_funcs()


@pytest.mark.cc
def test_accelerator_can_be_disabled(tmp_path):
    import os
    import subprocess
    import sys

    build_library(tmp_path, C_SOURCE, "disabled")  # compiled here, loaded in the child
    code = (
        "import ember, sys; m = ember.load_module(sys.argv[1]); f = m['add_ints']; "
        "print(f.accelerated, f(1, 2, 3))"
    )
    env = {**os.environ, "EMBER_FFI_ACCEL": "0"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "disabled.so")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert out.stdout.split() == ["False", "6"]


@pytest.mark.cc
def test_registered_object_crosses_c_by_identity(lib):
    from dataclasses import dataclass

    @ember.register_object("test_pf.Box")
    @dataclass(frozen=True)
    class Box(rt.Object):
        value: int

    box = Box(3)
    assert lib["echo"](box) is box
    assert lib["arg_code"](box) == rt.TypeCode.OBJECT_HANDLE
    got = lib["call_with_tensor"](lambda b: b.value * 2, box)  # C forwards it to Python
    assert got == 6


@pytest.mark.cc
def test_registered_identity_type_crosses_c_by_identity(lib):
    from ember.runtime.packed_func import IDENTITY_TYPES, register_identity_type

    class Token:
        pass

    key = register_identity_type(Token, rt.TypeCode.OBJECT_HANDLE)
    try:
        token = Token()
        assert lib["echo"](token) is token
        assert lib["arg_code"](token) == rt.TypeCode.OBJECT_HANDLE
        assert lib["arg_code"](rt.PythonModule({})) == rt.TypeCode.MODULE_HANDLE  # module.py's
    finally:
        IDENTITY_TYPES.unregister(key)
    with pytest.raises(EmberTypeError, match="cannot be passed"):
        lib["echo"](Token())
