"""`ember run --threads N` sets the thread count of ember's pool for the run."""

import onnx
import pytest
from onnx import TensorProto, helper

import ember.runtime as rt
from ember.cli.main import main

pytestmark = pytest.mark.cc


def test_run_with_threads(tmp_path, capsys):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
    )
    src = tmp_path / "r.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), src)
    out = tmp_path / "r.tar"
    assert main(["compile", str(src), "-o", str(out), "--quiet"]) == 0
    before = rt.get_num_threads()
    try:
        assert main(["run", str(out), "--threads", "1", "--print-time", "--repeat", "1"]) == 0
        assert rt.get_num_threads() == 1
        with pytest.raises(SystemExit) as exc:  # refused by the parser: exit code 2
            main(["run", str(out), "--threads", "-2"])
        assert exc.value.code == 2
        assert "--threads: expected an integer 0-1024" in capsys.readouterr().err
    finally:
        rt.set_num_threads(before)
