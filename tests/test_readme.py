"""Every snippet in README.md runs: the Python block as written, the CLI block's commands
(with the optional [..] parts dropped), on a small model saved as ``model.onnx``."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

pytestmark = [pytest.mark.cc, pytest.mark.slow]

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), flags=re.S)


def _model(path: Path) -> None:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[4, 4]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "readme",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])],
        initializer=[w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_readme_python_snippet_runs(tmp_path, monkeypatch):
    (snippet,) = _blocks("python")
    _model(tmp_path / "model.onnx")
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, str(README), "exec"), {})
    assert (tmp_path / "model.so").exists()


def test_readme_cli_snippet_runs(tmp_path):
    commands = [
        line.split("#")[0].strip()
        for block in _blocks("")
        for line in block.splitlines()
        if line.startswith(".venv/bin/ember ")
    ]
    assert commands, "the README lost its CLI block"
    _model(tmp_path / "model.onnx")
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype("float32")
    np.savez(tmp_path / "in.npz", x=x)
    for command in commands:
        words = shlex.split(re.sub(r"\[[^\]]*\]", "", command))[1:]
        out = subprocess.run(
            [sys.executable, "-m", "ember", *words], cwd=tmp_path, capture_output=True, text=True
        )
        assert out.returncode == 0, f"{command}: {out.stderr}"
    assert np.load(tmp_path / "out.npz")
