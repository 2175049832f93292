"""The ctypes declarations in c_api.py agree with the C header runtime_api.h."""

from __future__ import annotations

import ctypes
import re
import subprocess
import sys

import pytest

from ember.errors import FFIError
from ember.runtime import c_api, libruntime
from ember.support.toolchain import compile_executable

STRUCTS = {
    "DLDevice": (c_api.DLDevice, ["device_type", "device_id"]),
    "DLDataType": (c_api.DLDataType, ["code", "bits", "lanes"]),
    "DLTensor": (
        c_api.DLTensor,
        ["data", "device", "ndim", "dtype", "shape", "strides", "byte_offset"],
    ),
    "DLManagedTensor": (c_api.DLManagedTensor, ["dl_tensor", "manager_ctx", "deleter"]),
    "EmberValue": (
        c_api.EmberValue,
        ["v_int64", "v_float64", "v_handle", "v_str", "v_type", "v_device"],
    ),
    "EmberByteArray": (c_api.EmberByteArray, ["data", "size"]),
    "EmberParallelGroupEnv": (c_api.EmberParallelGroupEnv, ["sync_handle", "num_task"]),
    "EmberCallFrame": (
        c_api.EmberCallFrame,
        [
            "func",
            "resource_handle",
            "handle",
            "args",
            "type_codes",
            "num_args",
            "ret_type_code",
            "ret_value",
        ],
    ),
}

TYPE_CODE_NAMES = {
    "INT": "EMBER_INT",
    "UINT": "EMBER_UINT",
    "FLOAT": "EMBER_FLOAT",
    "OPAQUE_HANDLE": "EMBER_OPAQUE_HANDLE",
    "NULL": "EMBER_NULL",
    "DATA_TYPE": "EMBER_DATA_TYPE",
    "DEVICE": "EMBER_DEVICE",
    "DLTENSOR_HANDLE": "EMBER_DLTENSOR_HANDLE",
    "OBJECT_HANDLE": "EMBER_OBJECT_HANDLE",
    "MODULE_HANDLE": "EMBER_MODULE_HANDLE",
    "PACKED_FUNC_HANDLE": "EMBER_PACKED_FUNC_HANDLE",
    "STR": "EMBER_STR",
    "BYTES": "EMBER_BYTES",
    "NDARRAY_HANDLE": "EMBER_NDARRAY_HANDLE",
}


def _probe_source() -> str:
    lines = ["#include <ember/runtime_api.h>", "#include <stdio.h>", "#include <stddef.h>"]
    lines.append("int main(void) {")
    for cname, (_, fields) in STRUCTS.items():
        lines.append(f'  printf("size {cname} %zu\\n", sizeof({cname}));')
        for f in fields:
            lines.append(f'  printf("offset {cname}.{f} %zu\\n", offsetof({cname}, {f}));')
    for cname in TYPE_CODE_NAMES.values():
        lines.append(f'  printf("enum {cname} %d\\n", (int){cname});')
    for member in c_api.DLDeviceType:
        lines.append(f'  printf("enum {member.name} %d\\n", (int){member.name});')
    for member in c_api.DLDataTypeCode:
        lines.append(f'  printf("enum {member.name} %d\\n", (int){member.name});')
    lines.append('  printf("enum EMBER_ABI_VERSION %d\\n", EMBER_ABI_VERSION);')
    lines.append("  return 0;\n}")
    return "\n".join(lines)


@pytest.mark.cc
def test_struct_layout_and_enums_agree(tmp_path):
    src = tmp_path / "probe.c"
    src.write_text(_probe_source())
    exe = compile_executable([src], tmp_path / "probe", include_dirs=[libruntime.include_dir()])
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    facts = {}
    for line in out.splitlines():
        kind, key, value = line.split()
        facts[(kind, key)] = int(value)
    for cname, (cls, fields) in STRUCTS.items():
        assert ctypes.sizeof(cls) == facts[("size", cname)], cname
        assert [f[0] for f in cls._fields_] == fields, cname
        for f in fields:
            assert getattr(cls, f).offset == facts[("offset", f"{cname}.{f}")], f"{cname}.{f}"
    for py_name, cname in TYPE_CODE_NAMES.items():
        assert c_api.TypeCode[py_name] == facts[("enum", cname)]
    for member in list(c_api.DLDeviceType) + list(c_api.DLDataTypeCode):
        assert member.value == facts[("enum", member.name)]
    assert facts[("enum", "EMBER_ABI_VERSION")] == c_api.ABI_VERSION
    assert ctypes.sizeof(c_api.EmberValue) == 8


def _header_prototypes() -> dict[str, int]:
    text = libruntime.header_path().read_text()
    protos = {}
    for match in re.finditer(r"EMBER_DLL\s+[\w\s\*]+?\b(Ember\w+)\s*\(([^;]*?)\);", text, re.S):
        name, params = match.group(1), match.group(2).strip()
        count = 0 if params in ("", "void") else len(re.sub(r"\([^()]*\)", "", params).split(","))
        if "(*fin)" in params:  # a function-pointer parameter with its own parentheses
            count = len(re.sub(r"\(\*fin\)\([^)]*\)", "fin", params).split(","))
        protos[name] = count
    return protos


def test_every_header_function_is_declared_with_matching_arity():
    protos = _header_prototypes()
    assert set(protos) == set(c_api.PROTOTYPES), set(protos) ^ set(c_api.PROTOTYPES)
    for name, count in protos.items():
        assert len(c_api.PROTOTYPES[name][1]) == count, name


def test_packed_signature_matches_header():
    text = libruntime.header_path().read_text()
    assert re.search(
        r"typedef int32_t \(\*EmberPackedCFunc\)\(EmberValue\* args, int32_t\* type_codes, "
        r"int32_t num_args,\s*EmberValue\* out_ret_value, int32_t\* out_ret_tcode,\s*"
        r"void\* resource_handle\);",
        text,
    )
    assert c_api.EmberPackedCFunc._restype_ is ctypes.c_int32
    assert len(c_api.EmberPackedCFunc._argtypes_) == 6


@pytest.mark.cc
def test_bound_prototypes_and_abi_version():
    lib = c_api.lib()
    for name, (restype, argtypes) in c_api.PROTOTYPES.items():
        fn = getattr(lib, name)
        assert fn.restype is restype
        assert tuple(fn.argtypes) == argtypes
    assert lib.EmberRuntimeABIVersion() == c_api.ABI_VERSION


@pytest.mark.cc
def test_check_call_raises_ffi_error_with_the_c_message():
    c_api.lib().EmberAPISetLastError(b"something broke in C")
    with pytest.raises(FFIError, match="something broke in C"):
        c_api.check_call(-1)
    c_api.check_call(0)


@pytest.mark.cc
def test_last_error_is_thread_local():
    import threading

    c_api.lib().EmberAPISetLastError(b"main thread")
    seen = []

    def worker():
        c_api.lib().EmberAPISetLastError(b"worker thread")
        seen.append(c_api.last_error())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == ["worker thread"]
    assert c_api.last_error() == "main thread"


@pytest.mark.cc
@pytest.mark.parametrize("order", ["dlpack_first", "ember_first"])
def test_header_coexists_with_dlpack_h(tmp_path, order):
    tvm_ffi_libinfo = pytest.importorskip("tvm_ffi.libinfo")
    dlpack_dir = tvm_ffi_libinfo.find_dlpack_include_path()
    includes = ["#include <dlpack/dlpack.h>", "#include <ember/runtime_api.h>"]
    if order == "ember_first":
        includes.reverse()
    src = tmp_path / "both.c"
    src.write_text(
        "\n".join(includes)
        + "\nint probe(DLTensor* t) { return t->ndim + (int)sizeof(EmberValue); }\n"
    )
    from ember.support.toolchain import compile_object

    compile_object(src, tmp_path / "both.o", include_dirs=[dlpack_dir, libruntime.include_dir()])


@pytest.mark.cc
def test_prebuilt_runtime_library_is_used_without_compiling(tmp_path):
    import os
    import shutil
    import sys

    prebuilt = tmp_path / "libprebuilt_runtime.so"
    shutil.copy(libruntime.build(), prebuilt)
    code = (
        "from ember.runtime import c_api, libruntime; c_api.lib(); "
        "print(libruntime.build(), c_api.lib().EmberRuntimeABIVersion())"
    )
    env = {**os.environ, "EMBER_RUNTIME_LIB": str(prebuilt), "CC": "/nonexistent/cc"}
    env["EMBER_CACHE_DIR"] = str(tmp_path / "empty_cache")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split() == [str(prebuilt), str(c_api.ABI_VERSION)]
    env["EMBER_RUNTIME_LIB"] = str(tmp_path / "missing.so")
    failed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert failed.returncode != 0 and "EMBER_RUNTIME_LIB points to" in failed.stderr


def test_load_hook_runs_at_once_when_loaded() -> None:
    seen: list[ctypes.CDLL] = []
    lib = c_api.lib()
    c_api.add_load_hook("test.seen", seen.append)
    try:
        assert seen == [lib]
        assert "global_fallback" in c_api.LOAD_HOOKS  # registry.py installs the fallback
    finally:
        c_api.LOAD_HOOKS.unregister("test.seen")


def test_load_hook_registered_before_load_runs_at_load() -> None:
    code = (
        "from ember.runtime import c_api\n"
        "seen = []\n"
        "c_api.add_load_hook('test.seen', seen.append)\n"
        "print(len(seen), end=' ')\n"
        "c_api.lib()\n"
        "print(len(seen), seen[0] is c_api.lib())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "1", "True"]
