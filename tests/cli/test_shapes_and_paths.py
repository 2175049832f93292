"""Named symbolic dims on the command line, advice for each entry point, and models
loaded by the relative paths a user types (cwd in a temporary directory)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ember
from ember.cli.main import main
from ember.errors import FrontendError
from ember.executor.input_hint import mismatch_advice
from ember.support.advice import entry_point

DIM = "p2o.DynamicDimension.0"


def _symbolic(dims: list[object]) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "sym",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_named_dim_binds_from_python_and_its_error_speaks_python() -> None:
    mod, _ = ember.frontend.from_onnx(_symbolic([DIM, 3]), shape={DIM: 7})
    assert mod.main.params[0].type.shape == (7, 3)
    with pytest.raises(FrontendError) as err:
        ember.frontend.from_onnx(_symbolic([DIM, 3, None]))
    text = str(err.value)
    assert "from_onnx(..., shape={'x': (1, 3, 1)})" in text and f"shape={{'{DIM}': 1}}" in text
    assert "--input-shape" not in text


def test_unnamed_dim_advice_never_binds_question_mark() -> None:
    for dims in ([None, 3], ["?", 3]):
        with pytest.raises(FrontendError) as err:
            ember.frontend.from_onnx(_symbolic(dims))
        assert "'?'" not in str(err.value).split("static shapes")[1]
        assert "shape={'x': (1, 3)}" in str(err.value)


def test_full_shape_disagreeing_with_a_bound_dim_is_refused() -> None:
    with pytest.raises(FrontendError, match="give one value for both"):
        ember.frontend.from_onnx(_symbolic([DIM, 3]), shape={DIM: 7, "x": (1, 3)})
    mod, _ = ember.frontend.from_onnx(_symbolic([DIM, 3]), shape={DIM: 7, "x": (7, 3)})
    assert mod.main.params[0].type.shape == (7, 3)


@pytest.mark.cc
def test_cli_binds_named_dim_and_gives_cli_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "sym.onnx"
    onnx.save(_symbolic([DIM, 3]), src)
    out = str(tmp_path / "s.tar")
    assert main(["compile", str(src), "-o", out, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "--input-shape x:1,3" in err and f"--input-shape {DIM}:1" in err
    assert "from_onnx" not in err
    bad = ["--input-shape", f"{DIM}:7", "--input-shape", "x:1,3"]
    assert main(["compile", str(src), "-o", out, "--quiet", *bad]) == 1
    assert "give one value for both" in capsys.readouterr().err
    assert main(["compile", str(src), "-o", out, "--quiet", "--input-shape", f"{DIM}:7"]) == 0
    assert main(["run", out]) == 0
    assert "output 0: shape [7, 3]" in capsys.readouterr().out


def test_mismatch_advice_suggests_reshape_only_when_sizes_agree() -> None:
    assert ".reshape((2, 3))" in mismatch_advice("x", (2, 3), "float32", (6,), "float32")
    impossible = mismatch_advice("x", (2, 3), "float32", (1, 7), "float32")
    assert "reshape" not in impossible and "shape={'x': (1, 7)}" in impossible
    with entry_point("cli"):
        assert "--input-shape x:1,7" in mismatch_advice("x", (2, 3), "float32", (1, 7), "float32")


@pytest.mark.cc
def test_relative_paths_load_as_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    onnx.save(_symbolic([2, 3]), tmp_path / "m.onnx")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    mod, params = ember.frontend.from_onnx("m.onnx")
    arts = ember.build(mod, target="c", params=params)
    ember.export_library(arts, "m.so")
    arts.save("m_artifacts")
    assert main(["compile", "m.onnx", "-o", "m.tar", "--quiet"]) == 0
    x = np.arange(6, dtype="float32").reshape(2, 3) - 3
    for top in (
        ember.load_module("m.so"),
        ember.load_module("./m.so"),
        ember.load_module("m.tar"),
        ember.load_artifacts("m_artifacts", trust_native=True),
        ember.load_artifacts("./m_artifacts", trust_native=True),
    ):
        gmod = ember.GraphExecutor(top["default"](ember.cpu(0)))
        gmod.set_input("x", x)
        gmod.run()
        np.testing.assert_array_equal(gmod.get_output(0).numpy(), np.maximum(x, 0))
    for package in ("m.so", "./m.so", "m.tar", "./m.tar"):
        proc = subprocess.run(
            [sys.executable, "-m", "ember", "run", package], capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
