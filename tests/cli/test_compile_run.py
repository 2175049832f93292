"""`ember compile` / `ember run` / `ember inspect` on a package, in process."""

import tarfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ember.cli.main import main
from ember.testing import run_onnxruntime

pytestmark = pytest.mark.cc


def _model() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.linspace(-1, 1, 24, dtype="float32").reshape(4, 6), "w")
    node = helper.make_node("MatMul", ["x", "wt"], ["m"], name="mm")
    nodes = [
        helper.make_node("Transpose", ["w"], ["wt"], name="t", perm=[1, 0]),
        node,
        helper.make_node("Relu", ["m"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "mm_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        initializer=[w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_compile_run_inspect(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    onnx.save(_model(), src)
    out = tmp_path / "m.tar"
    assert main(["compile", str(src), "-o", str(out), "--input-shape", "x:3,6", "--quiet"]) == 0
    assert tarfile.is_tarfile(out)
    x = np.random.default_rng(0).standard_normal((3, 6)).astype("float32")
    np.savez(tmp_path / "in.npz", x=x)
    args = ["run", str(out), "--inputs", str(tmp_path / "in.npz"), "--outputs"]
    assert main([*args, str(tmp_path / "out.npz"), "--print-time", "--repeat", "2"]) == 0
    got = np.load(tmp_path / "out.npz")["y"]
    np.testing.assert_allclose(got, run_onnxruntime(_model(), {"x": x})[0], rtol=1e-5, atol=1e-6)
    printed = capsys.readouterr().out
    assert "latency ms" in printed and "output 0: shape [3, 4]" in printed
    assert main(["inspect", str(out)]) == 0
    listing = capsys.readouterr().out
    assert "lib0.c" in listing and "graph.json" in listing


def test_compile_is_deterministic(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(_model(), src)
    for name in ("a.tar", "b.tar"):
        args = ["compile", str(src), "-o", str(tmp_path / name), "--input-shape", "x:2,6"]
        assert main([*args, "--quiet"]) == 0
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()


def test_run_random_inputs_and_errors(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    onnx.save(_model(), src)
    out = tmp_path / "m.tar"
    assert main(["compile", str(src), "-o", str(out), "--input-shape", "x:1,6", "--quiet"]) == 0
    assert main(["run", str(out), "--profile"]) == 0
    assert "Total" in capsys.readouterr().out
    np.savez(tmp_path / "bad.npz", y=np.zeros((1, 6), "float32"))
    assert main(["run", str(out), "--inputs", str(tmp_path / "bad.npz")]) == 2  # usage error
    assert "not model inputs" in capsys.readouterr().err
    (tmp_path / "junk.tar").write_bytes(b"not a tar at all")
    assert main(["run", str(tmp_path / "junk.tar")]) == 1
    assert "not a readable tar" in capsys.readouterr().err


def test_aot_package_runs_and_shows_its_memory_map(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    onnx.save(_model(), src)
    out = tmp_path / "m.tar"
    shape = ["--input-shape", "x:3,6", "--quiet"]
    assert main(["compile", str(src), "-o", str(out), "--executor", "aot", *shape]) == 0
    x = np.random.default_rng(0).standard_normal((3, 6)).astype("float32")
    np.savez(tmp_path / "in.npz", x=x)
    args = ["run", str(out), "--inputs", str(tmp_path / "in.npz"), "--outputs"]
    assert main([*args, str(tmp_path / "out.npz")]) == 0
    got = np.load(tmp_path / "out.npz")["y"]
    np.testing.assert_allclose(got, run_onnxruntime(_model(), {"x": x})[0], rtol=1e-5, atol=1e-6)
    capsys.readouterr()
    assert main(["inspect", str(out), "--show", "memory_map.json"]) == 0
    assert "lower bound" in capsys.readouterr().out
    svg = tmp_path / "mm.svg"
    assert main(["inspect", str(out), "--memory-svg", str(svg)]) == 0
    text = svg.read_text()
    assert text.startswith("<svg") and "workspace" in text and text.endswith("</svg>\n")
