"""Module, PythonModule, LibraryModule and load_module."""

from __future__ import annotations

from pathlib import Path

import pytest
from runtime_test_util import build_library

import ember
import ember.runtime as rt
from ember.errors import EmberTypeError, ModuleLoadError, RegistryError

C_SOURCE = r"""
EMBER_DLL int32_t lib_add(EMBER_ARGS) {
  ret->v_int64 = args[0].v_int64 + args[1].v_int64; *ret_code = EMBER_INT; return 0;
}
EMBER_DLL int32_t lib_sub(EMBER_ARGS) {
  ret->v_int64 = args[0].v_int64 - args[1].v_int64; *ret_code = EMBER_INT; return 0;
}
"""


def test_python_module_lookup_and_imports():
    base = rt.PythonModule({"add": lambda a, b: a + b}, type_key="base")
    top = rt.ModuleFromFuncs({"neg": lambda a: -a})
    assert top.type_key == "python" and base.type_key == "base"
    top.import_module(base)
    assert top.imports == [base]
    assert top["neg"](3) == -3
    assert top["add"](2, 3) == 5
    assert top.implements_function("neg")
    assert not top.implements_function("add")
    assert top.implements_function("add", query_imports=True)
    assert "add" in top
    with pytest.raises(RegistryError, match="has no function 'ad'; did you mean 'add'"):
        top.get_function("ad")
    with pytest.raises(RegistryError, match="no function 'add'"):
        top.get_function("add", query_imports=False)
    with pytest.raises(EmberTypeError, match="cycle"):
        base.import_module(top)
    with pytest.raises(EmberTypeError):
        top[0]


def test_module_miss_is_a_key_error():
    mod = rt.PythonModule({"alpha": lambda: 1})
    with pytest.raises(KeyError) as info:
        mod["beta"]
    assert "alpha" in str(info.value)


@pytest.mark.cc
def test_library_module(tmp_path):
    mod = build_library(tmp_path, C_SOURCE, "arith")
    assert mod.type_key == "library"
    assert mod["lib_add"](2, 40) == 42
    assert mod["lib_sub"](2, 40) == -38
    assert mod.function_names() == ["lib_add", "lib_sub"]
    assert mod.get_function("lib_add") is mod.get_function("lib_add")  # cached
    with pytest.raises(RegistryError, match="did you mean 'lib_add'"):
        mod["lib_ad"]
    # a library module can import a Python module
    mod.import_module(rt.PythonModule({"py_only": lambda: "py"}))
    assert mod["py_only"]() == "py"


def test_load_module_errors(tmp_path):
    weird = tmp_path / "model.weird"
    weird.write_text("x")
    with pytest.raises(ModuleLoadError, match="format 'weird'.*known formats: .*so"):
        ember.load_module(weird)
    with pytest.raises(ModuleLoadError, match="does not exist"):
        ember.load_module(tmp_path / "missing.so")
    broken = tmp_path / "broken.so"
    broken.write_text("not a library")
    with pytest.raises(ModuleLoadError, match="could not load shared library"):
        ember.load_module(broken)


def test_load_module_uses_registered_loaders(tmp_path):
    path = tmp_path / "thing.testfmt"
    path.write_text("payload")
    rt.register_func(
        "runtime.module.loadfile_testfmt",
        lambda p: rt.PythonModule({"read": Path(p).read_text}, type_key="testfmt"),
        override=True,
    )
    mod = ember.load_module(path)
    assert mod.type_key == "testfmt" and mod["read"]() == "payload"
    rt.register_func("runtime.module.loadfile_badfmt", lambda p: 3, override=True)
    bad = tmp_path / "x.badfmt"
    bad.write_text("")
    with pytest.raises(ModuleLoadError, match="returned int"):
        ember.load_module(bad)


def test_file_format_inference():
    from ember.runtime.library_module import file_format

    assert file_format("a/b/lib.so") == "so"
    assert file_format("lib.dylib") == "so"
    assert file_format("lib.DLL") == "so"
    assert file_format("pkg.tar.gz") == "tar.gz"
    assert file_format("model.tar") == "tar"
