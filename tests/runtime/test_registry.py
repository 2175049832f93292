"""The global function registry: register, decorator, lookup, misses, listing."""

from __future__ import annotations

import pytest

import ember
import ember.runtime as rt
from ember.errors import RegistryError


def test_register_and_get():
    def double(x):
        return 2 * x

    assert ember.register_func("test_reg.double", double) is double
    f = ember.get_global_func("test_reg.double")
    assert isinstance(f, rt.PackedFunc)
    assert f(21) == 42
    assert "test_reg.double" in rt.list_global_funcs()


def test_decorator_form_and_override():
    @ember.register_func("test_reg.deco")
    def first(x):
        return x + 1

    assert first(1) == 2  # the decorator returns the function unchanged
    with pytest.raises(RegistryError, match="already registered"):
        ember.register_func("test_reg.deco", lambda x: x)
    ember.register_func("test_reg.deco", lambda x: x - 1, override=True)
    assert ember.get_global_func("test_reg.deco")(1) == 0


def test_miss_names_close_matches():
    ember.register_func("test_reg.matmul_kernel", lambda: None, override=True)
    with pytest.raises(RegistryError, match="did you mean 'test_reg.matmul_kernel'") as info:
        ember.get_global_func("test_reg.matmul_kernal")
    assert isinstance(info.value, KeyError)
    assert ember.get_global_func("test_reg.nothing_like_it", allow_missing=True) is None


def test_remove_and_bad_names():
    ember.register_func("test_reg.temp", lambda: 1, override=True)
    rt.remove_global_func("test_reg.temp")
    assert rt.get_global_func("test_reg.temp", allow_missing=True) is None
    with pytest.raises(RegistryError):
        ember.register_func("", lambda: 1)


def test_builtin_loader_is_registered():
    assert "runtime.module.loadfile_so" in rt.list_global_funcs()
