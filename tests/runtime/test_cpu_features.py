"""Linked libraries record the CPU features their code needs and refuse a CPU without them."""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ember
from ember.cli.main import main
from ember.errors import ModuleLoadError
from ember.runtime import cpu_features
from ember.runtime.cpu_features import FEATURES_SYMBOL, required_features, target_cpu
from ember.runtime.library_module import LibraryModule

pytestmark = pytest.mark.cc
x86 = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 names")


def _model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_target_cpu_is_the_last_cpu_flag() -> None:
    assert target_cpu(["-O3", "-march=haswell", "-march=native"]) == "-march=native"
    assert target_cpu(["-O3"]) == ""


@x86
def test_features_come_from_the_compiler() -> None:
    v3 = required_features(["-march=x86-64-v3"])
    assert {"avx", "avx2", "fma"} <= set(v3)
    assert "avx" not in required_features(["-march=x86-64"])
    assert "avx512f" in required_features(["-march=skylake-avx512"])


def _so(tmp_path: Path, target: str) -> Path:
    mod, params = ember.frontend.from_onnx(_model())
    return ember.export_library(ember.build(mod, target=target, params=params), tmp_path / "m.so")


def test_library_records_its_features_and_loads_here(tmp_path: Path) -> None:
    lib = LibraryModule(_so(tmp_path, "c"))
    assert lib._string(FEATURES_SYMBOL) == " ".join(required_features(["-march=native"]))


def test_a_cpu_without_the_features_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _so(tmp_path, "c -mcpu=native")
    if not required_features(["-march=native"]):
        pytest.skip("this compiler reports no features for -march=native")
    monkeypatch.setattr(cpu_features, "host_features", lambda: frozenset({"fpu", "sse2"}))
    with pytest.raises(ModuleLoadError, match="uses CPU features this .* CPU lacks") as err:
        ember.load_module(path)
    assert "-mcpu=x86-64-v2" in str(err.value)
    assert main(["run", str(path)]) == 1
    assert "lacks" in capsys.readouterr().err


@x86
def test_a_portable_target_loads_on_a_baseline_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _so(tmp_path, "c -mcpu=x86-64")
    monkeypatch.setattr(cpu_features, "host_features", lambda: frozenset({"fpu", "sse2"}))
    gmod = ember.GraphExecutor(ember.load_module(path)["default"](ember.cpu(0)))
    gmod.set_input("x", np.array([-1, 2, -3, 4], "float32"))
    gmod.run()
    np.testing.assert_array_equal(gmod.get_output(0).numpy(), [0, 2, 0, 4])
