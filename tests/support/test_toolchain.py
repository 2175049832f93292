"""toolchain: compiling shared libraries, objects and programs; errors show the command."""

from __future__ import annotations

import ctypes
import subprocess

import pytest

from ember.errors import ToolchainError
from ember.support import toolchain

ADD_SOURCE = "int add(int a, int b) { return a + b; }\n"


@pytest.mark.cc
def test_compile_shared_and_load(tmp_path):
    src = tmp_path / "add.c"
    src.write_text(ADD_SOURCE)
    out = toolchain.compile_shared([src], tmp_path / "sub" / "libadd.so", openmp=False)
    assert out.exists() and out.parent.name == "sub"
    assert ctypes.CDLL(str(out)).add(2, 3) == 5
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.cc
def test_output_is_deterministic(tmp_path):
    src = tmp_path / "add.c"
    src.write_text(ADD_SOURCE)
    a = toolchain.compile_shared([src], tmp_path / "a.so")
    b = toolchain.compile_shared([src], tmp_path / "b.so")
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.cc
def test_compile_object_then_link(tmp_path):
    src = tmp_path / "add.c"
    src.write_text(ADD_SOURCE)
    main = tmp_path / "main.c"
    main.write_text(
        '#include <stdio.h>\nint add(int, int);\nint main(void) { printf("%d", add(4, 5)); }\n'
    )
    obj = toolchain.compile_object(src, tmp_path / "add.o", flags=["-DUNUSED=1"])
    exe = toolchain.compile_executable([main, obj], tmp_path / "prog")
    assert subprocess.run([str(exe)], capture_output=True, text=True).stdout == "9"


@pytest.mark.cc
def test_compile_error_shows_command_and_output(tmp_path):
    src = tmp_path / "bad.c"
    src.write_text("int broken( { return; }\n")
    with pytest.raises(ToolchainError) as info:
        toolchain.compile_shared([src], tmp_path / "bad.so", flags=["-DMARKER_FLAG"])
    msg = str(info.value)
    assert "command:" in msg and "-DMARKER_FLAG" in msg and "bad.c" in msg
    assert "error" in msg
    assert not (tmp_path / "bad.so").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_missing_sources_and_compiler(tmp_path):
    with pytest.raises(ToolchainError, match="do not exist"):
        toolchain.compile_shared([tmp_path / "nope.c"], tmp_path / "x.so")
    with pytest.raises(ToolchainError, match="no source files"):
        toolchain.compile_shared([], tmp_path / "x.so")
    src = tmp_path / "a.c"
    src.write_text(ADD_SOURCE)
    with pytest.raises(ToolchainError, match="not found"):
        toolchain.compile_shared([src], tmp_path / "x.so", cc="/nonexistent/compiler-xyz")
    assert not toolchain.compiler_available("/nonexistent/compiler-xyz")
    assert toolchain.compiler(cc="ccache cc") == ["ccache", "cc"]
