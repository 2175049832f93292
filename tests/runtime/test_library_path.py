"""A library named by a bare file name loads from the current directory, never through
dlopen's LD_LIBRARY_PATH search (regression: README's load_module("model.so") failed)."""

import pytest

import ember
from ember.ir import Function, IRModule, TensorType, Var, call

pytestmark = pytest.mark.cc


def test_bare_file_name_is_resolved_against_the_current_directory(tmp_path, monkeypatch):
    x = Var("x", TensorType((4,), "float32"))
    arts = ember.build(IRModule.from_expr(Function((x,), call("relu", x))))
    ember.export_library(arts, tmp_path / "m.so")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LD_LIBRARY_PATH", "/nonexistent")
    lib = ember.load_module("m.so")
    assert lib["default"] is not None
