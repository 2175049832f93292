"""tests/executor/test_aot_c_interface.py for target ``llvm``: the kernels and the run
function in LLVM objects, the metadata (``ember_<mod>_get_metadata``), the model header
and the interface as C; a plain C program links them and runs the model through
``ember_<mod>_run``, bitwise like the graph executor. ``llvmjit`` has no C compiler to
turn the metadata into code, so it refuses the ``c`` interface naming ``llvm``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from llvm_build import load_c_tests

import ember
from ember.errors import CompileError
from ember.ir import Function, IRModule, TensorType, Tuple, Var, call

pytestmark = pytest.mark.cc

C_TESTS = Path(__file__).resolve().parents[2] / "executor" / "test_aot_c_interface.py"
load_c_tests(C_TESTS, "llvm_copy_test_aot_c_interface")  # for its main.c writer only
_program = sys.modules["llvm_copy_test_aot_c_interface"]._program
RUNTIME = Path(ember.__file__).parent / "runtime"


def _model() -> tuple[IRModule, dict[str, np.ndarray]]:
    x = Var("in:put", TensorType((2, 64), "float32"))
    w = Var("w", TensorType((2, 64), "float32"))
    h = call("relu", call("add", x, w))
    body = Tuple((call("sum", call("sigmoid", h), axes=(1,), keepdims=True), h))
    params = {"w": np.linspace(-1, 1, 128, dtype="float32").reshape(2, 64)}
    return IRModule.from_expr(Function((x, w), body)), params


def test_llvm_objects_run_as_a_plain_c_program(tmp_path: Path) -> None:
    mod, params = _model()
    arts = ember.build(mod, "llvm", params, executor="aot -interface-api=c", mod_name="tiny")
    names = {a.file_name for a in arts}
    assert {"ember_tiny_metadata.c", "ember_tiny.h", "ember_tiny_interface.c"} <= names
    md = ember.load_artifacts(arts, ember.cpu(0))["get_metadata"]()
    inputs = {"in:put": np.random.default_rng(0).standard_normal((2, 64)).astype("float32")}
    linked = []
    for art in arts:
        if art.loader == "native":
            (tmp_path / art.file_name).write_bytes(art.content)
            if art.file_name.endswith((".c", ".o")):
                linked.append(art.file_name)
    (tmp_path / "main.c").write_text(_program(md, "tiny"))
    cmd = ["cc", "-std=c11", "-O2", "-I.", f"-I{RUNTIME / 'include'}", "main.c", *linked]
    cmd += [str(RUNTIME / "src" / "runtime.c"), "-lpthread", "-lm", "-o", "model"]
    subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "in.bin").write_bytes(b"".join(inputs[p.name].tobytes() for p in md.inputs))
    subprocess.run(["./model", "in.bin", "out.bin"], cwd=tmp_path, check=True)
    data, at, got = (tmp_path / "out.bin").read_bytes(), 0, []
    for p in md.outputs:
        got.append(np.frombuffer(data[at : at + p.nbytes], dtype=p.dtype).reshape(p.shape))
        at += p.nbytes
    dev = ember.cpu(0)
    graph = ember.GraphExecutor(
        ember.load_artifacts(ember.build(mod, "llvm", params), dev)["default"](dev)
    )
    graph.set_input(**inputs)
    graph.run()
    want = [graph.get_output(i).numpy() for i in range(graph.get_num_outputs())]
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_llvmjit_refuses_the_c_interface_naming_a_back_end_that_has_it() -> None:
    mod, params = _model()
    with pytest.raises(CompileError, match="c interface needs"):
        ember.build(mod, "llvmjit", params, executor="aot -interface-api=c", mod_name="tiny")
